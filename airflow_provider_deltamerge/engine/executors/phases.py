"""The phases the executors share: find touched files, rewrite them, write inserts.

The classic and matched-only executors run the same two phases (``run_two_phases``) and differ only in
which matches touch a file; the insert-only executor reuses ``write_inserts`` on the unmatched source.

* phase 1, ``find_touched_files``: join source and candidate target rows on the merge condition, check
  that no target row is matched by several source rows, and collect the files holding touching matches;
* phase 2, ``rewrite_touched_files``: join again with only the touched files, with the join type the
  clauses need, evaluate the clauses per row and write the results as new files;
* nothing touched: ``write_inserts`` inserts the source rows a NOT MATCHED clause selects, with no join.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import AtomicType, BinaryType, StringType, StructType

from airflow_provider_deltamerge.delta.reader import FILE_COLUMN, ROW_INDEX_COLUMN, files_by_uri, read_files
from airflow_provider_deltamerge.delta.snapshot import DataFile
from airflow_provider_deltamerge.delta.writer import WrittenFile, write_files
from airflow_provider_deltamerge.engine import metrics as m
from airflow_provider_deltamerge.engine.clause_output import (
    ACTION,
    SOURCE_PRESENT,
    TARGET_PRESENT,
    action_column,
    observed_counts,
    rows_written,
)
from airflow_provider_deltamerge.engine.metrics import MetricsRecorder
from airflow_provider_deltamerge.engine.observed import observe, observed
from airflow_provider_deltamerge.engine.planning import (
    MergePlan,
    has_inserts,
    has_not_matched_by_source,
    is_only_unconditional_delete,
)
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.spec.delta_messages import delta_message
from airflow_provider_deltamerge.spec.names import quote_part

log = logging.getLogger(__name__)

# How many offending target rows a multiple-match error shows.
SHOWN_MULTIPLE_MATCHES = 5
# The most source bytes (estimated) the rewrite broadcasts: every executor and the driver hold a copy.
MAX_BROADCAST_BYTES = 64 * 1024 * 1024
# What a string or binary value is guessed to take: generous, so a broadcast stays under its budget.
_VARIABLE_WIDTH_BYTES = 128


@dataclass(frozen=True)
class FileChanges:
    """What an executor did to the table's files, not yet committed."""

    removed: tuple[DataFile, ...]
    added: tuple[WrittenFile, ...]


def run_two_phases(
    spark: SparkSession, plan: MergePlan, source: DataFrame, recorder: MetricsRecorder, *, touches: Column
) -> FileChanges:
    """Find the touched files, then rewrite them (or only insert, when none is touched).

    Args:
        touches: over a matched (source, target) pair: whether it makes its file touched.
    """
    with recorder.timed(m.SCAN_TIME_MS):
        touched, duplicate_matches = find_touched_files(plan, source, recorder, touches=touches)
    with recorder.timed(m.REWRITE_TIME_MS):
        counted, second_scan = observe(source, F.count(F.lit(1)).alias("rows"))
        if not touched:
            added = write_inserts(spark, plan, counted, recorder, presized=True)
        else:
            added = rewrite_touched_files(spark, plan, counted, touched, recorder)
            # Several source rows deleting one target row count it once (Delta's correction).
            recorder.add(m.NUM_TARGET_ROWS_DELETED, -duplicate_matches)
            recorder.add(m.NUM_TARGET_ROWS_MATCHED_DELETED, -duplicate_matches)
    if touched or has_inserts(plan.clauses):  # else phase 2 read nothing
        _count_second_scan(recorder, observed_count(second_scan, "rows", fallback=source))
    recorder.set(m.NUM_TARGET_FILES_REMOVED, len(touched))
    recorder.set(m.NUM_TARGET_BYTES_REMOVED, sum(f.size for f in touched))
    recorder.set(m.NUM_TARGET_PARTITIONS_REMOVED_FROM, m.count_partitions(touched))
    return FileChanges(removed=touched, added=tuple(added))


def _count_second_scan(recorder: MetricsRecorder, rows: int) -> None:
    """Record the second read's source rows; a different count than the first read's means the source
    changed in between (Delta only warns: it is not materialized, or ``materializeSource`` is ``none``)."""
    recorder.set(m.NUM_SOURCE_ROWS_IN_SECOND_SCAN, rows)
    if rows != recorder[m.NUM_SOURCE_ROWS]:
        log.warning(
            "Merge source has %d rows in initial scan but %d rows in second scan: it is not deterministic "
            "(set spark.databricks.delta.merge.materializeSource to all to read it once)",
            recorder[m.NUM_SOURCE_ROWS],
            rows,
        )


