"""Write a DataFrame as new data files of a Delta table, each with Delta stats, ready to be committed.

Spark writes into a private staging folder under the table; the finished parquet files are then moved to
their Hive-style partition folders below the table root, where Delta readers and VACUUM expect them. The
files are invisible to readers until the commit references them, and ``discard`` deletes them when the
merge fails before committing.

Rows with a ``_change_type`` are change data (the change data feed): as Delta's ``performCDCPartition`` and
``DelayedCommitProtocol`` do, the same job writes them under a leading virtual partition, and their files
go to ``_change_data/`` (named ``cdc-...``) instead of the table's folders. The data files keep the column,
all NULL, as Delta's do; readers ignore columns the schema does not name.
"""

from __future__ import annotations

import datetime
import math
import os
import uuid
import zoneinfo
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake.fs import DeltaStorageHandler
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from airflow_provider_deltamerge.delta.commit.added_files import ChangeFile, WrittenFile
from airflow_provider_deltamerge.delta.files.change_data_feed import CHANGE_DATA_FOLDER, CHANGE_TYPE_COLUMN
from airflow_provider_deltamerge.delta.files.constraint_checks import checked, violation_error
from airflow_provider_deltamerge.delta.files.physical_schema import physical_field
from airflow_provider_deltamerge.delta.files.store_files import StoreFiles
from airflow_provider_deltamerge.delta.format.column_mapping import maps_columns, stored_schema
from airflow_provider_deltamerge.delta.format.stats import (
    FOOTER_BOUND_BYTES_CONF,
    footer_bound_bytes,
    footer_stats,
)
from airflow_provider_deltamerge.delta.format.stats_columns import (
    STRING_PREFIX_LENGTH_CONF,
    Field,
    StatsSettings,
    indexed_columns,
)
from airflow_provider_deltamerge.delta.log.protocol import constraint_checks, shreds_variants
from airflow_provider_deltamerge.delta.log.row_tracking import materialized_columns, tracks_rows
from airflow_provider_deltamerge.delta.log.snapshot import Snapshot
from airflow_provider_deltamerge.session_kind import is_connect
from airflow_provider_deltamerge.spec.names import hidden_name, quote_part

# Not hidden (no leading "_" or "."): VACUUM, Delta's and deltalake's, skips hidden folders, so the files of
# a job killed while Spark wrote them would stay forever; here VACUUM removes them as any unreferenced file.
STAGING_PREFIX = "deltamerge-staging-"
HIVE_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# The virtual partition that sends a row to a change file (true) or a data file (false).
_CHANGE_PARTITION = hidden_name("is_cdc")
# Delta's table property for the size written files aim at, and its usual default (128 MiB).
TARGET_FILE_SIZE_KEY = "delta.targetFileSize"
DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
# Spark's conf (also read as a write option) that lets its parquet writer shred VARIANT columns.
INFER_SHREDDING_CONF = "spark.sql.variant.inferShreddingSchema"


@dataclass(frozen=True)
class Written:
    """The files one write made: data files, and change data files when the rows had a change type."""

    files: tuple[WrittenFile, ...]
    change_files: tuple[ChangeFile, ...] = ()


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

    def move_into_table(self, folder: str, relative_path: str, table_path: str) -> None:
        """Move ``folder/relative_path`` to ``table_path`` below the table root."""
        target = self._path(f"{self.root}/{table_path}")
        self._fs.mkdirs(target.getParent())
        if not self._fs.rename(self._path(f"{folder}/{relative_path}"), target):
            raise OSError(f"Could not move a new data file into the table: {table_path}")

    def delete(self, relative_path: str) -> None:
        self._fs.delete(self._path(f"{self.root}/{relative_path}"), True)

    def write_text(self, relative_path: str, text: str) -> None:
        out = self._fs.create(self._path(f"{self.root}/{relative_path}"), True)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()


def table_files(spark: SparkSession, table_uri: str) -> TableFiles | StoreFiles:
    """The table's files as ``spark`` sees them; from this process on Connect, which has no Hadoop here."""
    return StoreFiles(table_uri) if is_connect(spark) else TableFiles(spark, table_uri)


