"""Generated schemas (structs, nested structs, arrays, maps and primitives in any order) and rows: the stats
read from the footer equal what the rows say, for any indexed-column count and string prefix.

The files are written by pyarrow (no Spark: hundreds of cases in seconds), so their column layout is that
of any parquet writer; float bounds are then left out (parquet-cpp leaves NaN out of them), which the
check accepts only for that reason. Spark-written footers are covered in test_file_stats.py.
"""

from __future__ import annotations

import datetime
import decimal
import json
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import Schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyarrow.fs import LocalFileSystem

from airflow_provider_deltamerge.delta.format.stats import footer_stats
from airflow_provider_deltamerge.delta.format.stats_columns import StatsSettings, indexed_columns
from tests.file_stats import check_file

UTC = datetime.UTC
PRIMITIVES: list[pa.DataType] = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(9, 2),
    pa.decimal128(30, 8),
    pa.string(),
    pa.binary(),
    pa.bool_(),
    pa.date32(),
    pa.timestamp("us", "UTC"),
    pa.timestamp("us"),
]
NAMES = st.text("abcdefgh", min_size=1, max_size=3)


def types(depth: int = 0) -> st.SearchStrategy[pa.DataType]:
    primitive = st.sampled_from(PRIMITIVES)
    if depth >= 2:
        return primitive
    nested = st.one_of(
        st.builds(pa.list_, primitive),
        st.builds(pa.map_, st.just(pa.string()), primitive),
        st.lists(st.tuples(NAMES, types(depth + 1)), min_size=1, max_size=3, unique_by=lambda f: f[0]).map(
            pa.struct
        ),
    )
    return st.one_of(primitive, nested)


def values(data_type: pa.DataType) -> st.SearchStrategy[Any]:
    """Python values of ``data_type``, NULL included."""
    if pa.types.is_struct(data_type):
        fields = {f.name: values(f.type) for f in data_type}
        return st.none() | st.fixed_dictionaries(fields)
    if pa.types.is_map(data_type):
        entry = st.tuples(st.text(max_size=3), values(data_type.item_type))
        return st.none() | st.lists(entry, max_size=3, unique_by=lambda e: e[0])
    if pa.types.is_list(data_type):
        return st.none() | st.lists(values(data_type.value_type), max_size=3)
    return st.none() | _primitive_values(data_type)


def _primitive_values(data_type: pa.DataType) -> st.SearchStrategy[Any]:
    if pa.types.is_integer(data_type):
        bits = data_type.bit_width
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if pa.types.is_floating(data_type):
        return st.floats(width=data_type.bit_width)
    if pa.types.is_decimal(data_type):
        limit = decimal.Decimal(10) ** (data_type.precision - data_type.scale) - 1
        return st.decimals(-limit, limit, places=data_type.scale, allow_nan=False, allow_infinity=False)
    if pa.types.is_string(data_type):
        return st.text(max_size=12)
    if pa.types.is_binary(data_type):
        return st.binary(max_size=4)
    if pa.types.is_boolean(data_type):
        return st.booleans()
    if pa.types.is_date(data_type):
        return st.dates(datetime.date(1, 1, 1), datetime.date(9999, 12, 31))
    zone = st.just(UTC) if data_type.tz else st.none()
    return st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1), timezones=zone)


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    fields = draw(st.lists(st.tuples(NAMES, types()), min_size=1, max_size=6, unique_by=lambda f: f[0]))
    schema = pa.schema(fields)
    count = draw(st.integers(1, 12))
    columns = {f.name: draw(st.lists(values(f.type), min_size=count, max_size=count)) for f in schema}
    return pa.table(columns, schema=schema)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    table=tables(),
    row_group_size=st.integers(1, 6),
    num_indexed=st.integers(-1, 8),
    prefix=st.integers(0, 6),
)
def test_footer_stats_equal_what_the_rows_say(
    table: pa.Table, row_group_size: int, num_indexed: int, prefix: int
) -> None:
    stats_settings = StatsSettings(num_indexed_cols=num_indexed, string_prefix_length=prefix)
    delta_schema = json.loads(Schema.from_arrow(table.schema).to_json())
    indexed = indexed_columns(delta_schema, [], stats_settings)
    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/f.parquet"
        pq.write_table(table, path, row_group_size=row_group_size)
        stats = footer_stats(pq.read_metadata(path), indexed, string_prefix_length=prefix)
        check_file(LocalFileSystem(), path, stats, indexed, stats_settings)