def target_rows(spark: SparkSession, plan: MergePlan, files: tuple[DataFile, ...]) -> DataFrame:
    return read_files(spark, plan.snapshot, files).withColumn(TARGET_PRESENT, F.lit(True))


def _source_rows(plan: MergePlan, source: DataFrame) -> DataFrame:
    return source.withColumn(SOURCE_PRESENT, F.lit(True)).alias(plan.spec.source_alias)


def find_touched_files(
    plan: MergePlan, source: DataFrame, recorder: MetricsRecorder, *, touches: Column
) -> tuple[tuple[DataFile, ...], int]:
    """Phase 1: the candidate files holding touching matches, and how many surplus matches were tolerated.

    One Spark job returns one row per matched file (never data rows). The multiple-match check looks at
    every match, touching or not; with a NOT MATCHED BY SOURCE clause every candidate file is touched,
    as in Delta.

    Raises:
        MergeExecutionError: DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE, showing a few
            offending rows.
    """
    if not plan.candidate_files:
        # No target row can match; count the source directly, as Delta does when the join is optimized away.
        recorder.set(m.NUM_SOURCE_ROWS, source.count())
        return (), 0
    spark = source.sparkSession
    alias = plan.spec.target_alias
    target = target_rows(spark, plan, plan.candidate_files)  # carries each row's file and index in it
    counted_source, source_count = observe(_source_rows(plan, source), F.count(F.lit(1)).alias("rows"))
    joined = counted_source.join(target.alias(alias), F.expr(plan.condition), "inner")
    per_row = joined.groupBy(FILE_COLUMN, ROW_INDEX_COLUMN).agg(
        F.count(F.lit(1)).alias("matches"), F.max(F.coalesce(touches, F.lit(False))).alias("acting")
    )
    per_file = per_row.groupBy(FILE_COLUMN).agg(
        F.sum(F.when(F.col("matches") > 1, 1).otherwise(0)).alias("multiply_matched"),
        F.sum(F.col("matches") - 1).alias("surplus"),
        F.max("acting").alias("acting"),
    )
    files = per_file.collect()
    recorder.set(m.NUM_SOURCE_ROWS, observed_count(source_count, "rows", fallback=source))
    multiply_matched = sum(row["multiply_matched"] for row in files)
    if multiply_matched and not is_only_unconditional_delete(plan.clauses):
        raise _multiple_match_error(plan, joined, multiply_matched)
    if has_not_matched_by_source(plan.clauses):
        return plan.candidate_files, sum(row["surplus"] for row in files)
    touched_uris = {row[FILE_COLUMN] for row in files if row["acting"]}
    touched = _log_files(plan, touched_uris)
    return touched, sum(row["surplus"] for row in files if row[FILE_COLUMN] in touched_uris)


def _log_files(plan: MergePlan, uris: set[str]) -> tuple[DataFile, ...]:
    """The candidate files Spark named ``uris``, in the log's order.

    Raises:
        MergeExecutionError: Spark named a file the engine did not hand it (never expected: rather fail
            than rewrite a file without its rows).
    """
    by_uri = files_by_uri(plan.snapshot, plan.candidate_files)
    unknown = sorted(uris - by_uri.keys())
    if unknown:
        raise MergeExecutionError(
            f"Spark read files the engine cannot find in the table's log: {unknown[:3]}"
        )
    return tuple(f for uri, f in by_uri.items() if uri in uris)


def observed_count(observation: Observation, name: str, *, fallback: DataFrame) -> int:
    """An observed count; when Spark pruned the observed branch (e.g. no target rows), count directly."""
    values = observed(observation)
    return int(values[name]) if values is not None else fallback.count()


