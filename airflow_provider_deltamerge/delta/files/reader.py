"""Read chosen files of a Delta snapshot into Spark, with partition columns restored from the log."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from airflow_provider_deltamerge.delta.commit.added_files import WrittenFile
from airflow_provider_deltamerge.delta.files.physical_schema import read_field
from airflow_provider_deltamerge.delta.files.sql_text import sql_name, sql_type
from airflow_provider_deltamerge.delta.format.column_mapping import maps_by_id, maps_columns
from airflow_provider_deltamerge.delta.format.deletion_vectors import read_deleted_rows
from airflow_provider_deltamerge.delta.log.row_tracking import (
    MaterializedColumns,
    materialized_columns,
    tracks_rows,
)
from airflow_provider_deltamerge.delta.log.snapshot import DataFile, Snapshot
from airflow_provider_deltamerge.session_kind import session_confs_set
from airflow_provider_deltamerge.spec.names import hidden_name, quote_part

# Hidden columns the engine carries next to the table's own; the prefix keeps them apart from user columns.
# FILE_COLUMN is Spark's own URI of the row's file (``_metadata.file_path``, untouched: no per-row string
# work) and ROW_INDEX_COLUMN the row's index in that file; together they identify a row however Spark
# splits or re-runs the scan. ``files_by_uri`` maps the URIs back to the log's files, once per file.
FILE_COLUMN = hidden_name("file")
ROW_INDEX_COLUMN = hidden_name("row_index")
_KNOWN_FILE_COLUMN = hidden_name("known_file")
_FILE_ORDINAL_COLUMN = hidden_name("file_ordinal")
_DELETED_ROW_COLUMN = hidden_name("deleted_row")
# Under row tracking (delta/log/row_tracking.py) each row's id and commit version, as Delta's _metadata gives
# them, from the materialized columns or the file's base row id and default commit version.
ROW_ID_COLUMN = hidden_name("row_id")
ROW_COMMIT_VERSION_COLUMN = hidden_name("row_commit_version")
_BASE_ROW_ID_COLUMN = hidden_name("base_row_id")
_DEFAULT_ROW_COMMIT_VERSION_COLUMN = hidden_name("default_row_commit_version")
# Spark's parquet reader matches columns by the field ids in the read schema (``parquet.field.id``).
FIELD_ID_READ_CONF = "spark.sql.parquet.fieldId.read.enabled"
PARALLEL_LISTING = "spark.sql.sources.parallelPartitionDiscovery.threshold"
# A row's index in its file takes the low bits of a hidden row's key; the file's ordinal the rest.
ROW_INDEX_BITS = 40

# What java.net.URI leaves unquoted in a path (RFC 2396 unreserved, punct, '/' and '@'): Hadoop's Path, and
# so Spark's file URIs, quote every other ASCII character.
_URI_PATH_CHARACTERS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'(),;:$&+=/@"
)


def table_schema(snapshot: Snapshot) -> StructType:
    """The table's schema as Spark's StructType (Delta's schema string is Spark's JSON form)."""
    return StructType.fromJson(snapshot.schema)


def read_table(spark: SparkSession, snapshot: Snapshot) -> DataFrame:
    """Every row of ``snapshot`` with the table's columns only: what any reader of the table sees."""
    return read_files(spark, snapshot, snapshot.files).drop(
        FILE_COLUMN, ROW_INDEX_COLUMN, ROW_ID_COLUMN, ROW_COMMIT_VERSION_COLUMN
    )


def row_tracking_columns(snapshot: Snapshot) -> MaterializedColumns | None:
    """The materialized row tracking columns of a table whose writers assign row ids; None for others."""
    if not tracks_rows(snapshot.protocol.writer_features):
        return None
    return materialized_columns(dict(snapshot.configuration))


