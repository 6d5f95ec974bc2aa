"""The table properties of Delta's auto optimize.

Optimized writes: Delta's MERGE writes as many files with them as without, and so does the engine. Auto
compaction: on a table that asks for it, Delta's runtime follows a merge with an OPTIMIZE commit of its own.
The engine writes none, so it refuses such a merge before any work, ``backend="auto"`` runs it on Delta's
runtime, and with the session conf set to false (where Delta skips the compaction too) the engine merges as
Delta does. Delta's runtime decides every case: the same statement runs on a copy of the table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.auto_compaction import AUTO_COMPACT_CONF, ERROR_CLASS
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.merge_commits import find_merge_commit
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.backends import delta_spark as backend
from airflow_provider_deltamerge.exceptions import TargetTableError
from airflow_provider_deltamerge.spec import parse_merge_sql
from tests.delta.helpers import CHANGES, PLAIN_UPSERT, copy_of, delta_merge, delta_rows, version_and_files

RUN = {"dagId": "orders", "taskId": "merge", "runId": "manual__1", "mapIndex": -1}


@pytest.fixture
def session_auto_compact(spark: SparkSession) -> Iterator[Any]:
    """Sets the session's auto compaction conf for one test, then unsets it."""
    yield lambda value: spark.conf.set(AUTO_COMPACT_CONF, value)
    spark.conf.unset(AUTO_COMPACT_CONF)


def small_files_table(spark: SparkSession, folder: Path, properties: dict[str, str]) -> tuple[str, str]:
    """A table partitioned by region whose partition 'eu' holds six small files, ``properties`` set after
    they were written (so that no compaction has run yet); and a source updating one row and inserting one
    there. Its path and the source's."""
    target = str(folder / "orders")
    spark.sql(
        f"CREATE TABLE delta.`{target}` (id BIGINT, qty INT, region STRING) USING delta "
        "PARTITIONED BY (region)"
    ).collect()
    spark.range(6).selectExpr("id", "CAST(id AS INT) AS qty", "'eu' AS region").repartition(6).write.format(
        "delta"
    ).mode("append").save(target)
    if properties:
        listed = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())
        spark.sql(f"ALTER TABLE delta.`{target}` SET TBLPROPERTIES ({listed})").collect()
    source = str(folder / "extract.parquet")
    pq.write_table(
        pa.table(
            {
                "id": pa.array([2, 100], pa.int64()),
                "qty": pa.array([50, 7], pa.int32()),
                "region": ["eu", "eu"],
            }
        ),
        source,
    )
    return target, source


