"""Column defaults (writer feature ``allowColumnDefaults``): what an INSERT clause leaves out gets the
column's default, as Delta gives it (the default's SQL is kept in the field's ``CURRENT_DEFAULT`` metadata).

Expected rows are written out from Delta's behaviour: an INSERT with a column list fills the columns it
omits with their default (NULL where there is none); with schema evolution an ``INSERT *`` from a source
that lacks a target column fills it the same way; UPDATE never applies a default; and the ``DEFAULT``
keyword is not resolved inside a MERGE (Delta 4.4), so it fails as an unknown column does.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import ClauseResolutionError
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert, insert_all, update
from airflow_provider_deltamerge.spec.sql_parse import parse_merge_sql
from tests.conftest import table_state
from tests.engine.feature_tables import feature_table, parquet_source
from tests.oracle import sorted_rows

FIELDS = [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "qty", "type": "integer", "nullable": True, "metadata": {"CURRENT_DEFAULT": "42"}},
    {
        "name": "note",
        "type": "string",
        "nullable": True,
        "metadata": {"CURRENT_DEFAULT": "concat('n', '/a')"},
    },
    {"name": "extra", "type": "string", "nullable": True, "metadata": {}},
]


def defaults_table(spark, tmp_path: Path) -> str:
    """A table with defaults on qty and note, holding (1, 5, 'kept', 'x'), written by the engine itself."""
    rows = {
        "id": pa.array([1], pa.int64()),
        "qty": pa.array([5], pa.int32()),
        "note": pa.array(["kept"]),
        "extra": pa.array(["x"]),
    }
    return feature_table(spark, tmp_path, "allowColumnDefaults", FIELDS, **rows)


def test_an_insert_fills_the_columns_it_leaves_out_with_their_defaults(spark, tmp_path):
    target = defaults_table(spark, tmp_path)
    new = parquet_source(tmp_path, "s", id=pa.array([1, 2], pa.int64()), qty=pa.array([7, 8], pa.int32()))
    spec = MergeSpec(
        target=target,
        source=PathSource(new),
        condition="t.id = s.id",
        clauses=(update({"extra": "'updated'"}), insert({"id": "s.id"})),
    )
    run_merge(spark, spec)
    # The update sets only extra (no default applies); the insert gets qty's and note's defaults, extra NULL
    assert sorted_rows(target) == [
        {"id": 1, "qty": 5, "note": "kept", "extra": "updated"},
        {"id": 2, "qty": 42, "note": "n/a", "extra": None},
    ]
    assert [f.metadata for f in DeltaTable(target).schema().fields][1] == {"CURRENT_DEFAULT": "42"}


def test_merge_into_text_with_a_column_list_gets_the_defaults(spark, tmp_path):
    target = defaults_table(spark, tmp_path)
    new = parquet_source(tmp_path, "s", id=pa.array([3], pa.int64()), extra=pa.array(["e"]))
    spec = parse_merge_sql(
        f"MERGE INTO delta.`{target}` AS t USING parquet.`{new}` AS s ON t.id = s.id "
        "WHEN NOT MATCHED THEN INSERT (id, extra) VALUES (s.id, s.extra)"
    )
    run_merge(spark, spec)
    assert {"id": 3, "qty": 42, "note": "n/a", "extra": "e"} in sorted_rows(target)


def test_insert_star_with_schema_evolution_fills_missing_source_columns_with_defaults(spark, tmp_path):
    target = defaults_table(spark, tmp_path)
    new = parquet_source(
        tmp_path, "s", id=pa.array([4], pa.int64()), extra=pa.array(["e"]), tag=pa.array(["t"])
    )
    spec = MergeSpec(
        target=target,
        source=PathSource(new),
        condition="t.id = s.id",
        clauses=(insert_all(),),
        schema_evolution=True,
    )
    run_merge(spark, spec)
    assert sorted_rows(target)[-1] == {"id": 4, "qty": 42, "note": "n/a", "extra": "e", "tag": "t"}
    # The evolved schema keeps the defaults
    assert [f.metadata for f in DeltaTable(target).schema().fields][1:3] == [
        {"CURRENT_DEFAULT": "42"},
        {"CURRENT_DEFAULT": "concat('n', '/a')"},
    ]


def test_the_default_keyword_is_not_resolved_inside_a_merge(spark, tmp_path):
    target = defaults_table(spark, tmp_path)
    before = table_state(target)
    new = parquet_source(tmp_path, "s", id=pa.array([5], pa.int64()))
    spec = MergeSpec(
        target=target,
        source=PathSource(new),
        condition="t.id = s.id",
        clauses=(insert({"id": "s.id", "qty": "DEFAULT"}),),
    )
    with pytest.raises(ClauseResolutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
    assert "DEFAULT" in str(raised.value)
    assert table_state(target) == before