def read_files(spark: SparkSession, snapshot: Snapshot, files: Sequence[DataFile]) -> DataFrame:
    """The rows of exactly ``files`` in table column order, plus ``FILE_COLUMN`` and ``ROW_INDEX_COLUMN``
    (each row's file as Spark names it, and its index there: a row's identity for touched-file tracking
    and match checks).

    Partition values come from the log, not from folder names, as Delta readers do: a broadcast table of
    one row per file, keyed by Spark's URI of the file (a hash lookup per row); an unpartitioned table needs
    no join at all. Rows a deletion vector hides are left out by a broadcast anti join on (file, row index).
    Files written before a column existed read that column as NULL. Under row tracking each row also has
    ``ROW_ID_COLUMN`` and ``ROW_COMMIT_VERSION_COLUMN``.
    """
    schema = table_schema(snapshot)
    data_fields = [f for f in schema.fields if f.name not in snapshot.partition_columns]
    tracked = row_tracking_columns(snapshot)
    row_ids = (
        [StructField(ROW_ID_COLUMN, LongType()), StructField(ROW_COMMIT_VERSION_COLUMN, LongType())]
        if tracked
        else []
    )
    if not files:
        empty = StructType(
            [
                *schema.fields,
                StructField(FILE_COLUMN, StringType()),
                StructField(ROW_INDEX_COLUMN, LongType()),
                *row_ids,
            ]
        )
        # limit(0) makes it a relation Spark's optimizer knows to be empty: a join with it is dropped (an
        # anti join keeps the other side, an outer join pads it with NULLs), so no join, no shuffle.
        return spark.createDataFrame([], empty).limit(0)
    # Under column mapping the files name columns by their physical names: read those, rename below.
    configuration = dict(snapshot.configuration)
    mapped, by_id = maps_columns(configuration), maps_by_id(configuration)
    if by_id:
        # In id mode Delta finds a file's columns by parquet field id, so a file whose names differ from the
        # schema's physical names still reads; Spark's reader does so only with this conf, which Delta's
        # session extension turns on for every session (AbstractDeltaSparkSessionExtension).
        spark.conf.set(FIELD_ID_READ_CONF, "true")
    stored = {f.name: read_field(f, by_id=by_id) if mapped else f for f in data_fields}
    # Spark lists more than 32 paths (parallelPartitionDiscovery.threshold) in a Spark job of one task per
    # path: 0.3 s of scheduling where the local disk answers in milliseconds. A store's files keep the job
    # (one request per file).
    listing = {PARALLEL_LISTING: str(len(files))} if snapshot.on_local_disk else {}
    with session_confs_set(spark, listing):  # the files are listed here, when Spark resolves the relation
        materialized = [StructField(name, LongType()) for name in (tracked.names if tracked else ())]
        raw = spark.read.schema(StructType([*stored.values(), *materialized])).parquet(
            *[file_location(snapshot, f) for f in files]
        )
    # metadataColumn, not col("_metadata"): a table may have a column of its own named _metadata.
    metadata = raw.metadataColumn("_metadata")
    tagged = raw.select(
        "*",
        metadata.getField("file_path").alias(FILE_COLUMN),
        metadata.getField("row_index").alias(ROW_INDEX_COLUMN),
    )
    with_vectors = [f for f in files if f.deletion_vector is not None]
    if snapshot.partition_columns or with_vectors or tracked:
        # A left join, so that a file whose URI we named differently from Spark fails loudly (see
        # ``_column``) instead of losing its rows.
        tagged = tagged.join(F.broadcast(_file_table(spark, snapshot, files)), FILE_COLUMN, "left")
    if with_vectors:
        tagged = tagged.join(
            F.broadcast(_deleted_rows(spark, snapshot, files)),
            F.shiftleft(F.col(_FILE_ORDINAL_COLUMN).cast(LongType()), ROW_INDEX_BITS)
            + F.col(ROW_INDEX_COLUMN)
            == F.col(_DELETED_ROW_COLUMN),
            "left_anti",
        )
    columns = [_column(f.name, f.dataType, stored=stored.get(f.name)) for f in schema.fields]
    columns += [sql_name(FILE_COLUMN), sql_name(ROW_INDEX_COLUMN)]
    if tracked:
        row_index, base = sql_name(ROW_INDEX_COLUMN), sql_name(_BASE_ROW_ID_COLUMN)
        default = sql_name(_DEFAULT_ROW_COMMIT_VERSION_COLUMN)
        columns += [
            f"coalesce({sql_name(tracked.row_id)}, {base} + {row_index}) AS {sql_name(ROW_ID_COLUMN)}",
            f"coalesce({sql_name(tracked.row_commit_version)}, {default})"
            f" AS {sql_name(ROW_COMMIT_VERSION_COLUMN)}",
        ]
    if all(isinstance(c, str) for c in columns):
        # One parse on the JVM for the whole projection: each Column built in Python costs round trips.
        return tagged.selectExpr(*[c for c in columns if isinstance(c, str)])
    return tagged.select(*[F.expr(c) if isinstance(c, str) else c for c in columns])


def file_location(snapshot: Snapshot, file: DataFile | WrittenFile) -> str:
    """The location of ``file`` as the engine hands it to Spark's reader."""
    return f"{snapshot.table_uri.rstrip('/')}/{file.relative_path}"


def files_by_uri(snapshot: Snapshot, files: Sequence[DataFile]) -> Mapping[str, DataFile]:
    """``files`` keyed by the URI Spark reports for each in ``FILE_COLUMN``."""
    return {spark_file_uri(file_location(snapshot, f)): f for f in files}


