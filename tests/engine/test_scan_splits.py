"""Tasks of even size for the merge's scans of table files (``engine/execute/scan_splits.py``).

The model of Spark's packing is checked against Spark's own file partitions (read from the physical plan,
no data read), for generated file sizes; the merge's rewrite is checked by the tasks Spark ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.snapshot import DataFile, read_snapshot
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.execute.scan_splits import (
    MAX_PARTITION_BYTES,
    MIN_PARTITION_NUM,
    OPEN_COST,
    balanced_splits,
    finish_time,
    pack,
    scan_split,
    spark_split,
    split_bytes,
)
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all
from tests.oracle import sorted_rows

MIB = 1 << 20


def test_files_spark_packs_into_seven_tasks_become_eight_even_ones_on_two_cores():
    # Given: 48 files of 13 MiB, as the benchmark's table has (Spark: 7 tasks, the last alone on a core)
    sizes = [13 * MIB] * 48
    own = pack(sizes, spark_split(sizes, max_partition_bytes=128 * MIB, open_cost=4 * MIB, parts=2), 4 * MIB)
    assert [cost // MIB for cost in own] == [119] * 6 + [102]
    # When
    split = split_bytes(sizes, cores=2, max_partition_bytes=128 * MIB, open_cost=4 * MIB, min_partitions=2)
    # Then: 8 tasks of 6 files, which end 17 MiB of work sooner on each core
    assert split.tasks == 8
    assert split.bytes is not None
    assert [cost // MIB for cost in pack(sizes, split.bytes, 4 * MIB)] == [102] * 8
    assert (finish_time(own, 2) - finish_time(pack(sizes, split.bytes, 4 * MIB), 2)) // MIB == 51


@pytest.mark.parametrize(
    ("sizes", "why"),
    [
        ([13 * MIB] * 2, "one file per core already"),
        ([13 * MIB] * 7, "seven equal files end after four on some core, however packed"),
        ([200 * MIB, MIB], "a file over maxPartitionBytes is Spark's to cut"),
        ([13 * MIB] * 100, "fifteen tasks of at most seven files end one file after the best"),
    ],
)
def test_spark_own_splits_are_kept_where_nothing_ends_sooner(sizes, why):
    split = split_bytes(sizes, cores=2, max_partition_bytes=128 * MIB, open_cost=4 * MIB, min_partitions=2)
    assert split.bytes is None, why


def test_no_candidate_cuts_a_file():
    # A parquet split reads the row groups whose middle it holds: half a one-group file is one full task and
    # one empty one, so no split size below the largest file is tried.
    sizes = [60 * MIB, 10 * MIB, 10 * MIB]
    split = split_bytes(sizes, cores=2, max_partition_bytes=128 * MIB, open_cost=4 * MIB, min_partitions=2)
    assert split.bytes is None or split.bytes >= 60 * MIB


@pytest.fixture
def empty_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Writes files of given sizes (sparse, unread: Spark plans its splits from the sizes alone)."""
    folder = tmp_path_factory.mktemp("splits")
    count = iter(range(1_000_000))

    def write(sizes: list[int]) -> list[str]:
        paths = []
        for size in sizes:
            path = folder / f"part-{next(count):05d}.parquet"
            with open(path, "wb") as out:
                out.truncate(size)
            paths.append(str(path))
        return paths

    return write


