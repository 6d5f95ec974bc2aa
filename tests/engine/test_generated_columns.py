"""Generated columns (writer feature ``generatedColumns``, the expression in a field's
``delta.generationExpression`` metadata, as ``CREATE TABLE ... GENERATED ALWAYS AS`` writes it).

Expected rows follow Delta's documented behaviour (PROTOCOL.md "Generated Columns", Delta's generated
columns docs): a value the writer does not provide is computed from the expression over the row written
(an UPDATE that changes the columns it reads recomputes it); a value the writer does provide must satisfy
``(value <=> expression) IS TRUE``, else the write fails as a CHECK constraint named "Generated Column" and
nothing is committed.
"""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import DeltaMergeError, MergeExecutionError
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    delete,
    insert,
    insert_all,
    update,
    update_all,
)
from tests.conftest import table_state
from tests.engine.delta_outcomes import delta_error_classes, jvm_errors
from tests.engine.feature_tables import feature_table, parquet_source
from tests.oracle import sorted_rows

FIELDS = [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "qty", "type": "integer", "nullable": True, "metadata": {}},
    {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
    {
        "name": "total",
        "type": "integer",
        "nullable": True,
        "metadata": {"delta.generationExpression": "qty * 10"},
    },
    {
        "name": "day",
        "type": "date",
        "nullable": True,
        "metadata": {"delta.generationExpression": "CAST(ts AS DATE)"},
    },
]
T1 = datetime.datetime(2024, 5, 1, 10, 0, tzinfo=datetime.UTC)
T2 = datetime.datetime(2024, 5, 2, 23, 30, tzinfo=datetime.UTC)


def ids(*values: int) -> pa.Array:
    return pa.array(values, pa.int64())


def qtys(*values: int) -> pa.Array:
    return pa.array(values, pa.int32())


def generated_table(spark, tmp_path: Path) -> str:
    """Rows (1, 5, T1) and (2, 6, T1), their generated columns computed by the engine's own first merge."""
    rows = {"id": ids(1, 2), "qty": qtys(5, 6), "ts": pa.array([T1, T1])}
    return feature_table(spark, tmp_path, "generatedColumns", FIELDS, **rows)


def test_columns_a_merge_leaves_out_are_generated_on_insert_and_update(spark, tmp_path):
    target = generated_table(spark, tmp_path)
    assert sorted_rows(target) == [
        {"id": 1, "qty": 5, "ts": T1, "total": 50, "day": datetime.date(2024, 5, 1)},
        {"id": 2, "qty": 6, "ts": T1, "total": 60, "day": datetime.date(2024, 5, 1)},
    ]
    new = parquet_source(tmp_path, "s", id=ids(1, 3), qty=qtys(7, 8), ts=pa.array([T2, T2]))
    spec = MergeSpec(
        target=target,
        source=PathSource(new),
        condition="t.id = s.id",
        clauses=(update({"qty": "s.qty"}), insert({"id": "s.id", "qty": "s.qty", "ts": "s.ts"})),
    )
    run_merge(spark, spec)
    # id 1: qty updated, total recomputed, ts and day kept; id 2 copied as it was; id 3 generated in full
    assert sorted_rows(target) == [
        {"id": 1, "qty": 7, "ts": T1, "total": 70, "day": datetime.date(2024, 5, 1)},
        {"id": 2, "qty": 6, "ts": T1, "total": 60, "day": datetime.date(2024, 5, 1)},
        {"id": 3, "qty": 8, "ts": T2, "total": 80, "day": datetime.date(2024, 5, 2)},
    ]


def delta_refuses(spark, target: str, statement: str) -> list[str]:
    """The error classes Delta's own runtime gives ``statement`` on a copy of ``target``."""
    copy = f"{target}-delta"
    shutil.copytree(target, copy)
    try:
        spark.sql(statement.format(target=copy)).collect()
    except (PySparkException, Py4JJavaError) as err:
        return delta_error_classes(jvm_errors(err))
    return []


def test_star_clauses_need_the_generated_columns_in_the_source_as_delta_does(spark, tmp_path):
    # Delta 4.4 expands * over every target column, generated ones too: a source that lacks one is refused
    target = generated_table(spark, tmp_path)
    before = table_state(target)
    new = parquet_source(tmp_path, "s", id=ids(1, 2, 4), qty=qtys(9, -1, 4), ts=pa.array([T2, T2, T2]))
    star = f"MERGE INTO delta.`{{target}}` AS t USING parquet.`{new}` AS s ON t.id = s.id WHEN NOT MATCHED "
    assert delta_refuses(spark, target, star + "THEN INSERT *")[0] == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
    for clause in (update_all(), insert_all()):
        spec = MergeSpec(target=target, source=PathSource(new), condition="t.id = s.id", clauses=(clause,))
        with pytest.raises(DeltaMergeError) as refused:
            run_merge(spark, spec)
        assert refused.value.error_class == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
        assert "Cannot resolve total in " in str(refused.value)
    assert table_state(target) == before


def test_star_clauses_with_schema_evolution_generate_what_the_source_lacks(spark, tmp_path):
    target = generated_table(spark, tmp_path)
    new = parquet_source(tmp_path, "s", id=ids(1, 2, 4), qty=qtys(9, -1, 4), ts=pa.array([T2, T2, T2]))
    spec = MergeSpec(
        target=target,
        source=PathSource(new),
        condition="t.id = s.id",
        clauses=(delete(condition="s.qty < 0"), update_all(), insert_all()),
        schema_evolution=True,
    )
    run_merge(spark, spec)
    assert sorted_rows(target) == [
        {"id": 1, "qty": 9, "ts": T2, "total": 90, "day": datetime.date(2024, 5, 2)},
        {"id": 4, "qty": 4, "ts": T2, "total": 40, "day": datetime.date(2024, 5, 2)},
    ]


def test_a_provided_value_that_agrees_with_the_expression_is_written(spark, tmp_path):
    target = generated_table(spark, tmp_path)
    no_time = pa.array([None], pa.timestamp("us", tz="UTC"))
    new = parquet_source(
        tmp_path, "s", id=ids(5), qty=qtys(3), ts=no_time, total=qtys(30), day=pa.array([None], pa.date32())
    )
    spec = MergeSpec(target=target, source=PathSource(new), condition="t.id = s.id", clauses=(insert_all(),))
    run_merge(spark, spec)
    assert {"id": 5, "qty": 3, "ts": None, "total": 30, "day": None} in sorted_rows(target)


def test_a_provided_value_that_contradicts_the_expression_fails_and_commits_nothing(spark, tmp_path):
    target = generated_table(spark, tmp_path)
    before = table_state(target)
    new = parquet_source(tmp_path, "s", id=ids(1), qty=qtys(3))
    spec = MergeSpec(
        target=target,
        source=PathSource(new),
        condition="t.id = s.id",
        clauses=(update({"qty": "s.qty", "total": "7"}),),
    )
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    # Delta's text (tests/engine/test_constraint_violations.py runs Delta on the same violation)
    shown = "CHECK constraint Generated Column (total <=> (qty * 10)) violated by row with values:"
    assert f"{shown}\n - qty : 3\n - total : 7\n" in str(raised.value)
    assert table_state(target) == before