def write_files(
    spark: SparkSession,
    rows: DataFrame,
    snapshot: Snapshot,
    *,
    presized: bool = False,
    schema: StructType | None = None,
    columns: Sequence[str] | None = None,
) -> Written:
    """Write ``rows`` (the table's columns, in order) as new files of the table and describe them.

    Every row is checked against the table's NOT NULL columns, invariants and CHECK constraints while it is
    written. Files aim at ``delta.targetFileSize`` (default 128 MiB): a rebalancing shuffle lets adaptive
    execution pack small outputs into few files, and a per-file row cap (from the table's bytes per row)
    splits large ones.

    Args:
        spark: the session that computes ``rows``.
        rows: the output rows; partition columns are written as folders, not into the files. A last
            ``_change_type`` column makes the rows where it is set change data (see the module's text);
            under row tracking, the columns the table materializes row ids and commit versions in are
            written into the files as they are.
        snapshot: the table being written, for its location, partitioning, constraints and settings.
        presized: ``rows`` come straight from a scan, whose splits Spark sizes itself (up to
            ``spark.sql.files.maxPartitionBytes``): an unpartitioned table then needs no rebalancing
            shuffle. A partitioned one still does, or each split would write a file into every partition.
        schema: the table's schema as the commit will record it, with its fields' metadata (under column
            mapping, the physical names the files use); None for the schema of ``rows``.
        columns: the names of ``rows``' columns, where the caller knows them; None to read them from Spark.

    Returns:
        The new files holding rows, already in their final place, not yet committed.

    Raises:
        MergeExecutionError: a written row violates a constraint (Delta's error class and wording).
    """
    table = table_files(spark, snapshot.table_uri)
    names = list(rows.columns if columns is None else columns)
    with_changes = CHANGE_TYPE_COLUMN in names
    # The rows carry the schema the commit will have (evolved, if the merge evolves it): Delta collects
    # statistics against that schema, not the one read.
    # Row tracking's materialized columns ride in the data files beside the table's, without stats.
    tracked = materialized_columns(dict(snapshot.configuration))
    extra = [
        c for c in names if tracked and tracks_rows(snapshot.protocol.writer_features) and c in tracked.names
    ]
    table_columns = [c for c in names if not (with_changes and c == CHANGE_TYPE_COLUMN) and c not in extra]
    settings = StatsSettings.of(
        dict(snapshot.configuration), session_prefix=spark.conf.get(STRING_PREFIX_LENGTH_CONF, None)
    )
    partition_columns = list(snapshot.partition_columns)
    if schema is None:
        schema = rows.select(*[F.col(quote_part(c)) for c in table_columns]).schema
    mapped = maps_columns(dict(snapshot.configuration))
    stored = StructType(
        [physical_field(f) if mapped and f.name not in partition_columns else f for f in schema.fields]
    )
    indexed = indexed_columns(schema.jsonValue(), partition_columns, settings)
    if mapped:  # chosen by logical names (as the table's settings name them), read by stored ones
        indexed = stored_schema({"fields": indexed}, partition_columns)["fields"]
    staging_name = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    staging = f"{table.root}/{staging_name}"
    checks = constraint_checks(snapshot)
    # Change rows repeat data rows (post-images, inserts) or hold rows the table had (pre-images, deletes).
    rows = checked(rows, checks, table_columns, F.col(CHANGE_TYPE_COLUMN).isNull() if with_changes else None)
    if partition_columns or not presized:
        # One writer per table partition; adaptive execution coalesces or splits towards its advisory size.
        rows = rows.hint("rebalance", *partition_columns)
    if mapped:
        rows = rows.select(
            *[
                F.col(quote_part(f.name)).cast(s.dataType).alias(s.name, metadata=s.metadata)
                for f, s in zip(schema.fields, stored.fields, strict=True)
            ],
            *[F.col(quote_part(c)) for c in extra],
            *([CHANGE_TYPE_COLUMN] if with_changes else []),
        )
    if with_changes:
        rows = rows.withColumn(_CHANGE_PARTITION, F.col(CHANGE_TYPE_COLUMN).isNotNull())
    # "error" (not its alias "errorifexists"): the one name of the mode Spark Connect's client knows.
    writer = (
        rows.write.mode("error")
        .option("compression", "snappy")
        # Spark 4.1+ shreds VARIANT columns by default; the protocol allows it only where the table enables
        # shredding. Delta's TransactionalWrite passes this same write option.
        .option(INFER_SHREDDING_CONF, str(shreds_variants(snapshot)).lower())
        # String bounds cut as Delta's stats need them, so a long value leaves the footer its statistics.
        .option(FOOTER_BOUND_BYTES_CONF, str(footer_bound_bytes(settings.string_prefix_length)))
    )
    max_rows = max_records_per_file(snapshot)
    if max_rows is not None:
        writer = writer.option("maxRecordsPerFile", max_rows)
    if partition_columns or with_changes:
        writer = writer.partitionBy(*([_CHANGE_PARTITION] if with_changes else []), *partition_columns)
    moved: list[_Moved] = []
    try:
        try:
            writer.parquet(staging)
        except (PySparkException, Py4JJavaError) as err:
            violation = violation_error(spark, err, checks)
            if violation is None:
                raise
            raise violation from err
        for relative, size, mtime in table.list_parquet(staging):
            placed = _table_path(relative) if with_changes else (relative, False)
            table.move_into_table(staging, relative, placed[0])
            moved.append(_Moved(*placed, size, mtime))
        time_zone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
        written = _describe(snapshot, moved, time_zone, indexed, settings.string_prefix_length)
        # Spark leaves one file with no rows when there is nothing to write; Delta never commits such files.
        for empty in (f for f, _ in written if f.num_records == 0):
            table.delete(empty.relative_path)
        kept = [(f, change) for f, change in written if f.num_records > 0]
        return Written(
            files=tuple(f for f, change in kept if not change),
            change_files=tuple(
                ChangeFile(f.log_path, f.size, f.partition_values) for f, change in kept if change
            ),
        )
    except BaseException:
        for entry in moved:
            table.delete(entry.path)
        raise
    finally:
        table.delete(staging_name)


