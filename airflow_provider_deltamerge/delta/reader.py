"""Read chosen files of a Delta snapshot into Spark, with partition columns restored from the log."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType, TimestampType

from airflow_provider_deltamerge.delta.snapshot import DataFile, Snapshot

# Hidden columns the engine carries next to the table's own; the prefix keeps them apart from user columns.
FILE_COLUMN = "__deltamerge_file"
ROW_ID_COLUMN = "__deltamerge_row_id"
_ORDINAL_COLUMN = "__deltamerge_file_ordinal"
# A row's identity is (file ordinal << ROW_INDEX_BITS) | its index in the file: stable however Spark splits
# or re-runs the scan, and unique up to 2**23 files and 2**40 rows per file.
ROW_INDEX_BITS = 40


def table_schema(snapshot: Snapshot) -> StructType:
    """The table's schema as Spark's StructType (Delta's schema string is Spark's JSON form)."""
    return StructType.fromJson(snapshot.schema)


def read_table(spark: SparkSession, snapshot: Snapshot) -> DataFrame:
    """Every row of ``snapshot`` with the table's columns only: what any reader of the table sees."""
    return read_files(spark, snapshot, snapshot.files).drop(FILE_COLUMN, ROW_ID_COLUMN)


def read_files(spark: SparkSession, snapshot: Snapshot, files: Sequence[DataFile]) -> DataFrame:
    """The rows of exactly ``files`` in table column order, plus ``FILE_COLUMN`` (each row's file, as in the
    log) and ``ROW_ID_COLUMN`` (a stable identity per row, for touched-file tracking and match checks).

    Partition values come from the log, not from folder names, as Delta readers do. Files written before a
    column existed read that column as NULL.
    """
    schema = table_schema(snapshot)
    data_fields = [f for f in schema.fields if f.name not in snapshot.partition_columns]
    if not files:
        empty = StructType(
            [*schema.fields, StructField(FILE_COLUMN, StringType()), StructField(ROW_ID_COLUMN, LongType())]
        )
        return spark.createDataFrame([], empty)
    root = snapshot.root_path.rstrip("/")
    paths = [f"{snapshot.table_uri.rstrip('/')}/{f.relative_path}" for f in files]
    raw = spark.read.schema(StructType(data_fields)).parquet(*paths)
    with_file = raw.select(
        "*",
        _relative_file_path(F.col("_metadata.file_path"), root).alias(FILE_COLUMN),
        F.col("_metadata.row_index").alias("__deltamerge_row_index"),
    )
    with_file = with_file.join(F.broadcast(_file_table(spark, snapshot, files)), FILE_COLUMN)
    row_id = F.shiftleft(F.col(_ORDINAL_COLUMN).cast("long"), ROW_INDEX_BITS) + F.col(
        "__deltamerge_row_index"
    )
    return with_file.select(
        *[_column(f.name, f.dataType, partition=f.name in snapshot.partition_columns) for f in schema.fields],
        FILE_COLUMN,
        row_id.alias(ROW_ID_COLUMN),
    )


def _column(name: str, data_type: DataType, *, partition: bool) -> Column:
    value = F.col(f"`{name}`")
    if partition and isinstance(data_type, TimestampType):
        # The log keeps timestamp partition values in UTC, without a zone unless written in ISO form.
        value = F.when(value.rlike(r"(Z|[+-]\d\d:?\d\d)$"), value).otherwise(F.concat(value, F.lit("Z")))
    return value.cast(data_type).alias(name)


def _relative_file_path(file_path: Column, root: str) -> Column:
    """Spark's URI of a file turned back into its decoded path below the table root.

    '+' is escaped first because ``url_decode`` follows form encoding, where '+' means a space.
    """
    path_only = F.regexp_replace(file_path, r"^[a-zA-Z][a-zA-Z0-9+.-]*:(//[^/]*)?", "")
    decoded = F.url_decode(F.replace(path_only, F.lit("+"), F.lit("%2B")))
    return F.substring(decoded, len(root) + 2, 1 << 30)


def _file_table(spark: SparkSession, snapshot: Snapshot, files: Sequence[DataFile]) -> DataFrame:
    """A small (file, ordinal, partition values as text) table to join onto the scanned rows."""
    rows = [(f.relative_path, n, *(value for _, value in f.partition_values)) for n, f in enumerate(files)]
    schema = StructType(
        [
            StructField(FILE_COLUMN, StringType()),
            StructField(_ORDINAL_COLUMN, LongType()),
            *[StructField(c, StringType()) for c in snapshot.partition_columns],
        ]
    )
    return spark.createDataFrame(rows, schema)
