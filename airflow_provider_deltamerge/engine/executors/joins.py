"""The two sides of the merge's joins, and whether the source is small enough to broadcast."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import AtomicType, BinaryType, DecimalType, StringType, StructType

from airflow_provider_deltamerge.delta.reader import read_files
from airflow_provider_deltamerge.delta.snapshot import DataFile
from airflow_provider_deltamerge.engine.clause_output import SOURCE_PRESENT, TARGET_PRESENT
from airflow_provider_deltamerge.engine.planning import MergePlan

# The most bytes (estimated) of rows the engine broadcasts: every executor and the driver hold a copy.
MAX_BROADCAST_BYTES = 64 * 1024 * 1024
# What a string or binary value is guessed to take: generous, so a broadcast stays under its budget.
_VARIABLE_WIDTH_BYTES = 128
# Spark's UnsafeRow keeps a fixed-width value (or a pointer to a variable-width one) in 8 bytes; the
# hashed relation adds about this much per row for its key and links.
_FIELD_BYTES = 8
_ROW_OVERHEAD_BYTES = 32


def target_rows(spark: SparkSession, plan: MergePlan, files: Sequence[DataFile]) -> DataFrame:
    """The rows of ``files`` under the target alias, each with its file, index in it and a presence flag."""
    rows = read_files(spark, plan.snapshot, files).withColumn(TARGET_PRESENT, F.lit(True))
    return rows.alias(plan.spec.target_alias)


def source_rows(plan: MergePlan, source: DataFrame) -> DataFrame:
    """The source rows under the source alias, with a presence flag (NULL after an outer join: unmatched)."""
    return source.withColumn(SOURCE_PRESENT, F.lit(True)).alias(plan.spec.source_alias)


def fits_in_memory(schema: StructType, rows: int) -> bool:
    """Whether ``rows`` rows of ``schema`` stay under ``MAX_BROADCAST_BYTES`` by a generous estimate."""
    row_bytes = _estimated_row_bytes(schema)
    return row_bytes is not None and rows * row_bytes <= MAX_BROADCAST_BYTES


def _estimated_row_bytes(schema: StructType) -> int | None:
    """An upper guess of a row's size in a broadcast relation; None for nested types (no useful guess)."""
    total = _ROW_OVERHEAD_BYTES
    for field in schema.fields:
        data_type = field.dataType
        if isinstance(data_type, StringType | BinaryType):
            total += _FIELD_BYTES + _VARIABLE_WIDTH_BYTES
        elif isinstance(data_type, DecimalType) and data_type.precision > 18:  # kept as bytes beside the row
            total += _FIELD_BYTES + 16
        elif isinstance(data_type, AtomicType):
            total += _FIELD_BYTES
        else:
            return None
    return total
