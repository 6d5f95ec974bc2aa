"""Read chosen files of a Delta snapshot into Spark, with partition columns restored from the log."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from airflow_provider_deltamerge.delta.snapshot import DataFile, Snapshot

# Hidden columns the engine carries next to the table's own; the prefix keeps them apart from user columns.
FILE_COLUMN = "__deltamerge_file"
ROW_ID_COLUMN = "__deltamerge_row_id"


def table_schema(snapshot: Snapshot) -> StructType:
    """The table's schema as Spark's StructType (Delta's schema string is Spark's JSON form)."""
    return StructType.fromJson(snapshot.schema)


def read_files(spark: SparkSession, snapshot: Snapshot, files: Sequence[DataFile]) -> DataFrame:
    """The rows of ``files`` in table column order, plus ``FILE_COLUMN`` (each row's file, as in the log).

    Partition values come from the log, not from folder names, as Delta readers do. Files written before a
    column existed read that column as NULL.
    """
    schema = table_schema(snapshot)
    data_fields = [f for f in schema.fields if f.name not in snapshot.partition_columns]
    if not files:
        empty = StructType([*schema.fields, StructField(FILE_COLUMN, StringType())])
        return spark.createDataFrame([], empty)
    root = snapshot.root_path.rstrip("/")
    paths = [f"{snapshot.table_uri.rstrip('/')}/{f.relative_path}" for f in files]
    raw = spark.read.schema(StructType(data_fields)).parquet(*paths)
    with_file = raw.withColumn(FILE_COLUMN, _relative_file_path(F.col("_metadata.file_path"), root))
    if snapshot.partition_columns:
        with_file = with_file.join(F.broadcast(_partition_values(spark, snapshot, files)), FILE_COLUMN)
    return with_file.select(
        *[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields], FILE_COLUMN
    )


def _relative_file_path(file_path: Column, root: str) -> Column:
    """Spark's URI of a file turned back into its decoded path below the table root.

    '+' is escaped first because ``url_decode`` follows form encoding, where '+' means a space.
    """
    path_only = F.regexp_replace(file_path, r"^[a-zA-Z][a-zA-Z0-9+.-]*:(//[^/]*)?", "")
    decoded = F.url_decode(F.replace(path_only, F.lit("+"), F.lit("%2B")))
    return F.substring(decoded, len(root) + 2, 1 << 30)


def _partition_values(spark: SparkSession, snapshot: Snapshot, files: Sequence[DataFile]) -> DataFrame:
    """A small (file, partition values as text) table to join onto the scanned rows."""
    columns = [FILE_COLUMN, *snapshot.partition_columns]
    rows = [(f.relative_path, *(value for _, value in f.partition_values)) for f in files]
    schema = StructType([StructField(c, StringType()) for c in columns])
    return spark.createDataFrame(rows, schema)