@dataclass(frozen=True)
class _Moved:
    """A file Spark wrote, in its place below the table root."""

    path: str
    change_data: bool
    size: int
    modification_time: int


def _table_path(staged: str) -> tuple[str, bool]:
    """Where a file staged under the change partition goes, and whether it is change data: Delta's
    ``DelayedCommitProtocol.newTaskTempFile`` drops the virtual partition and puts change files, named
    ``cdc-``, in ``_change_data/`` (under the table's partition folders)."""
    flag, rest = staged.split("/", 1)
    if flag != f"{_CHANGE_PARTITION}=true":
        return rest, False
    folder, _, name = rest.rpartition("/")
    name = "cdc-" + name.removeprefix("part-")
    return "/".join(p for p in (CHANGE_DATA_FOLDER, folder, name) if p), True


def discard(spark: SparkSession, snapshot: Snapshot, files: Sequence[WrittenFile | ChangeFile]) -> None:
    """Delete files written for a merge that will not be committed."""
    table = table_files(spark, snapshot.table_uri)
    for written in files:
        table.delete(written.relative_path)


def target_file_size(snapshot: Snapshot) -> int:
    """The size in bytes new files aim at: the table's ``delta.targetFileSize``, else 128 MiB."""
    return int(snapshot.setting(TARGET_FILE_SIZE_KEY) or DEFAULT_TARGET_FILE_SIZE)


def max_records_per_file(snapshot: Snapshot) -> int | None:
    """Rows per file that keep a file near the target size, from the table's own bytes per row; None when
    the table has no rows to learn from (then only the rebalancing decides)."""
    counted = [f for f in snapshot.files if f.num_records]
    rows = sum(f.num_records or 0 for f in counted)
    if not rows:
        return None
    bytes_per_row = max(1.0, sum(f.size for f in counted) / rows)
    return max(1, math.floor(target_file_size(snapshot) / bytes_per_row))


def _describe(
    snapshot: Snapshot,
    moved: Sequence[_Moved],
    time_zone: str,
    indexed: Sequence[Field],
    string_prefix_length: int,
) -> list[tuple[WrittenFile, bool]]:
    """Add-action descriptions of the moved files, each with whether it is change data (described without
    column stats, as a cdc action has none); footers are read in parallel since each is a round trip."""
    filesystem, root = _arrow_filesystem(snapshot.table_uri)

    def describe(entry: _Moved) -> tuple[WrittenFile, bool]:
        with filesystem.open_input_file(f"{root}/{entry.path}" if root else entry.path) as handle:
            metadata = pq.read_metadata(handle)
        written = WrittenFile(
            log_path=quote(entry.path, safe="/="),
            size=entry.size,
            partition_values=_partition_values(entry.path, snapshot, time_zone),
            modification_time=entry.modification_time,
            stats=footer_stats(
                metadata, () if entry.change_data else indexed, string_prefix_length=string_prefix_length
            ),
            num_records=metadata.num_rows,
        )
        return written, entry.change_data

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(describe, moved))


def _arrow_filesystem(table_uri: str) -> tuple[pafs.FileSystem, str]:
    """The table's folder as a pyarrow file system and the root's path in it. An object store goes through
    ``deltalake``'s client, which knows every scheme Spark's connectors serve (pyarrow's own knows no
    ``s3a``) and reads the same credentials as the log's reads."""
    if "://" in table_uri and not table_uri.startswith("file:"):
        return pafs.PyFileSystem(DeltaStorageHandler(table_uri.rstrip("/"))), ""
    if table_uri.startswith("file:"):
        filesystem, path = pafs.FileSystem.from_uri(table_uri)
        return filesystem, path.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(table_uri).rstrip("/")


def _partition_values(
    relative_path: str, snapshot: Snapshot, time_zone: str
) -> tuple[tuple[str, str | None], ...]:
    """Partition values from the Hive-style folders Spark wrote (``col=value/``), unescaped, as Delta does.

    Spark names timestamp folders in the session time zone; the log keeps them in UTC.
    """
    pairs = (part.split("=", 1) for part in relative_path.split("/")[:-1] if "=" in part)
    folders = {unquote(name): raw for name, raw in pairs}
    types = {f["name"]: f["type"] for f in snapshot.schema["fields"]}
    values: list[tuple[str, str | None]] = []
    for column in snapshot.partition_columns:
        raw = folders.get(column)
        value = None if raw in (None, HIVE_NULL_PARTITION) else unquote(raw)
        if value is not None and types.get(column) == "timestamp":
            value = _utc_partition_timestamp(value, time_zone)
        values.append((column, value))
    return tuple(values)


def _utc_partition_timestamp(value: str, time_zone: str) -> str:
    zone: datetime.tzinfo | None
    try:
        zone = zoneinfo.ZoneInfo(time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        # Spark also accepts offsets such as "+02:00" as a session time zone.
        zone = datetime.datetime.strptime(
            time_zone.replace("UTC", "").replace("GMT", "") or "+00:00", "%z"
        ).tzinfo
    local = datetime.datetime.fromisoformat(value).replace(tzinfo=zone)
    return local.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
