"""Load a merge's source as a Spark DataFrame, whatever form the spec gives it in."""

from __future__ import annotations

from collections.abc import Sequence

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType, VariantType

from airflow_provider_deltamerge.engine.source.delta_tables import read_delta_table, run_source_query
from airflow_provider_deltamerge.engine.spark_errors import SparkFailure, summarize
from airflow_provider_deltamerge.exceptions import SourceError
from airflow_provider_deltamerge.spec import MergeSource, MergeSpec, PathSource, QuerySource, TableSource
from airflow_provider_deltamerge.spec.delta_messages import delta_message
from airflow_provider_deltamerge.spec.names import hidden_name, quote_part

ROW_NUMBER_COLUMN = hidden_name("source_row_number")


def merge_source(spark: SparkSession, spec: MergeSpec) -> DataFrame:
    """The rows the merge reads: the source, de-duplicated when the spec asks for it."""
    return deduplicated(spec, load_source(spark, spec.source))


def deduplicated(spec: MergeSpec, rows: DataFrame) -> DataFrame:
    """``rows`` (the loaded source) with only the latest row per key when the spec asks for it."""
    if spec.deduplicate_source_by:
        return keep_latest(rows, spec.deduplicate_source_by, spec.deduplicate_order_by)
    return rows


def keep_latest(rows: DataFrame, keys: Sequence[str], order_by: Sequence[str]) -> DataFrame:
    """Per key, the row with the greatest ``order_by`` values (NULLs lowest).

    Ties are broken by the remaining columns, so both scans of a classic merge keep the same row.
    """
    missing = [name for name in (*keys, *order_by) if not _has_column(rows, name)]
    if missing:
        raise SourceError(
            f"The source has no column {', '.join(f'`{m}`' for m in missing)} to de-duplicate by; its "
            f"columns are {', '.join(rows.columns)}. Fix deduplicate_source_by / deduplicate_order_by.",
            error_class="UNRESOLVED_COLUMN",
        )
    tie_breakers = [f for f in rows.schema.fields if f.name not in order_by]
    ordering = [F.col(c).desc_nulls_last() for c in order_by]
    # The remaining columns are names, not paths: quoted, so a dot or backtick in one is part of the name.
    # Spark orders no map or variant: such a column breaks ties by its JSON text.
    ordering += [
        (
            F.col(quote_part(f.name)) if _orderable(f.dataType) else F.to_json(F.col(quote_part(f.name)))
        ).desc_nulls_last()
        for f in tie_breakers
    ]
    latest_first = Window.partitionBy(*[F.col(k) for k in keys]).orderBy(*ordering)
    ranked = rows.withColumn(ROW_NUMBER_COLUMN, F.row_number().over(latest_first))
    return ranked.filter(F.col(ROW_NUMBER_COLUMN) == 1).drop(ROW_NUMBER_COLUMN)


def _orderable(data_type: DataType) -> bool:
    """Whether Spark can sort by a value of ``data_type`` (no map or variant anywhere in it)."""
    if isinstance(data_type, MapType | VariantType):
        return False
    if isinstance(data_type, ArrayType):
        return _orderable(data_type.elementType)
    if isinstance(data_type, StructType):
        return all(_orderable(f.dataType) for f in data_type.fields)
    return True


def _has_column(rows: DataFrame, name: str) -> bool:
    """Whether ``name`` (a column, or a dotted path into structs) resolves against ``rows``."""
    try:
        rows.select(F.col(name)).schema  # noqa: B018 - resolving the column is the check
    except AnalysisException:
        return False
    return True


def load_source(spark: SparkSession, source: MergeSource) -> DataFrame:
    """The source rows; a Delta path, also ``delta.`path``` in a query, is read through its log, so no Delta
    jars are needed.

    Raises:
        SourceError: naming the path, table or query that cannot be read, with Spark's reason.
    """
    try:
        match source:
            case PathSource(format="delta"):
                return read_delta_table(spark, source.path)
            case PathSource():
                return spark.read.format(source.format).options(**dict(source.options)).load(source.path)
            case TableSource():
                return spark.table(source.name)
            case QuerySource():
                return run_source_query(spark, source.sql)
    except (PySparkException, Py4JJavaError) as err:
        failure = summarize(err)
        raise SourceError(_describe_failure(source, failure), error_class=failure.error_class) from err
    raise SourceError(f"Unknown source form {source!r}.", error_class="DELTAMERGE_UNKNOWN_SOURCE_FORM")


def _describe_failure(source: MergeSource, failure: SparkFailure) -> str:
    match source:
        case PathSource() if failure.error_class == "PATH_NOT_FOUND":
            return delta_message("PATH_NOT_FOUND", path=source.path) + (
                " Check the source path (is the upstream extract for this date written?)."
            )
        case PathSource():
            return (
                f"Cannot read the source {source.format} files at {source.path}: {failure} Check that the "
                f"files are complete {source.format} files and the reader options fit them."
            )
        case TableSource():
            return f"Cannot read the source table {source.name}: {failure}"
        case _:
            return f"Cannot run the source query: {failure}"
