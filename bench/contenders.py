"""The contenders, each timed on its own fresh copy of the target, reading its source inside the timing.

* ``engine``: this provider's ``run_merge`` in the warm SparkSession (source: the parquet path).
* ``floor``: the same session reads exactly the files holding changed rows and writes them back, with the
  rows to insert, in files sized as the engine sizes them; no join, no commit. No Spark merge beats it.
* ``deltalake-streamed`` / ``deltalake-non-streamed``: ``deltalake``'s own merge (``streamed_exec`` on, its
  default, or off) in a separate worker process, the source read into Arrow with pyarrow.
* ``delta-spark``: Delta Lake's own ``MERGE INTO`` of the same statement in the same warm SparkSession,
  which has Delta's jars, extension and catalog (tests/delta_runtime.py); the table's snapshot is built
  inside the timing, as for a session's first merge into it.
* ``delta-spark-warm``: the same, as a session merges into a table again: its snapshot built before the
  timing and cached by Delta in the session, over as many partitions as the session has cores.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.files.writer import max_records_per_file
from airflow_provider_deltamerge.delta.log.snapshot import Snapshot, read_snapshot
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.spec import to_merge_sql
from bench.cases import Case, CaseData, Counts
from bench.jvm_calls import counting
from bench.spark_work import SparkWork, counting_spark_work
from tests.oracle import merge_with_deltalake

ContenderName = Literal[
    "engine", "floor", "deltalake-streamed", "deltalake-non-streamed", "delta-spark", "delta-spark-warm"
]
CONTENDERS: tuple[ContenderName, ...] = (
    "engine",
    "floor",
    "deltalake-streamed",
    "deltalake-non-streamed",
    "delta-spark",
    "delta-spark-warm",
)
MERGING_CONTENDERS: tuple[ContenderName, ...] = (
    "engine",
    "deltalake-streamed",
    "deltalake-non-streamed",
    "delta-spark",
    "delta-spark-warm",
)
# Delta's session conf for the partitions its snapshot's state is built in and cached over: 50 unless set.
SNAPSHOT_PARTITIONS_CONF = "spark.databricks.delta.snapshotPartitions"


@dataclass(frozen=True)
class Run:
    """One timed run: seconds, what the contender reports it did (None for the floor), its metrics, for
    ``deltalake`` runs the worker process's peak resident set so far (bytes), for engine runs the JVM
    round trips the driver made, and for the contenders in the session the Spark jobs and queries they
    started."""

    seconds: float
    counts: Counts | None
    metrics: dict[str, int] = field(default_factory=dict)
    worker_peak_rss: int | None = None
    jvm_calls: int | None = None
    spark_work: SparkWork | None = None


def fresh_copy(table: str, destination: Path) -> str:
    """An identical copy of ``table`` at ``destination``.

    Data files are hard links, since no writer changes a data file in place (merges add new files and
    remove old ones in the log); the log is copied, since writers add to it.
    """
    shutil.copytree(table, destination, copy_function=os.link, ignore=shutil.ignore_patterns("_delta_log"))
    shutil.copytree(Path(table) / "_delta_log", destination / "_delta_log")
    return str(destination)


def rows_in_table(path: str) -> int:
    """The table's row count, from the log's per-file record counts less the rows deletion vectors hide
    (no data read)."""
    return sum(f.logical_records or 0 for f in read_snapshot(path).files)


def run_engine(spark: SparkSession, case: Case, data: CaseData, target: str) -> Run:
    with counting_spark_work(spark) as work, counting() as calls:
        start = time.perf_counter()
        result = run_merge(spark, case.spec(target, data.source))
        seconds = time.perf_counter() - start
    metrics = dict(result.metrics)
    counts = Counts(
        inserted=metrics[m.NUM_TARGET_ROWS_INSERTED],
        updated=metrics[m.NUM_TARGET_ROWS_UPDATED],
        deleted=metrics[m.NUM_TARGET_ROWS_DELETED],
        rows_after=rows_in_table(target),
    )
    return Run(seconds, counts, metrics, jvm_calls=calls.count, spark_work=work)


def run_floor(
    spark: SparkSession, data: CaseData, target: str, output: Path, *, changed_rows_only: bool = False
) -> Run:
    """Rewrite the files holding changed rows and write the inserted rows, into ``output`` (not the table).

    The files are read with Spark's plain parquet reader (partition values from the folder names), not
    with the engine's reader, which also tags each row with its file and row id. With
    ``changed_rows_only`` (a table that takes deletion vectors) nothing is copied: the floor writes the
    source's rows, which are the upsert's updated and inserted rows (the vectors' few bytes are left out).
    """
    snapshot = read_snapshot(target)
    touched = set() if changed_rows_only else set(data.touched_files)
    paths = [f"{snapshot.table_uri}/{f.relative_path}" for f in snapshot.files if f.log_path in touched]
    with counting_spark_work(spark) as work:
        start = time.perf_counter()
        _rewrite(spark, snapshot, paths, data, output, changed_rows_only=changed_rows_only)
        seconds = time.perf_counter() - start
    return Run(seconds, None, spark_work=work)


def _rewrite(
    spark: SparkSession,
    snapshot: Snapshot,
    paths: list[str],
    data: CaseData,
    output: Path,
    *,
    changed_rows_only: bool,
) -> None:
    """The floor's work: ``paths`` read back with the rows to insert (or only the source's rows), written."""
    parts = [spark.read.option("basePath", snapshot.table_uri).parquet(*paths)] if paths else []
    if changed_rows_only:
        parts.append(spark.read.parquet(data.source))
    elif data.inserts is not None:
        parts.append(spark.read.parquet(data.inserts))
    if not parts:
        return
    rows = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)
    writer = rows.hint("rebalance", *snapshot.partition_columns).write.option("compression", "snappy")
    max_rows = max_records_per_file(snapshot)
    if max_rows is not None:
        writer = writer.option("maxRecordsPerFile", max_rows)
    writer.partitionBy(*snapshot.partition_columns).parquet(str(output))


def run_delta_spark(
    spark: SparkSession, case: Case, data: CaseData, target: str, *, warm: bool = False
) -> Run:
    """Delta's own ``MERGE INTO`` of ``case`` in the session; its counts from its commit's metrics.

    With ``warm``, as a session merges into a table again: the table's snapshot is built before the timing
    (a count, which Delta answers from the snapshot's file statistics, builds its state and caches it in the
    session), over as many partitions as the session has cores where Delta's default is 50.
    """
    from delta.tables import DeltaTable

    statement = to_merge_sql(case.spec(target, data.source))
    with _snapshot_partitions(spark, spark.sparkContext.defaultParallelism if warm else None):
        if warm:
            spark.read.format("delta").load(target).count()
        with counting_spark_work(spark) as work:
            start = time.perf_counter()
            spark.sql(statement).collect()
            seconds = time.perf_counter() - start
    recorded = DeltaTable.forPath(spark, target).history(1).collect()[0]["operationMetrics"] or {}
    metrics = {name: int(value) for name, value in recorded.items()}
    counts = Counts(
        inserted=metrics.get(m.NUM_TARGET_ROWS_INSERTED, 0),
        updated=metrics.get(m.NUM_TARGET_ROWS_UPDATED, 0),
        deleted=metrics.get(m.NUM_TARGET_ROWS_DELETED, 0),
        rows_after=rows_in_table(target),
    )
    return Run(seconds, counts, metrics, spark_work=work)


@contextlib.contextmanager
def _snapshot_partitions(spark: SparkSession, partitions: int | None) -> Iterator[None]:
    """Delta's snapshots built over ``partitions`` partitions meanwhile; None leaves Delta's default."""
    if partitions is None:
        yield
        return
    spark.conf.set(SNAPSHOT_PARTITIONS_CONF, str(partitions))
    try:
        yield
    finally:
        spark.conf.unset(SNAPSHOT_PARTITIONS_CONF)


def run_deltalake(case: Case, data: CaseData, target: str, *, streamed: bool) -> Run:
    """``deltalake``'s merge of ``case``, run in the worker process."""
    start = time.perf_counter()
    source = pq.read_table(data.source)
    metrics = merge_with_deltalake(target, case.spec(target, data.source), source, streamed_exec=streamed)
    seconds = time.perf_counter() - start
    counts = Counts(
        inserted=metrics["num_target_rows_inserted"],
        updated=metrics["num_target_rows_updated"],
        deleted=metrics["num_target_rows_deleted"],
        rows_after=rows_in_table(target),
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return Run(seconds, counts, {k: v for k, v in metrics.items() if isinstance(v, int)}, peak)
