"""Write a DataFrame as new data files of a Delta table, each with Delta stats, ready to be committed.

Spark writes into a private staging folder under the table; the finished parquet files are then moved to
their Hive-style partition folders below the table root, where Delta readers and VACUUM expect them. The
files are invisible to readers until the commit references them, and ``discard`` deletes them when the
merge fails before committing.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from airflow_provider_deltamerge.delta.snapshot import Snapshot
from airflow_provider_deltamerge.delta.stats import DEFAULT_NUM_INDEXED_COLS, footer_stats

STAGING_PREFIX = "_deltamerge_staging_"
HIVE_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NUM_INDEXED_COLS_KEY = "delta.dataSkippingNumIndexedCols"


@dataclass(frozen=True)
class WrittenFile:
    """A new data file in the table location, described as its add action will describe it."""

    log_path: str
    size: int
    partition_values: tuple[tuple[str, str | None], ...]
    modification_time: int
    stats: str
    num_records: int

    @property
    def relative_path(self) -> str:
        return unquote(self.log_path)


class TableFiles:
    """The table's file system, as Spark's Hadoop configuration sees it."""

    def __init__(self, spark: SparkSession, table_uri: str) -> None:
        self._jvm: Any = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()
        self.root = table_uri.rstrip("/")
        self._fs = self._path(self.root).getFileSystem(self._conf)
        # Spark's writers share this cached instance; without this the local file system leaves .crc files.
        self._fs.setWriteChecksum(False)

    def _path(self, location: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(location)

    def list_parquet(self, folder: str) -> Iterator[tuple[str, int, int]]:
        """(path below ``folder``, size, modification time) of every parquet file under ``folder``."""
        base = self._fs.makeQualified(self._path(folder)).toUri().getPath().rstrip("/")
        files = self._fs.listFiles(self._path(folder), True)
        while files.hasNext():
            status = files.next()
            path = status.getPath().toUri().getPath()
            if path.endswith(".parquet"):
                yield path[len(base) + 1 :], status.getLen(), status.getModificationTime()

    def move_into_table(self, folder: str, relative_path: str) -> None:
        target = self._path(f"{self.root}/{relative_path}")
        self._fs.mkdirs(target.getParent())
        if not self._fs.rename(self._path(f"{folder}/{relative_path}"), target):
            raise OSError(f"Could not move a new data file into the table: {relative_path}")

    def delete(self, relative_path: str) -> None:
        self._fs.delete(self._path(f"{self.root}/{relative_path}"), True)


def write_files(spark: SparkSession, rows: DataFrame, snapshot: Snapshot) -> list[WrittenFile]:
    """Write ``rows`` (the table's columns, in order) as new files of the table and describe them.

    Args:
        spark: the session that computes ``rows``.
        rows: the output rows; partition columns are written as folders, not into the files.
        snapshot: the table being written, for its location, partitioning and stats settings.

    Returns:
        The new files, already in their final place, not yet committed.
    """
    table = TableFiles(spark, snapshot.table_uri)
    staging_name = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    staging = f"{table.root}/{staging_name}"
    partition_columns = list(snapshot.partition_columns)
    if partition_columns:
        # One writer per table partition; adaptive execution then keeps a small merge to a few files.
        rows = rows.repartition(*partition_columns)
    writer = rows.write.mode("errorifexists").option("compression", "snappy")
    if partition_columns:
        writer = writer.partitionBy(*partition_columns)
    moved: list[tuple[str, int, int]] = []
    try:
        writer.parquet(staging)
        for relative, size, mtime in table.list_parquet(staging):
            table.move_into_table(staging, relative)
            moved.append((relative, size, mtime))
        num_indexed = int(dict(snapshot.configuration).get(NUM_INDEXED_COLS_KEY) or DEFAULT_NUM_INDEXED_COLS)
        return _describe(snapshot, moved, num_indexed)
    except BaseException:
        for relative, _, _ in moved:
            table.delete(relative)
        raise
    finally:
        table.delete(staging_name)


def discard(spark: SparkSession, snapshot: Snapshot, files: Sequence[WrittenFile]) -> None:
    """Delete files written for a merge that will not be committed."""
    table = TableFiles(spark, snapshot.table_uri)
    for written in files:
        table.delete(written.relative_path)


def _describe(
    snapshot: Snapshot, moved: Sequence[tuple[str, int, int]], num_indexed: int
) -> list[WrittenFile]:
    """Add-action descriptions of the moved files; footers are read in parallel since each is a round trip."""
    filesystem, root = _arrow_filesystem(snapshot.table_uri)

    def describe(entry: tuple[str, int, int]) -> WrittenFile:
        relative, size, mtime = entry
        with filesystem.open_input_file(f"{root}/{relative}") as handle:
            metadata = pq.read_metadata(handle)
        return WrittenFile(
            log_path=quote(relative, safe="/="),
            size=size,
            partition_values=_partition_values(relative, snapshot.partition_columns),
            modification_time=mtime,
            stats=footer_stats(metadata, num_indexed_cols=num_indexed),
            num_records=metadata.num_rows,
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(describe, moved))


def _arrow_filesystem(table_uri: str) -> tuple[pafs.FileSystem, str]:
    if "://" in table_uri or table_uri.startswith("file:"):
        filesystem, path = pafs.FileSystem.from_uri(table_uri)
        return filesystem, path.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(table_uri).rstrip("/")


def _partition_values(
    relative_path: str, partition_columns: Sequence[str]
) -> tuple[tuple[str, str | None], ...]:
    """Partition values from the Hive-style folders Spark wrote (``col=value/``), unescaped, as Delta does."""
    pairs = (part.split("=", 1) for part in relative_path.split("/")[:-1] if "=" in part)
    folders = {unquote(name): raw for name, raw in pairs}
    values = []
    for column in partition_columns:
        raw = folders.get(column)
        values.append((column, None if raw in (None, HIVE_NULL_PARTITION) else unquote(raw)))
    return tuple(values)