def spark_tasks(spark: SparkSession, paths: list[str]) -> list[int]:
    """The cost Spark gives each task of a scan of ``paths`` (bytes plus one open cost per piece), from the
    scan's file partitions in its physical plan."""
    scan = spark.read.schema("id LONG").parquet(*paths)._jdf.queryExecution().sparkPlan()
    while scan.children().size():
        scan = scan.children().apply(0)
    open_cost = int(spark.conf.get(OPEN_COST).rstrip("b"))
    partitions = scan.inputRDD().partitions()
    return [sum(f.length() + open_cost for f in p.files()) for p in partitions]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=3 * MIB), min_size=1, max_size=30),
    max_partition=st.integers(min_value=MIB, max_value=8 * MIB),
    open_cost=st.sampled_from([1, 64 << 10, 256 << 10]),
)
def test_the_model_packs_files_as_spark_does(spark, empty_files, sizes, max_partition, open_cost):
    # Given: files of generated sizes, and Spark's split confs
    paths = empty_files(sizes)
    confs = {MAX_PARTITION_BYTES: str(max_partition), OPEN_COST: str(open_cost)}
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        # When / Then: Spark's own tasks are the model's for Spark's split size
        own = spark_split(sizes, max_partition_bytes=max_partition, open_cost=open_cost, parts=2)
        assert spark_tasks(spark, paths) == pack(sizes, own, open_cost)
        # and inside the block, the model's for the split size chosen (Spark's own where none is better)
        files = [
            DataFile(log_path=p, size=s, partition_values=(), num_records=None)
            for p, s in zip(paths, sizes, strict=True)
        ]
        chosen = scan_split(spark, files)
        assert chosen is not None
        with balanced_splits(spark, chosen):
            tasks = spark_tasks(spark, paths)
        assert tasks == pack(sizes, chosen.bytes or own, open_cost)
        assert len(tasks) == chosen.tasks
        # never later than Spark's own by an open cost or more (closer finish times count as equal, and the
        # fewer tasks win)
        finish, own_finish = (
            finish_time(pack(sizes, split, open_cost), 2) for split in (chosen.bytes or own, own)
        )
        assert finish - own_finish < open_cost
    finally:
        for key in confs:
            spark.conf.unset(key)


def test_the_block_restores_the_session_confs(spark):
    files = [
        DataFile(log_path=f"f{n}", size=13 * MIB, partition_values=(), num_records=None) for n in range(48)
    ]
    spark.conf.set(MAX_PARTITION_BYTES, "128m")
    try:
        with balanced_splits(spark, scan_split(spark, files)):
            assert (spark.conf.get(MAX_PARTITION_BYTES), spark.conf.get(MIN_PARTITION_NUM)) != ("128m", None)
        assert spark.conf.get(MAX_PARTITION_BYTES) == "128m"
        assert spark.conf.get(MIN_PARTITION_NUM, None) is None
    finally:
        spark.conf.unset(MAX_PARTITION_BYTES)


@pytest.mark.usefixtures("two_phases")
def test_a_rewrite_of_twelve_files_runs_in_four_even_tasks_and_its_inserts_in_one(spark, tmp_path):
    # Given: 12 one-row files of one size, split by Spark into tasks of 5, 5 and 2 files on 2 cores
    target = str(tmp_path / "t")
    for k in range(12):
        row = {"id": pa.array([k + 100], pa.int64()), "value": pa.array([k + 1000], pa.int64())}
        write_deltalake(target, pa.table(row), mode="append")
    (size,) = {f.size for f in read_snapshot(target).files}
    source = tmp_path / "source.parquet"
    pq.write_table(
        pa.table(
            {"id": pa.array([*range(100, 112), 7], pa.int64()), "value": pa.array([0] * 13, pa.int64())}
        ),
        source,
    )
    spec = MergeSpec(target, PathSource(str(source)), "t.id = s.id", (update_all(), insert_all()))
    confs = {MAX_PARTITION_BYTES: str(5 * size + 5), OPEN_COST: "1"}
    for key, value in confs.items():
        spark.conf.set(key, value)
    spark.sparkContext.setJobGroup("twelve-files", "the rewrite")
    try:
        # When
        result = run_merge(spark, spec)
        tracker = spark.sparkContext.statusTracker()
        jobs = sorted(tracker.getJobIdsForGroup("twelve-files"))
        write = tracker.getJobInfo(jobs[-1])
        tasks = [tracker.getStageInfo(stage).numTasks for stage in write.stageIds]
    finally:
        spark.sparkContext.setJobGroup("", "")
        for key in confs:
            spark.conf.unset(key)
    # Then: the write ran in 4 tasks of 3 files and 1 of the inserts (not Spark's 5 + 5 + 2), and wrote right
    assert tasks == [5]
    assert (result.metrics[m.NUM_TARGET_ROWS_UPDATED], result.metrics[m.NUM_TARGET_ROWS_INSERTED]) == (12, 1)
    assert result.metrics[m.NUM_TARGET_FILES_ADDED] == 5
    assert [r["value"] for r in sorted_rows(target)] == [0] * 13