def spark_file_uri(location: str) -> str:
    """The URI Spark reports as ``_metadata.file_path`` for a file read from ``location``.

    Spark names a file by its Hadoop path's URI, ``Path.toUri().toString()``, as the file system lists it:
    the scheme and authority, then the path with every character java.net.URI deems illegal quoted
    (as UTF-8 bytes, upper-case hex). A local file lists as ``file:/path``, without the empty authority.
    """
    scheme, separator, rest = location.partition(":")
    if not separator or "/" in scheme or len(scheme) == 1:  # no scheme (a Windows drive letter is none)
        scheme, rest = "file", os.path.abspath(location)
    if rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        path = "/" + path
    else:
        authority, path = "", rest
    prefix = f"{scheme}://{authority}" if authority else f"{scheme}:"
    return prefix + "".join(_quote_uri_character(c) for c in path)


def _quote_uri_character(character: str) -> str:
    if character in _URI_PATH_CHARACTERS:
        return character
    # java.net.URI keeps other non-ASCII characters as they are, except space and control characters.
    if ord(character) > 0x7F and unicodedata.category(character) not in ("Zs", "Zl", "Zp", "Cc"):
        return character
    return "".join(f"%{byte:02X}" for byte in character.encode("utf-8"))


def _column(name: str, data_type: DataType, *, stored: StructField | None) -> str | Column:
    """A table column from the scanned rows, as SQL text where it can be: a data column from the file's
    column ``stored`` (under column mapping a struct is cast field by field, by position, onto its logical
    names: the one case built as a Column), a partition column (``stored`` None) from the log's value."""
    alias = f" AS {sql_name(name)}"
    if stored is not None:
        if stored.dataType == data_type:
            return sql_name(stored.name) + alias
        return F.col(quote_part(stored.name)).cast(data_type).alias(name)
    value = sql_name(name)
    if isinstance(data_type, TimestampType):
        # The log keeps timestamp partition values in UTC, without a zone unless written in ISO form.
        value = (
            f"CASE WHEN {value} RLIKE '(Z|[+-][0-9][0-9]:?[0-9][0-9])$' THEN {value} ELSE {value} || 'Z' END"
        )
    unknown = (
        f"raise_error('Spark read a file the engine cannot find in the log: ' || {sql_name(FILE_COLUMN)})"
    )
    typed = f"CAST({value} AS {sql_type(data_type)})"
    return f"CASE WHEN {sql_name(_KNOWN_FILE_COLUMN)} IS NULL THEN {unknown} ELSE {typed} END" + alias


def _file_table(spark: SparkSession, snapshot: Snapshot, files: Sequence[DataFile]) -> DataFrame:
    """A small table to join onto the scanned rows: one row per file, keyed by Spark's URI of the file, with
    its partition values as text, for a file with a deletion vector its ordinal among ``files``, and its
    row tracking's base row id and default commit version (NULL without)."""
    rows = [
        (
            uri,
            True,
            n if f.deletion_vector is not None else None,
            f.base_row_id,
            f.default_row_commit_version,
            *(value for _, value in f.partition_values),
        )
        for n, (uri, f) in enumerate(files_by_uri(snapshot, files).items())
    ]
    schema = StructType(
        [
            StructField(FILE_COLUMN, StringType()),
            StructField(_KNOWN_FILE_COLUMN, BooleanType()),
            StructField(_FILE_ORDINAL_COLUMN, LongType()),
            StructField(_BASE_ROW_ID_COLUMN, LongType()),
            StructField(_DEFAULT_ROW_COMMIT_VERSION_COLUMN, LongType()),
            *[StructField(c, StringType()) for c in snapshot.partition_columns],
        ]
    )
    return spark.createDataFrame(rows, schema)


def _deleted_rows(spark: SparkSession, snapshot: Snapshot, files: Sequence[DataFile]) -> DataFrame:
    """The rows deletion vectors hide, one long each: the file's ordinal (as in ``_file_table``) shifted
    above the row's index in the file. Decoded on the driver, a few bytes per hidden row; one long key makes
    the anti join a hash lookup of a long."""
    vectors = [(n, f) for n, f in enumerate(files) if f.deletion_vector is not None]

    def keys(entry: tuple[int, DataFile]) -> np.ndarray:
        ordinal, file = entry
        assert file.deletion_vector is not None
        rows = read_deleted_rows(snapshot.table_uri, file.deletion_vector, num_records=file.num_records)
        return np.frombuffer(rows.to_array(), dtype=np.uint64).astype(np.int64) + (ordinal << ROW_INDEX_BITS)

    with ThreadPoolExecutor(max_workers=8) as pool:  # vector files are small reads, often remote
        found = list(pool.map(keys, vectors))
    return spark.createDataFrame(pa.table({_DELETED_ROW_COLUMN: pa.array(np.concatenate(found), pa.int64())}))
