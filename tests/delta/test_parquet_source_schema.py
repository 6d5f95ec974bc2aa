"""A parquet path source's schema as the pre-flight reads it (one footer, the partition directories' names)
against the schema Spark itself reads from the same directory, written by Spark."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge.delta.log.log_schema import read_path_schema
from airflow_provider_deltamerge.delta.log.parquet_source_schema import partition_column_type
from tests.engine.conftest import ENGINE_SETTINGS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_counter = itertools.count()

# Directory values an upstream job writes: numbers of every width, dates, timestamps, words that look almost
# like them, and nulls (Hive's default partition).
partition_values = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.integers(0, 999).map(lambda n: f"{n:05d}"),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["1e5", "-2.5E-3", "NaN", "Infinity", "1.0d", "inf", "1_000", ".5", "5."]),
    st.dates().map(str),
    st.datetimes().map(lambda t: t.strftime("%Y-%m-%d %H:%M:%S")),
    st.sampled_from(["2024-02-30", "2024-1-5", "20240105", "x", "a b", "café", "2024-01-01T00:00:00"]),
    st.none(),
)


@settings(ENGINE_SETTINGS, max_examples=max(ENGINE_SETTINGS.max_examples // 2, 1))
@given(columns=st.lists(st.lists(partition_values, min_size=1, max_size=3), min_size=1, max_size=2))
def test_partition_columns_are_typed_as_spark_types_them(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, columns: list[list[str | None]]
) -> None:
    rows = [
        (i, *(values[i % len(values)] for values in columns)) for i in range(max(len(v) for v in columns))
    ]
    names = ["id", *(f"p{i}" for i in range(len(columns)))]
    path = str(tmp_path_factory.mktemp("parquet") / f"source{next(_counter)}")
    frame = spark.createDataFrame(rows, "id int, " + ", ".join(f"{n} string" for n in names[1:]))
    frame.write.partitionBy(*names[1:]).parquet(path)

    ours = read_path_schema(path, "parquet")
    assert ours is not None
    assert [(f["name"], f["type"]) for f in ours["fields"]] == [
        (f["name"], f["type"]) for f in spark.read.parquet(path).schema.jsonValue()["fields"]
    ]


def test_a_column_in_both_the_file_and_its_directory_is_read_as_spark_reads_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "day=2024-01-01").mkdir()
    pq.write_table(pa.table({"id": [1], "day": ["x"]}), tmp_path / "day=2024-01-01" / "f.parquet")
    ours = read_path_schema(str(tmp_path), "parquet")
    assert ours is not None
    assert [(f["name"], f["type"]) for f in ours["fields"]] == [
        (f["name"], f["type"]) for f in spark.read.parquet(str(tmp_path)).schema.jsonValue()["fields"]
    ]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1", "2"], "integer"),
        (["1", str(2**40)], "long"),
        (["1", str(2**70)], "decimal(22,0)"),
        (["1", "2.5"], "double"),
        ([str(2**40), "2.5"], "string"),
        (["1e5", "7"], "decimal(10,0)"),
        (["2024-01-01", "2024-01-01 10:00:00"], "timestamp"),
        (["2024-01-01", "1"], "string"),
        (["__HIVE_DEFAULT_PARTITION__"], "void"),
        (["__HIVE_DEFAULT_PARTITION__", "3"], "integer"),
    ],
)
def test_partition_type_widening(values: list[str], expected: str) -> None:
    assert partition_column_type(values) == expected


def test_the_source_schema_is_read_without_pandas(tmp_path: Path) -> None:
    """The pre-flight runs in the task's process: importing it must not drag in pandas (issue 38)."""
    import subprocess

    pq.write_table(pa.table({"id": [1]}), tmp_path / "f.parquet")
    code = (
        "import sys\n"
        "from airflow_provider_deltamerge.delta.log.log_schema import read_path_schema\n"
        f"assert read_path_schema({str(tmp_path)!r}, 'parquet')['fields'][0]['name'] == 'id'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas' or m == 'pyarrow.dataset'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