def operations(spark: SparkSession, table: str, count: int) -> list[tuple[str, str | None]]:
    """The last ``count`` commits' operations, newest first, each with its ``auto`` parameter."""
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{table}` LIMIT {count}").collect()
    return [(row["operation"], row["operationParameters"].get("auto")) for row in rows]


ASKED = {
    "the table property": ({"delta.autoOptimize.autoCompact": "true"}, None),
    "the deprecated table property": ({"delta.autoOptimize": "true"}, None),
    "the session conf": ({}, "true"),
}


@pytest.mark.parametrize("asked_by", sorted(ASKED))
def test_delta_compacts_after_the_merge_so_the_engine_refuses_it_before_any_work(
    spark, tmp_path, session_auto_compact, asked_by
):
    properties, conf = ASKED[asked_by]
    target, source = small_files_table(spark, tmp_path, properties)
    if conf is not None:
        session_auto_compact(conf)
    theirs = copy_of(target, "theirs")
    before = version_and_files(target)
    # Delta's MERGE commits, then its auto compaction commits an OPTIMIZE of its own
    delta_merge(spark, PLAIN_UPSERT, theirs, source)
    assert operations(spark, theirs, 2) == [("OPTIMIZE", "true"), ("MERGE", None)]
    # The engine writes no such commit: it refuses, with the way out, and the table is as it was
    with pytest.raises(TargetTableError) as refused:
        run_merge(spark, parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source)))
    assert refused.value.error_class == ERROR_CLASS
    message = str(refused.value)
    assert message.startswith(f"[{ERROR_CLASS}] The merge into {target} was refused before reading any data")
    assert f"({next(iter(properties.items()), (AUTO_COMPACT_CONF, 'true'))[0]}=true)" in message
    assert 'backend="delta-spark"' in message and f"{AUTO_COMPACT_CONF}=false" in message
    assert version_and_files(target) == before


def test_with_the_session_conf_false_neither_compacts_and_the_engine_merges_as_delta_does(
    spark, tmp_path, session_auto_compact
):
    target, source = small_files_table(spark, tmp_path, {"delta.autoOptimize.autoCompact": "true"})
    session_auto_compact("false")
    theirs = copy_of(target, "theirs")
    delta_merge(spark, PLAIN_UPSERT, theirs, source)
    result = run_merge(spark, parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source)))
    assert operations(spark, theirs, 1) == [("MERGE", None)]
    assert operations(spark, target, 1) == [("MERGE", None)]
    assert result.version == LogReader(theirs).latest_version()
    assert delta_rows(spark, target) == delta_rows(spark, theirs)
    assert backend.choose_backend(
        spark, parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source)), "auto"
    ) == ("engine")


def test_auto_runs_it_on_delta_s_runtime_and_reports_the_merge_not_the_compaction(spark, tmp_path):
    target, source = small_files_table(spark, tmp_path, {"delta.autoOptimize.autoCompact": "true"})
    theirs = copy_of(target, "theirs")
    spec = parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source))
    assert backend.needing_delta_runtime(target) == ("auto compaction",)
    assert backend.choose_backend(spark, spec, "auto") == "delta-spark"
    version_before = LogReader(target).latest_version()

    first = backend.run_with_delta_spark(
        spark, spec, provenance={**RUN, "tryNumber": 1, "submissionId": "sub-1"}
    )
    delta_merge(spark, PLAIN_UPSERT, theirs, source)

    # The merge, then Delta's compaction; the result is the merge's commit, with its metrics. (Delta's own run
    # on the copy compacts nothing: Delta remembers in the session that the table, by its id, was just
    # compacted. Its rows are the same.)
    assert operations(spark, target, 2) == [("OPTIMIZE", "true"), ("MERGE", None)]
    assert (first.committed, first.version) == (True, version_before + 1)
    # ... as the task finds it in the log after the job
    found = find_merge_commit(target, submission_id="sub-1")
    assert found is not None and found.version == first.version
    merge_metrics = spark.sql(f"DESCRIBE HISTORY delta.`{target}` LIMIT 2").collect()[1]["operationMetrics"]
    assert {k: first.metrics[k] for k in CHANGES} == {k: int(merge_metrics[k]) for k in CHANGES}
    assert delta_rows(spark, target) == delta_rows(spark, theirs)
    # A retry finds the merge's commit, not the compaction's, and merges nothing again
    again = backend.run_with_delta_spark(spark, spec, provenance={**RUN, "tryNumber": 2})
    assert (again.version, again.already_committed) == (first.version, True)
    assert {k: again.metrics[k] for k in CHANGES} == {k: first.metrics[k] for k in CHANGES}
    assert LogReader(target).latest_version() == version_before + 2


@pytest.mark.parametrize("optimize_write", ["true", "false"])
def test_the_engine_writes_as_many_files_as_delta_s_merge_with_or_without_optimized_writes(
    spark, tmp_path, optimize_write
):
    # Delta's MERGE shuffles its output by the partition columns before writing whether or not the table asks
    # for optimized writes (delta.autoOptimize.optimizeWrite); the engine's writer rebalances it by them too.
    target = str(tmp_path / "orders")
    spark.sql(
        f"CREATE TABLE delta.`{target}` (id BIGINT, qty INT, region STRING) USING delta "
        f"PARTITIONED BY (region) TBLPROPERTIES ('delta.autoOptimize.optimizeWrite' = '{optimize_write}')"
    ).collect()
    rows = spark.range(0, 300).selectExpr("id", "CAST(id AS INT) AS qty", "CAST(id % 3 AS STRING) AS region")
    rows.repartition(8).write.format("delta").mode("append").save(target)
    source = str(tmp_path / "extract")
    spark.range(150, 450).selectExpr("id", "7 AS qty", "CAST(id % 3 AS STRING) AS region").repartition(
        6
    ).write.parquet(source)
    theirs = copy_of(target, "theirs")
    delta_merge(spark, PLAIN_UPSERT, theirs, source)
    result = run_merge(spark, parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source)))
    theirs_metrics = spark.sql(f"DESCRIBE HISTORY delta.`{theirs}` LIMIT 1").collect()[0]["operationMetrics"]
    files = (m.NUM_TARGET_FILES_ADDED, m.NUM_TARGET_FILES_REMOVED)
    assert {k: result.metrics[k] for k in files} == {k: int(theirs_metrics[k]) for k in files}
    assert delta_rows(spark, target) == delta_rows(spark, theirs)
