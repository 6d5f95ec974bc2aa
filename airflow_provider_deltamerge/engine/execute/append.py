"""The append path: when no source row can match a target row, the source rows are written straight away.

When the source's [min, max] of each equi-join key of the ON condition lies outside every file's stats (new
keys beyond the table's: the usual insert-only merge of new rows, or rows of a new partition), no target row
can match. Only the NOT MATCHED clauses act, on every source row; no file is read or rewritten.

Delta materializes a source it cannot prove stable when the merge reads it twice (``materialize``), and
pruning by the source's keys is one more read. Here the source is read twice but not materialized: first
its keys' bounds (one aggregation), then, when no file can hold them, its rows, written through the NOT
MATCHED clauses. The second read checks each row against the first read's bounds as it flows (a filter
that fails the write, not an observation: Spark observes outside whole-stage code generation). A source
that changed in between so that a key left the bounds fails the write, which leaves nothing behind, and
the merge runs the usual way (materialized). Within the bounds no file can hold a row's keys: the bounds
are the merge's read predicate for the conflict check.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine.execute.phases import FileChanges
from airflow_provider_deltamerge.engine.execute.rewrite import write_inserts
from airflow_provider_deltamerge.engine.plan.planning import MergePlan, has_inserts
from airflow_provider_deltamerge.engine.plan.pruning import (
    FileFilter,
    exact_in_python,
    key_bounds,
    typed_literals,
)
from airflow_provider_deltamerge.engine.progress import enter_phase
from airflow_provider_deltamerge.metrics import MetricsRecorder
from airflow_provider_deltamerge.spec.names import hidden_name

log = logging.getLogger(__name__)

# What a second read's row outside the first read's bounds fails the write with.
_LEFT_BOUNDS = hidden_name("source_left_its_bounds")


@dataclass(frozen=True)
class Appended:
    """The files the append wrote, and the filter its source's bounds make (the read predicate)."""

    changes: FileChanges
    file_filter: FileFilter


def append_if_nothing_matches(
    spark: SparkSession, plan: MergePlan, source: DataFrame, recorder: MetricsRecorder
) -> Appended | None:
    """Write the source rows through the NOT MATCHED clauses if their keys' bounds reach no file of the
    table; None when they may reach one, or the merge inserts nothing, or its ON condition has no key that
    files' stats bound and whose bounds Python holds exactly: nothing is then written, and the merge runs
    the usual way.
    """
    if not has_inserts(plan.clauses):
        return None
    bounds = key_bounds(spark, plan, source)
    if bounds is None:
        return None
    snapshot = plan.snapshot
    aliased = source.alias(plan.spec.source_alias)
    first_read = aliased.agg(*bounds.aggregates)
    if not all(exact_in_python(f.dataType) for f in first_read.schema.fields):
        return None
    with recorder.timed(m.SCAN_TIME_MS):
        enter_phase("scan: the source's key bounds against the files' stats", files=len(snapshot.files))
        first = first_read.collect()[0]
        if bounds.reach_a_file(spark, snapshot, first, first_read.schema):
            return None
    kept = MetricsRecorder()  # the write's metrics, kept only if the write is
    try:
        with kept.timed(m.REWRITE_TIME_MS):
            enter_phase("append: no file can hold the source's keys")
            literals = typed_literals(first, first_read.schema)
            assert literals is not None, "every bound's type was checked exact in Python"
            rows = aliased.filter(_outside(bounds.keys, literals).isNull())
            written = write_inserts(spark, plan, rows, kept, presized=True, rows_as=m.NUM_SOURCE_ROWS)
    except (PySparkException, Py4JJavaError) as err:
        if _LEFT_BOUNDS not in str(err):
            raise
        log.warning(
            "The source changed between two reads: a key of its rows left the bounds it had at first; the "
            "merge runs the usual way, its source materialized"
        )
        return None
    if plan.executor == "classic":
        # The classic executor reports the source rows of its second scan; this read is its only one.
        kept.set(m.NUM_SOURCE_ROWS_IN_SECOND_SCAN, kept[m.NUM_SOURCE_ROWS])
    recorder.absorb(kept)
    return Appended(
        FileChanges(removed=(), added=written.files), bounds.file_filter(first, first_read.schema)
    )


def _outside(keys: Sequence[Column], bounds: Mapping[str, Column]) -> Column:
    """NULL for a row whose keys lie within ``bounds`` (literals of ``low_n``, ``high_n`` of key n) or are
    NULL (a NULL key matches nothing); else it fails the task with ``_LEFT_BOUNDS``."""
    within = [
        key.isNull() | (bounds[f"low_{n}"].isNotNull() & key.between(bounds[f"low_{n}"], bounds[f"high_{n}"]))
        for n, key in enumerate(keys)
    ]
    return F.when(~reduce(Column.__and__, within), F.raise_error(F.lit(_LEFT_BOUNDS)))