def _multiple_match_error(plan: MergePlan, joined: DataFrame, multiply_matched: int) -> MergeExecutionError:
    columns = [f.name for f in plan.target_schema.fields]
    alias = plan.spec.target_alias
    examples = (
        joined.groupBy(FILE_COLUMN, ROW_INDEX_COLUMN)
        .agg(
            F.count(F.lit(1)).alias("matches"),
            *[F.first(F.col(f"{alias}.{quote_part(c)}")).alias(c) for c in columns],
        )
        .filter(F.col("matches") > 1)
        .limit(SHOWN_MULTIPLE_MATCHES)
        .collect()
    )
    shown = "; ".join(
        "{" + ", ".join(f"{c}={row[c]!r}" for c in columns) + f"}} matched {row['matches']} source rows"
        for row in examples
    )
    return MergeExecutionError(
        delta_message("DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE")
        + f"\n{multiply_matched} target row(s) matched more than one source row, e.g. {shown}. "
        "De-duplicate the source on the merge keys (deduplicate_source_by) or tighten the ON condition.",
        error_class="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE",
    )


def rewrite_touched_files(
    spark: SparkSession,
    plan: MergePlan,
    source: DataFrame,
    touched: tuple[DataFile, ...],
    recorder: MetricsRecorder,
    *,
    presized: bool = False,
) -> list[WrittenFile]:
    """Phase 2: rewrite the touched files with every clause applied, plus the inserted rows.

    The join keeps every target row of the touched files (they are rewritten whole); it keeps unmatched
    source rows only when a NOT MATCHED clause may insert them. Without inserts, a source that fits in
    memory is broadcast: the touched files stream through the join unshuffled, so their scan's splits
    size the output and an unpartitioned table needs no rebalance (``presized``, see ``write_files``).
    """
    join_type = "full_outer" if has_inserts(plan.clauses) else "right_outer"
    target = target_rows(spark, plan, touched).alias(plan.spec.target_alias)
    source_rows = _source_rows(plan, source)
    streamed = join_type == "right_outer" and fits_in_memory(source, recorder[m.NUM_SOURCE_ROWS])
    if streamed:
        source_rows = F.broadcast(source_rows)
    joined = source_rows.join(target, F.expr(plan.condition), join_type)
    return _write_with_actions(spark, plan, joined, recorder, presized=presized or streamed)


def fits_in_memory(source: DataFrame, rows: int) -> bool:
    """Whether ``rows`` rows of ``source`` stay under ``MAX_BROADCAST_BYTES`` by a generous estimate."""
    row_bytes = _estimated_row_bytes(source.schema)
    return row_bytes is not None and rows * row_bytes <= MAX_BROADCAST_BYTES


def _estimated_row_bytes(schema: StructType) -> int | None:
    """An upper guess of a row's size in Spark's memory; None for nested types (no useful guess)."""
    total = 16  # row header
    for field in schema.fields:
        if isinstance(field.dataType, StringType | BinaryType):
            total += _VARIABLE_WIDTH_BYTES
        elif isinstance(field.dataType, AtomicType):
            total += 16
        else:
            return None
    return total


def write_inserts(
    spark: SparkSession, plan: MergePlan, source: DataFrame, recorder: MetricsRecorder, *, presized: bool
) -> list[WrittenFile]:
    """Nothing matched: every source row is unmatched, so only the NOT MATCHED clauses can act.

    Args:
        presized: ``source`` is a scan (no join or shuffle of the engine's), see ``write_files``.
    """
    if not has_inserts(plan.clauses):
        return []
    # Joining with no target files: Spark's optimizer drops the join (``read_files`` of no file is a
    # relation it knows to be empty), so this writes the source rows straight from their scan.
    return rewrite_touched_files(spark, plan, source, (), recorder, presized=presized)


def _write_with_actions(
    spark: SparkSession, plan: MergePlan, joined: DataFrame, recorder: MetricsRecorder, *, presized: bool
) -> list[WrittenFile]:
    with_action = joined.withColumn(ACTION, action_column(plan))
    counted, counts = observe(with_action, *observed_counts(plan))
    written = write_files(spark, rows_written(plan, counted), plan.snapshot, presized=presized)
    values = observed(counts)
    if values is None:
        # Adaptive execution can drop the observed node from the plan it finally runs (seen when every
        # row is deleted from a partitioned table and the source is empty): count again, in one more job.
        log.warning("Spark lost the merge's observed row counts; counting them again")
        values = with_action.agg(*observed_counts(plan)).first().asDict()  # type: ignore[union-attr]
    for name, value in values.items():
        recorder.set(name, value or 0)
    recorder.set(m.NUM_TARGET_FILES_ADDED, len(written))
    recorder.set(m.NUM_TARGET_BYTES_ADDED, sum(f.size for f in written))
    recorder.set(m.NUM_TARGET_PARTITIONS_ADDED_TO, m.count_partitions(written))
    return written
