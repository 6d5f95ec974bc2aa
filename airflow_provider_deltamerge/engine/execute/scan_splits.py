"""Tasks of even size for a scan of table files, as many as the cores run in whole waves.

Spark packs the files a scan reads into tasks of up to ``spark.sql.files.maxPartitionBytes`` (128 MiB),
largest first, each file costing its bytes plus ``spark.sql.files.openCostInBytes``. It does not look at
how the tasks fall on the cores: 48 files of 13 MiB make 7 tasks, and on 2 cores the last one runs
alone, with one core idle for a seventh of the work. A merge's scans are a handful of large tasks (the
rewrite of the touched files above all), so the last wave decides how long they take. While a scan runs,
``balanced_splits`` sets the split size whose tasks finish first on the session's cores, by Spark's own
packing; a file is never cut in two (a parquet split reads whole row groups: half a file of one group is
one full task and one empty one).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import SparkSession

from airflow_provider_deltamerge.delta.log.snapshot import DataFile
from airflow_provider_deltamerge.session_kind import byte_size, is_connect, session_confs_set

MAX_PARTITION_BYTES = "spark.sql.files.maxPartitionBytes"
OPEN_COST = "spark.sql.files.openCostInBytes"
MIN_PARTITION_NUM = "spark.sql.files.minPartitionNum"
LEAF_PARALLELISM = "spark.sql.leafNodeDefaultParallelism"
# More tasks than this per core no longer shorten the last wave: they only add per-task work and files.
_MAX_TASKS_PER_CORE = 8


@dataclass(frozen=True)
class ScanSplit:
    """How a scan of table files is split into tasks: the split size to set while it runs (None: Spark's
    own) and the number of tasks the scan then runs in."""

    bytes: int | None
    tasks: int


def scan_split(spark: SparkSession, files: Sequence[DataFile]) -> ScanSplit | None:
    """``split_bytes`` for a scan of ``files`` in this session; None on Connect, whose client cannot see
    the cores."""
    if is_connect(spark):
        return None
    if not files:
        return ScanSplit(None, 0)
    cores = int(spark.sparkContext.defaultParallelism)
    return split_bytes(
        [f.size for f in files],
        cores=cores,
        max_partition_bytes=byte_size(spark.conf.get(MAX_PARTITION_BYTES) or "128m"),
        open_cost=byte_size(spark.conf.get(OPEN_COST) or "4m"),
        min_partitions=int(
            spark.conf.get(MIN_PARTITION_NUM, None) or spark.conf.get(LEAF_PARALLELISM, None) or cores
        ),
    )


@contextmanager
def balanced_splits(spark: SparkSession, split: ScanSplit | None) -> Iterator[None]:
    """Inside the block, Spark splits the scan ``split`` was worked out for into its tasks; other scans in
    the block get the same split size."""
    if split is None or split.bytes is None:
        yield
        return
    # A minimum of one partition leaves the split size to maxPartitionBytes alone (see ``spark_split``).
    with session_confs_set(spark, {MAX_PARTITION_BYTES: str(split.bytes), MIN_PARTITION_NUM: "1"}):
        yield


def split_bytes(
    sizes: Sequence[int], *, cores: int, max_partition_bytes: int, open_cost: int, min_partitions: int
) -> ScanSplit:
    """The split size whose tasks finish first on ``cores`` (None when Spark's own does as well), and the
    number of tasks the scan then runs in.

    Candidates divide the scan's bytes into 1 to ``_MAX_TASKS_PER_CORE`` tasks per core; none is below the
    largest file or above ``max_partition_bytes``. Finish times less than one file's open cost apart count
    as equal, and then the fewest tasks win (fewer files written), Spark's own first.
    """
    sizes = [s for s in sizes if s]  # Spark lists no empty file
    if not sizes:
        return ScanSplit(None, 0)
    total = sum(s + open_cost for s in sizes)
    own = spark_split(
        sizes, max_partition_bytes=max_partition_bytes, open_cost=open_cost, parts=min_partitions
    )
    candidates = [own] + [
        split
        for split in (-(-total // tasks) for tasks in range(1, cores * _MAX_TASKS_PER_CORE + 1))
        if max(sizes) <= split <= max_partition_bytes
    ]
    packed = [(split, pack(sizes, split, open_cost)) for split in candidates]
    scored = [(finish_time(tasks, cores), len(tasks), split) for split, tasks in packed]
    first = min(finish for finish, _, _ in scored)
    # Spark's own is candidate 0: among equals with as few tasks, it stays.
    tasks, _, chosen = min(
        (count, n, split) for n, (finish, count, split) in enumerate(scored) if finish - first < open_cost
    )
    return ScanSplit(None if chosen == own else chosen, tasks)


def spark_split(sizes: Sequence[int], *, max_partition_bytes: int, open_cost: int, parts: int) -> int:
    """Spark's split size for a scan of files of ``sizes`` (``FilePartition.maxSplitBytes``): the bytes per
    partition for ``parts`` partitions (``spark.sql.files.minPartitionNum``, else the leaf nodes' default
    parallelism, else the cores), between the open cost and ``max_partition_bytes``."""
    total = sum(s + open_cost for s in sizes if s)  # Spark lists no empty file
    return min(max_partition_bytes, max(open_cost, total // parts))


def pack(sizes: Sequence[int], split: int, open_cost: int) -> list[int]:
    """The cost of each task Spark makes of files of ``sizes`` for split size ``split``
    (``FilePartition.getFilePartitions``): files over ``split`` cut in pieces of it, then the pieces,
    largest first, added to the current task until the next would not fit (next fit decreasing); a task
    costs its bytes plus the open cost of each piece."""
    pieces = sorted(
        (min(split, size - offset) for size in sizes for offset in range(0, size, split)),
        reverse=True,
    )
    tasks: list[int] = []
    current = 0
    for piece in pieces:
        if current and current + piece > split:
            tasks.append(current)
            current = 0
        current += piece + open_cost
    return [*tasks, current] if current else tasks


def finish_time(tasks: Sequence[int], cores: int) -> int:
    """When the last of ``tasks`` ends, each started in order on the first free core (Spark's scheduler
    hands a stage's tasks out by index)."""
    free = [0] * cores
    for cost in tasks:
        heapq.heappush(free, heapq.heappop(free) + cost)
    return max(free)
