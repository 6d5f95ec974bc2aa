"""Session confs Delta honours change the merge as they change Delta's.

Expected outcomes are Delta's documented behaviour (``DeltaSQLConf``, delta-update.mdx and the reference in
``../shared/reference``), written out as values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine import session_confs as confs
from airflow_provider_deltamerge.exceptions import ClauseResolutionError, MergeExecutionError
from airflow_provider_deltamerge.spec import MergeSpec, insert, insert_all, update, update_all
from tests.conftest import make_table, table_state
from tests.engine.delta_outcomes import delta_error_classes, first_sentence, jvm_errors
from tests.engine.test_executors import MULTIPLE_MATCH, rows, source_file
from tests.oracle import sorted_rows


@pytest.fixture
def session_conf(spark: Any) -> Iterator[Any]:
    """Set session confs for one test; every one is unset after it."""
    keys: list[str] = []

    def set_conf(**values: str) -> None:
        for key, value in values.items():
            spark.conf.set(key, value)
            keys.append(key)

    yield set_conf
    for key in keys:
        spark.conf.unset(key)


def set_conf(session_conf: Any, key: str, value: str) -> None:
    session_conf(**{key: value})


def columns(path: str) -> list[str]:
    return [f.name for f in DeltaTable(path).schema().fields]


def test_auto_merge_evolves_the_schema_as_with_schema_evolution(spark, tmp_path, session_conf):
    # delta-update.mdx: with autoMerge, UPDATE * / INSERT * run over the source's columns; the table gains
    # `extra`, NULL nowhere the source gave it.
    target = make_table(tmp_path / "t", rows([1, 2]))
    source = source_file(
        tmp_path, pa.table({"id": pa.array([2, 3], pa.int64()), "value": [7, 8], "extra": ["b", "c"]})
    )
    spec = MergeSpec(target, source, "t.id = s.id", (update_all(), insert_all()))
    set_conf(session_conf, confs.AUTO_MERGE, "true")
    run_merge(spark, spec)
    assert columns(target) == ["id", "value", "extra"]
    assert [(r["id"], r["value"], r["extra"]) for r in sorted_rows(target)] == [
        (1, 10, None),
        (2, 7, "b"),
        (3, 8, "c"),
    ]


def test_without_auto_merge_star_ignores_extra_source_columns(spark, tmp_path):
    target = make_table(tmp_path / "t", rows([1, 2]))
    source = source_file(tmp_path, pa.table({"id": pa.array([2], pa.int64()), "value": [7], "extra": ["b"]}))
    run_merge(spark, MergeSpec(target, source, "t.id = s.id", (update_all(),)))
    assert columns(target) == ["id", "value"]


def test_a_merge_that_only_evolves_the_schema_commits_the_new_schema(spark, tmp_path):
    # No source row matches and there is no INSERT: no row changes, but Delta commits the evolved schema.
    target = make_table(tmp_path / "t", rows([1, 2]))
    version, _ = table_state(target)
    source = source_file(tmp_path, pa.table({"id": pa.array([9], pa.int64()), "value": [7], "extra": ["z"]}))
    spec = MergeSpec(target, source, "t.id = s.id", (update_all(),), schema_evolution=True)
    result = run_merge(spark, spec)
    assert result.committed and result.version == version + 1
    assert columns(target) == ["id", "value", "extra"]
    assert [(r["id"], r["value"]) for r in sorted_rows(target)] == [(1, 10), (2, 20)]
    assert result.metrics[m.NUM_TARGET_FILES_ADDED] == result.metrics[m.NUM_TARGET_FILES_REMOVED] == 0


@pytest.mark.parametrize(("skip", "commits"), [(None, False), ("true", False), ("false", True)])
def test_skip_recording_empty_commits(spark, tmp_path, session_conf, skip, commits):
    # Delta's default skips the commit of a merge that changes nothing; false records it with its metrics.
    target = make_table(tmp_path / "t", rows([1, 2]))
    version, data = table_state(target)
    if skip is not None:
        set_conf(session_conf, confs.SKIP_EMPTY_COMMITS, skip)
    source = source_file(tmp_path, rows([9]))
    result = run_merge(spark, MergeSpec(target, source, "t.id = s.id", (update_all(),)))
    assert result.committed is commits
    assert table_state(target) == ((version + 1) if commits else version, data)
    if commits:
        recorded = DeltaTable(target).history(1)[0]["operationMetrics"]
        assert (int(recorded[m.NUM_SOURCE_ROWS]), int(recorded[m.NUM_TARGET_ROWS_UPDATED])) == (1, 0)


def test_insert_only_merges_check_multiple_matches_without_the_insert_only_optimization(
    spark, tmp_path, session_conf
):
    # Two source rows match target row 1. The optimized insert-only path never checks (and inserts id 3
    # twice); the classic path Delta falls back to refuses the multiple match.
    target = make_table(tmp_path / "t", rows([1, 2]))
    source = source_file(tmp_path, rows([1, 1, 3, 3]))
    spec = MergeSpec(target, source, "t.id = s.id", (insert_all(),))
    set_conf(session_conf, confs.OPTIMIZE_INSERT_ONLY, "false")
    before = table_state(target)
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == MULTIPLE_MATCH
    assert table_state(target) == before
    set_conf(session_conf, confs.OPTIMIZE_INSERT_ONLY, "true")
    result = run_merge(spark, spec)
    assert (result.executor, result.metrics[m.NUM_TARGET_ROWS_INSERTED]) == ("insert_only", 2)


def test_casting_follows_ansi_enabled_when_delta_is_told_to(spark, tmp_path, session_conf):
    # updateAndMergeCastingFollowsAnsiEnabledFlag with ANSI off: a BIGINT overflowing an INT column wraps
    # (3000000000 -> -1294967296) instead of failing under the default ANSI store assignment.
    target = make_table(
        tmp_path / "t", pa.table({"id": pa.array([1], pa.int64()), "qty": pa.array([5], pa.int32())})
    )
    source = source_file(
        tmp_path, pa.table({"id": pa.array([1], pa.int64()), "qty": pa.array([3_000_000_000], pa.int64())})
    )
    spec = MergeSpec(target, source, "t.id = s.id", (update({"qty": "s.qty"}),))
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE"
    session_conf(**{confs.CASTING_FOLLOWS_ANSI: "true", confs.ANSI_ENABLED: "false"})
    run_merge(spark, spec)
    assert [r["qty"] for r in sorted_rows(target)] == [-1294967296]


@pytest.mark.parametrize(
    ("column", "value"),
    [
        (pa.array([5], pa.int32()), pa.array([3_000_000_000], pa.int64())),
        (pa.array([Decimal("5.00")], pa.decimal128(10, 2)), pa.array([3_000_000_000], pa.int64())),
        (pa.array([5], pa.int32()), pa.array(["five"])),
    ],
    ids=["bigint-into-int", "bigint-into-decimal", "malformed-string-into-int"],
)
def test_casting_that_follows_ansi_fails_as_deltas_spark_cast(spark, tmp_path, session_conf, column, value):
    # With the flag and ANSI on, Delta writes Spark's own ANSI Cast (UpdateExpressionsSupport.cast), whose
    # failure is Spark's error (CAST_OVERFLOW, NUMERIC_VALUE_OUT_OF_RANGE), not Delta's table-write
    # overflow. Delta's MERGE runs the same statement on a copy and decides the class and sentence.
    target = pa.table({"id": pa.array([1], pa.int64()), "qty": column})
    ours, theirs = (make_table(tmp_path / name, target) for name in ("ours", "theirs"))
    source = source_file(tmp_path, pa.table({"id": pa.array([2], pa.int64()), "qty": value}))
    session_conf(**{confs.CASTING_FOLLOWS_ANSI: "true", confs.ANSI_ENABLED: "true"})
    with pytest.raises((PySparkException, Py4JJavaError)) as delta_raised:
        spark.sql(
            f"MERGE INTO delta.`{theirs}` AS t USING parquet.`{source.path}` AS s ON t.id = s.id "
            "WHEN NOT MATCHED THEN INSERT (id, qty) VALUES (s.id, s.qty)"
        ).collect()
    delta_error = jvm_errors(delta_raised.value)
    before = table_state(ours)
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, MergeSpec(ours, source, "t.id = s.id", (insert({"id": "s.id", "qty": "s.qty"}),)))
    error_class = delta_error_classes(delta_error)[0]
    assert raised.value.error_class == error_class
    delta_message = next(e["message"] for e in delta_error if e["errorClass"] == error_class)
    assert first_sentence(delta_message or "") in raised.value.message
    assert table_state(ours) == before


def test_case_sensitive_analysis_matches_names_exactly(spark, tmp_path, session_conf):
    target = make_table(tmp_path / "t", rows([1, 2]))
    source = source_file(tmp_path, rows([2]))
    spec = MergeSpec(target, source, "t.id = s.id", (update({"VALUE": "s.value + 1"}),))
    set_conf(session_conf, confs.CASE_SENSITIVE, "true")
    before = table_state(target)
    with pytest.raises(ClauseResolutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
    assert raised.value.message.startswith(
        "Cannot resolve VALUE in UPDATE clause given columns t.id, t.value."
    )
    assert table_state(target) == before
    set_conf(session_conf, confs.CASE_SENSITIVE, "false")
    run_merge(spark, spec)
    assert [(r["id"], r["value"]) for r in sorted_rows(target)] == [(1, 10), (2, 21)]


def test_a_delta_conf_the_engine_does_not_honour_is_named_in_a_warning(spark, tmp_path, session_conf, caplog):
    target = make_table(tmp_path / "t", rows([1]))
    unknown = "spark.databricks.delta.merge.repartitionBeforeWrite.enabled"
    session_conf(**{unknown: "true", confs.SKIP_EMPTY_COMMITS: "true"})
    with caplog.at_level(logging.WARNING, logger="airflow_provider_deltamerge"):
        run_merge(spark, MergeSpec(target, source_file(tmp_path, rows([1])), "t.id = s.id", (update_all(),)))
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(unknown in line and "does not honour" in line for line in warned)
    assert not any(confs.SKIP_EMPTY_COMMITS in line for line in warned)


def test_what_delta_records_in_the_session_after_its_own_commit_is_no_conf_to_warn_about(
    spark, tmp_path, caplog
):
    # Delta's own MERGE in the same session records lastCommitVersionInSession there
    delta_made = make_table(tmp_path / "delta", rows([1]))
    spark.sql(
        f"MERGE INTO delta.`{delta_made}` AS t USING (SELECT 1L AS id, 5 AS value) AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.value = s.value"
    ).collect()
    recorded = "spark.databricks.delta.lastCommitVersionInSession"
    assert spark.conf.get(recorded, None) is not None
    target = make_table(tmp_path / "t", rows([1]))
    try:
        with caplog.at_level(logging.WARNING, logger="airflow_provider_deltamerge"):
            run_merge(
                spark, MergeSpec(target, source_file(tmp_path, rows([1])), "t.id = s.id", (update_all(),))
            )
    finally:
        spark.conf.unset(recorded)
    assert not [r.getMessage() for r in caplog.records if recorded in r.getMessage()]
