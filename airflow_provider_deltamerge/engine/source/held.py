"""A small file source read once into the plan: the merge's materialized source, with no checkpoint.

Delta materializes a source it cannot prove stable (``materialize.py``). As a checkpoint that is a query of
its own, beside the reads of the source's key bounds (the append path) and key tuples (pruning): on a warm
Connect server such round trips, not the rows, are most of a small merge's time. A file source is read once
instead, up to ``HELD_ROWS`` + 1 rows (a limit stops the scan there). When that is all of it, its rows become
a local relation in the merge's plan: as stable as a checkpoint, so the write reads no file. The rows stay on
the driver too (``PreparedSource.held``), where pruning reads the keys that are source columns with no query
(``plan/pruning.py``); such a source takes no append path, whose query for the keys' bounds pruning makes
needless. Otherwise the merge goes on as before, having read the first rows of the source once more. A
source of several small files is held as one partition, as a scan of one file gives: an insert written
straight from it makes one file where a scan of the files might make several.

Only file sources without de-duplication are held: a table, a query or a de-duplication may shuffle the whole
source before its first row, which a limit does not spare. Only types whose values come back from Arrow as
they went in (a NaN, a time zone's gap and a timestamp before 1900 included); fields keep their metadata.
Only sources Spark estimates at most ``HELD_BYTES`` (for files, their size): ten thousand rows of documents
would not fit the driver.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    FractionalType,
    IntegralType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine.source.materialize import PreparedSource
from airflow_provider_deltamerge.metrics import MetricsRecorder
from airflow_provider_deltamerge.session_kind import is_connect
from airflow_provider_deltamerge.spec import MergeSpec, PathSource

log = logging.getLogger(__name__)

# The most rows a source may have to be held: a day's extract of a small table, a few MB of Arrow.
HELD_ROWS = 10_000
# The largest source held, by Spark's estimate of its size: Spark's default for a relation it broadcasts
# (spark.sql.autoBroadcastJoinThreshold), which Spark too collects to the driver.
HELD_BYTES = 10 * 1024 * 1024
# The root's statistics in the optimized plan Spark explains in "cost" mode, and the units it prints them in.
_STATISTICS = re.compile(
    r"== Optimized Logical Plan ==\n.*?Statistics\(sizeInBytes=([0-9.E+]+) ([KMGTPE]iB|B)", re.DOTALL
)
_UNITS = {unit: 1024**n for n, unit in enumerate(("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"))}
_LEAVES = (BooleanType, IntegralType, FractionalType, DecimalType, BinaryType, DateType, TimestampType)


def hold_small_source(
    spark: SparkSession, spec: MergeSpec, rows: DataFrame, recorder: MetricsRecorder, *, reason: str
) -> PreparedSource | None:
    """``rows`` (the source ``spec`` names, loaded), which Delta would materialize for ``reason``, read once
    and held as a local relation, counted; None when it is not a file source of at most ``HELD_ROWS`` rows and
    ``HELD_BYTES`` of types Arrow carries exactly (its first rows are then read for nothing). Timed into
    ``materializeSourceTimeMs``."""
    source = spec.source
    if not isinstance(source, PathSource) or source.format == "delta" or spec.deduplicate_source_by:
        return None
    schema = rows.schema
    if not all(_carried_exactly(f.dataType) for f in schema.fields):
        return None
    with recorder.timed(m.MATERIALIZE_SOURCE_TIME_MS):
        size = estimated_bytes(rows)
        if size is None or size > HELD_BYTES:
            log.debug("Source not held: Spark estimates it at %s bytes", size)
            return None
        table = rows.limit(HELD_ROWS + 1).toArrow()
        if table.num_rows > HELD_ROWS:
            return None
        # One partition, as Spark reads a small file (a local relation is cut into a task per core): the
        # files an insert writes straight from the source are the ones it writes from a scan of one file.
        held = spark.createDataFrame(table, schema=schema).coalesce(1)
    log.info("Source materialized (%s): %d rows held in the plan, read once", reason, table.num_rows)
    return PreparedSource(held, row_count=table.num_rows, held=table)


def estimated_bytes(rows: DataFrame) -> int | None:
    """Spark's estimate of the size of ``rows`` (for a file scan, its files' size); None where a Connect
    server's explained plan gives none."""
    if not is_connect(rows.sparkSession):
        return int(rows._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    connect_rows: Any = rows  # a Connect DataFrame; classic ones have no _explain_string
    found = _STATISTICS.search(str(connect_rows._explain_string(mode="cost")))
    return None if found is None else int(float(found[1]) * _UNITS[found[2]])


def _carried_exactly(data_type: DataType) -> bool:
    if isinstance(data_type, StructType):
        return all(_carried_exactly(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return _carried_exactly(data_type.elementType)
    if isinstance(data_type, MapType):
        return _carried_exactly(data_type.keyType) and _carried_exactly(data_type.valueType)
    if isinstance(data_type, StringType):
        return data_type == StringType()  # the default collation: a collated type's name is not carried
    return isinstance(data_type, (*_LEAVES, TimestampNTZType))
