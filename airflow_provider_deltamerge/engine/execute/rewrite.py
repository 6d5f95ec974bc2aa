"""Phase 2 of a merge: rewrite the touched files with the clauses applied, and write the inserted rows.

The output is the union of up to two branches, written in one Spark job:

* **the touched files' rows**, each joined with its matching source row (a right outer join: every row of
  a rewritten file is written back, changed or copied). A source that fits in memory is broadcast, so the
  target rows stream through the join with no shuffle and their scan's splits size the output files;
* **the inserts**: the source rows that match no target row. Where the ON condition's source key columns
  decide a match, phase 1 handed over the matched rows' key values (a source that fits in memory: the
  inserts are the source rows without them, an anti join against those broadcast values) or the unmatched
  rows' (a source too big to broadcast: the rows with them). Else a left anti join against the matched
  files only; when the source is broadcast, the matched files' rows are first narrowed to the matched ones
  with a semi join against it, so the anti join's other side is small too.

One full outer join would do both, but it shuffles every row of the touched files; it is used only when the
source is too big to broadcast and the matched and touched files are the same. A source too big to
broadcast is the hashed side of a shuffled hash join, so the touched files' rows are not sorted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.files.writer import Written, max_records_per_file, write_files
from airflow_provider_deltamerge.engine.execute.change_rows import ChangeRows
from airflow_provider_deltamerge.engine.execute.clause_output import (
    ACTION,
    ALL_ROW_KINDS,
    RowKind,
    action_column,
    observed_counts,
    output_names,
    rows_written,
)
from airflow_provider_deltamerge.engine.execute.joins import (
    broadcast_budget,
    fits_in_memory,
    join_condition,
    source_rows,
    target_key_schema,
    target_rows,
)
from airflow_provider_deltamerge.engine.execute.scan_splits import ScanSplit, balanced_splits, scan_split
from airflow_provider_deltamerge.engine.execute.touched_files import TouchedFiles
from airflow_provider_deltamerge.engine.observed import observe, observed, observed_count
from airflow_provider_deltamerge.engine.plan.planning import MergePlan, has_inserts
from airflow_provider_deltamerge.metrics import MetricsRecorder

log = logging.getLogger(__name__)

# Joined rows paired with the kinds of rows they can hold (see ``clause_output``).
Branch = tuple[DataFrame, frozenset[RowKind]]
TOUCHED_ROWS: frozenset[RowKind] = frozenset({"matched", "target_only"})
_UNMATCHED_SOURCE: frozenset[RowKind] = frozenset({"source_only"})
# How many times the touched rows the source must hold for narrowing it to the rows matching them to pay.
_NARROWING_FACTOR = 4


def rewrite_touched_files(
    spark: SparkSession,
    plan: MergePlan,
    source: DataFrame,
    found: TouchedFiles,
    recorder: MetricsRecorder,
    *,
    presized: bool = False,
) -> Written:
    """Rewrite ``found.touched`` with every clause applied, plus the inserted rows; record the row metrics.

    With the change data feed on, a rewrite writes the change rows of every row it changes, inserts
    included; inserts alone are written without (as Delta does: added files read as inserts).

    Args:
        presized: ``source`` is a scan (no join or shuffle of the engine's), see ``write_files``.
    """
    inserting = has_inserts(plan.clauses)
    if not found.touched and not inserting:
        return Written(files=())
    condition = join_condition(plan, plan.source_schema)
    budget = broadcast_budget(spark)
    broadcast = fits_in_memory(plan.source_schema, recorder[m.NUM_SOURCE_ROWS], budget)
    # The second scan of the source is counted on one branch that reads every source row once: the inserts'
    # (an anti join), else the touched rows'. Inserts picked by phase 1's unmatched keys may be none at all,
    # a branch Spark then drops: the touched rows' branch counts, where there is one.
    counted, second_scan = observe(source, F.count(F.lit(1)).alias("rows"))
    inserts_count = inserting and (found.unmatched is None or not found.touched)
    touched_source, insert_source = (source, counted) if inserts_count else (counted, source)
    branches: list[Branch] = []
    one_file = (
        inserting
        and bool(found.touched)
        and _fit_one_file(plan, recorder[m.NUM_SOURCE_ROWS], shuffled=not broadcast)
    )
    if inserting and not broadcast and set(found.matched) <= set(found.touched):
        touched = target_rows(spark, plan, found.touched)
        joined = _hashed(source_rows(plan, counted)).join(touched, condition, "full_outer")
        branches.append((joined, ALL_ROW_KINDS))
    else:
        if found.touched:
            touched = target_rows(spark, plan, found.touched)
            streamed = (
                None
                if broadcast
                else _source_for_touched(
                    plan,
                    touched_source,
                    touched,
                    condition,
                    found,
                    source_count=recorder[m.NUM_SOURCE_ROWS],
                    budget=budget,
                )
            )
            if streamed is None:
                streamed = source_rows(plan, touched_source)
                streamed = F.broadcast(streamed) if broadcast else _hashed(streamed)
            branches.append((streamed.join(touched, condition, "right_outer"), TOUCHED_ROWS))
        if inserting:
            joined, kinds = _insert_candidates(
                spark, plan, source, insert_source, found, condition, broadcast, budget
            )
            if one_file:
                # The inserts are written by one task (the touched files' own when they are read in one, see
                # ``one_task`` below): one small file at most, where each split of the source would add one.
                joined = joined.coalesce(1)
            branches.append((joined, kinds))
    changes = (
        ChangeRows(deduplicate_deletes=found.surplus_matches > 0)
        if plan.writes_change_data and found.touched
        else None
    )
    split = scan_split(spark, found.touched)
    written = write_with_actions(
        spark,
        plan,
        branches,
        recorder,
        presized=presized or broadcast,
        split=split,
        # Touched files read in one task take the inserts into it: one file written, not two.
        one_task=one_file and split is not None and split.tasks == 1,
        changes=changes,
    )
    _count_second_scan(recorder, observed_count(second_scan, "rows", fallback=source))
    return written


def _source_for_touched(
    plan: MergePlan,
    source: DataFrame,
    touched: DataFrame,
    condition: Column,
    found: TouchedFiles,
    *,
    source_count: int,
    budget: int,
) -> DataFrame | None:
    """The source rows that match a touched row, for a source too big to broadcast; None when the touched
    files' keys are too many to broadcast themselves (then the whole source is joined).

    Each target row has at most one match (more only for an unconditional DELETE's surplus), so at most as
    many source rows as the touched files hold (and the surplus) match one. A semi join against the touched
    rows (broadcast: Spark reads only their ON-condition columns) streams the source past them and leaves
    that many rows, broadcast in turn when they fit, else hashed. A full sync (every source row matches
    some target row, few files change) then reads its source once instead of shuffling all of it. Where the
    source is not several times the touched rows, the semi join would only add a pass: it is not made.
    """
    counts = [f.logical_records for f in found.touched]
    if any(n is None for n in counts):
        return None
    rows = sum(n for n in counts if n is not None) + found.surplus_matches
    if rows * _NARROWING_FACTOR > source_count or not fits_in_memory(target_key_schema(plan), rows, budget):
        return None
    narrowed = source_rows(plan, source).join(F.broadcast(touched), condition, "left_semi")
    narrowed = narrowed.alias(plan.spec.source_alias)
    return F.broadcast(narrowed) if fits_in_memory(plan.source_schema, rows, budget) else _hashed(narrowed)


def _fit_one_file(plan: MergePlan, source_rows: int, *, shuffled: bool) -> bool:
    """Whether the inserts, at most ``source_rows``, go in one file of an unshuffled write (a partitioned
    table's or a ``shuffled`` join's write is rebalanced: adaptive execution sizes its files)."""
    if shuffled or plan.snapshot.partition_columns:
        return False
    per_file = max_records_per_file(plan.snapshot)
    return per_file is not None and source_rows <= per_file


def _hashed(source: DataFrame) -> DataFrame:
    """``source`` as the hashed side of a shuffled join: the touched files' rows are shuffled but not
    sorted (a sort-merge join sorts both sides). Each task holds one shuffle partition of the source."""
    return source.hint("shuffle_hash")


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


def write_inserts(
    spark: SparkSession,
    plan: MergePlan,
    unmatched: DataFrame,
    recorder: MetricsRecorder,
    *,
    presized: bool,
    rows_as: str | None = None,
) -> Written:
    """Write the source rows ``unmatched`` (known to match no target row) through the NOT MATCHED clauses.

    Args:
        presized: ``unmatched`` is a scan (no join or shuffle of the engine's), see ``write_files``.
        rows_as: record the count of ``unmatched`` rows as this metric too (counted as they are written).
    """
    branch = _with_target_columns(spark, plan, unmatched)
    return write_with_actions(spark, plan, [branch], recorder, presized=presized, rows_as=rows_as)


def _with_target_columns(spark: SparkSession, plan: MergePlan, unmatched: DataFrame) -> Branch:
    """Unmatched source rows with NULL target columns, as a full outer join gives them.

    The join meets a relation Spark's optimizer knows to be empty (``read_files`` of no file) and is
    dropped: no join runs.
    """
    no_target = target_rows(spark, plan, ())
    joined = source_rows(plan, unmatched).join(no_target, F.expr(plan.condition), "left_outer")
    return joined, _UNMATCHED_SOURCE


def _insert_candidates(
    spark: SparkSession,
    plan: MergePlan,
    source: DataFrame,
    counted: DataFrame,
    found: TouchedFiles,
    condition: Column,
    broadcast: bool,
    budget: int,
) -> Branch:
    """The source rows no target row matches, with NULL target columns.

    Only the matched files can hold a match (phase 1 looked at every candidate file); with none, the anti
    join meets an empty relation and Spark drops it too. When phase 1 found the unmatched rows' key values,
    the rows are picked out of the source by them instead, with no join against the target; when it kept
    the matched rows' key values (and they fit in memory), the source rows holding none of them are.

    Args:
        counted: the source rows to read (``source``, or it observed for the second-scan count): the join
            reads each of them once.
        condition: the joins' condition (``join_condition``).
        broadcast: ``source`` fits in memory and is broadcast.
        budget: the most bytes the engine broadcasts (``broadcast_budget``).
    """
    if found.unmatched is not None:
        values = spark.createDataFrame(list(found.unmatched.values), found.unmatched.schema)
        unmatched = _rows_with_keys(plan, counted, found.unmatched.columns, values, "left_semi")
        return _with_target_columns(spark, plan, unmatched)
    kept = found.matched_keys
    if kept is not None and fits_in_memory(
        kept.values.schema, found.matched_rows + found.surplus_matches, budget
    ):
        unmatched = _rows_with_keys(plan, counted, kept.columns, kept.values, "left_anti")
        return _with_target_columns(spark, plan, unmatched)
    matched_rows = target_rows(spark, plan, found.matched)
    if broadcast and found.matched:
        # Streams the matched files' ON-condition columns (Spark prunes the rest) past the broadcast source:
        # what is left is the matched target rows, few enough to broadcast into the anti join.
        matched_rows = matched_rows.join(F.broadcast(source_rows(plan, source)), condition, "left_semi")
    # What is left of the matched files: their matched rows after the semi join, else all their rows.
    records = [f.logical_records for f in found.matched]
    held = found.matched_rows if broadcast else sum(n or 0 for n in records)
    if (broadcast or None not in records) and fits_in_memory(target_key_schema(plan), held, budget):
        matched_rows = F.broadcast(matched_rows)  # Spark reads only their ON-condition columns
    elif found.matched:
        matched_rows = _hashed(matched_rows)  # a source too big to broadcast: hashed, not sorted
    unmatched = counted.alias(plan.spec.source_alias).join(matched_rows, condition, "left_anti")
    return _with_target_columns(spark, plan, unmatched)


def _rows_with_keys(
    plan: MergePlan, source: DataFrame, columns: Sequence[str], values: DataFrame, how: str
) -> DataFrame:
    """The rows of ``source`` whose ``columns`` hold (``left_semi``) or do not hold (``left_anti``) one of the
    key tuples of ``values`` (fields ``k0``, ``k1``, ...; NULLs alike): a join against the broadcast values,
    so the source streams through once, unshuffled."""
    values = F.broadcast(values)
    condition = reduce(
        Column.__and__,
        [F.expr(column).eqNullSafe(values[f"k{n}"]) for n, column in enumerate(columns)],
    )
    return source.alias(plan.spec.source_alias).join(values, condition, how)


def write_with_actions(
    spark: SparkSession,
    plan: MergePlan,
    branches: list[Branch],
    recorder: MetricsRecorder,
    *,
    presized: bool,
    split: ScanSplit | None = None,
    one_task: bool = False,
    changes: ChangeRows | None = None,
    rows_as: str | None = None,
) -> Written:
    """Evaluate the clauses on each branch of joined rows, write their union, and record the row counts.

    Args:
        split: the split of the table files the branches read in full, which sets the write's tasks
            (``scan_splits``).
        one_task: write the union in one task (each branch's rows are in one task already).
        changes: write the change data feed's rows too.
        rows_as: record the count of the branches' rows as this metric too.
    """
    outputs, observations = [], []
    for joined, kinds in branches:
        with_action = joined.withColumn(ACTION, action_column(plan, kinds))
        output, counts = rows_written(plan, with_action, kinds, changes=changes, rows_as=rows_as)
        outputs.append(output)
        observations.append((with_action, kinds, counts))
    rows = reduce(DataFrame.union, outputs)
    if one_task:
        rows = rows.coalesce(1)
    with balanced_splits(spark, split):
        written = write_files(
            spark,
            rows,
            plan.snapshot,
            presized=presized,
            schema=plan.final_schema,
            # Known without asking Spark (an analysis of the whole plan, on Connect a round trip)
            columns=None if changes else output_names(plan),
        )
    totals: dict[str, int] = {}
    for with_action, kinds, counts in observations:
        values = observed(counts)
        if values is None:
            # Adaptive execution can drop an observed node from the plan it finally runs (seen when every
            # row is deleted from a partitioned table and the source is empty): count again, in one job.
            log.warning("Spark lost the merge's observed row counts; counting them again")
            recount = observed_counts(plan, kinds, rows_as=rows_as)
            values = with_action.agg(*recount).first().asDict()  # type: ignore[union-attr]
        for name, value in values.items():
            totals[name] = totals.get(name, 0) + (value or 0)
    for name, value in totals.items():
        recorder.set(name, value)
    recorder.set(m.NUM_TARGET_FILES_ADDED, len(written.files))
    recorder.set(m.NUM_TARGET_BYTES_ADDED, sum(f.size for f in written.files))
    recorder.set(
        m.NUM_TARGET_PARTITIONS_ADDED_TO, m.count_partitions(f.partition_values for f in written.files)
    )
    recorder.set(m.NUM_TARGET_CHANGE_FILES_ADDED, len(written.change_files))
    recorder.set(m.NUM_TARGET_CHANGE_FILE_BYTES, sum(f.size for f in written.change_files))
    return written
