"""Phase 1 of a merge that rewrites files: which candidate files hold matches, and which of them it rewrites.

One Spark job joins the source with the candidate files' rows (Spark reads only the columns the ON
condition and the clause conditions name) and returns one row per file, never data rows: whether the file
holds a match, whether some row of it is acted on, and the multiple-match counts (from a count of matches
per target row, unless pruning found that no two source rows share their keys: then none is needed). The
rewrite (phase 2) reads only the acting files whole; the insert branch looks for matches only in the matched
files, or takes them from phase 1 (the unmatched source rows' key values, or the matches' key values kept
in Spark's cache).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Literal

from pyspark.sql import Column, DataFrame, Observation, Row
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.files.reader import FILE_COLUMN, ROW_INDEX_COLUMN, files_by_uri
from airflow_provider_deltamerge.delta.log.snapshot import DataFile
from airflow_provider_deltamerge.engine.execute.clause_output import SOURCE_PRESENT, TARGET_PRESENT
from airflow_provider_deltamerge.engine.execute.file_ids import FILE_ID, FileIds, file_ids
from airflow_provider_deltamerge.engine.execute.joins import join_condition, source_rows, target_rows
from airflow_provider_deltamerge.engine.execute.scan_splits import balanced_splits, scan_split
from airflow_provider_deltamerge.engine.observed import observe, observed_count
from airflow_provider_deltamerge.engine.plan.planning import (
    MergePlan,
    has_not_matched_by_source,
    is_matched_only,
    is_only_unconditional_delete,
)
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.metrics import MetricsRecorder
from airflow_provider_deltamerge.spec.delta_messages import delta_message
from airflow_provider_deltamerge.spec.names import hidden_name, quote_part

# How many offending target rows a multiple-match error shows.
SHOWN_MULTIPLE_MATCHES = 5
# The most distinct key tuples of unmatched source rows phase 1 hands to the insert branch (beyond it, the
# insert branch finds them itself), and the groups of their hash they are collected in, so no one task holds
# them all; a group holds at most twice its share, so the driver never receives many more.
MAX_UNMATCHED_KEYS = 100_000
_UNMATCHED_KEY_GROUPS = 64
_MAX_GROUP_KEYS = 2 * MAX_UNMATCHED_KEYS // _UNMATCHED_KEY_GROUPS
_UNMATCHED_KEY = hidden_name("unmatched_key")
_KEY_GROUP = hidden_name("key_group")
_MATCH = hidden_name("match")


@dataclass(frozen=True)
class UnmatchedKeys:
    """The distinct values of ``columns`` (``joins.source_key_columns``) of the source rows no target row
    matches: those rows are exactly the source rows with these values (NULLs alike)."""

    columns: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]
    schema: StructType  # of the values: one field per column, named k0, k1, ...


@dataclass(frozen=True)
class MatchedKeys:
    """The values of ``columns`` (``joins.source_key_columns``) of the source rows that match some target
    row: the rows holding none of them are exactly the unmatched ones."""

    columns: tuple[str, ...]
    values: DataFrame  # one row per match, fields k0, k1, ..., read from ``held``
    held: DataFrame  # phase 1's join, as Spark's cache holds it


@dataclass(frozen=True)
class TouchedFiles:
    """What phase 1 found among the candidate files.

    Attributes:
        touched: the files to rewrite (each holds a row some clause acts on), in the log's order.
        matched: the files holding a target row that some source row matches; a superset of ``touched``
            except with NOT MATCHED BY SOURCE clauses, which touch files without matches.
        matched_rows: how many target rows are matched.
        surplus_matches: matches beyond the first of each target row in the touched files (only an
            unconditional DELETE tolerates them; it deletes such a row once).
        modified_rows: for a merge that writes deletion vectors, the indexes of the rows some clause acts
            on in each touched file, by log path.
        unmatched: the source rows that match no target row, when phase 1 was asked to find them.
        matched_keys: the key values of the source rows that match a target row, when phase 1 was asked
            to keep them: the insert branch then needs no second look at the target. ``release`` frees them.
    """

    touched: tuple[DataFile, ...]
    matched: tuple[DataFile, ...]
    matched_rows: int
    surplus_matches: int
    modified_rows: Mapping[str, Sequence[int]] = field(default_factory=dict)
    # The source rows no target row matches, by their key values, when phase 1 collected them.
    unmatched: UnmatchedKeys | None = None
    matched_keys: MatchedKeys | None = None

    def release(self) -> None:
        """Drop phase 1's join from Spark's cache, if it was kept."""
        if self.matched_keys is not None:
            self.matched_keys.held.unpersist()


NOTHING_TOUCHED = TouchedFiles(touched=(), matched=(), matched_rows=0, surplus_matches=0)


def some_clause_acts(plan: MergePlan, group: str) -> Column:
    """Whether any clause of ``group`` acts on a row (an unconditional clause always does)."""
    return F.coalesce(_any_condition_holds(plan, group), F.lit(False))


def _any_condition_holds(plan: MergePlan, group: str) -> Column:
    """The conditions of the clauses of ``group`` ORed together (TRUE for a clause without one), NULL where
    none holds and one is NULL; FALSE for a group without clauses."""
    holds = [F.expr(c.condition) if c.condition else F.lit(True) for c in plan.of_group(group)]
    return reduce(Column.__or__, holds) if holds else F.lit(False)


def counts_toward_multiple_matches(plan: MergePlan) -> Column:
    """Over a match: whether it counts toward its target row's matches in the multiple-match check.

    Delta counts every match, except in a merge of MATCHED clauses only, where a match whose clauses'
    conditions ORed together are NULL is not counted: its phase 1 hands that OR to a function of a primitive
    boolean, which Spark does not call on NULL, and sums what it returns (``ClassicMergeExecutor``'s
    ``findTouchedFiles``). Two source rows matching a row whose condition is NULL are then no error.
    """
    if not is_matched_only(plan.clauses):
        return F.lit(True)
    return _any_condition_holds(plan, "matched").isNotNull()


def acting_column(plan: MergePlan, touches: Column) -> Column:
    """Over a row of a join of the source with the candidate files' rows: whether it makes its file touched,
    a match by ``touches``, an unmatched target row by the NOT MATCHED BY SOURCE clauses (an unmatched
    source row never does)."""
    return (
        F.when(F.col(TARGET_PRESENT).isNull(), F.lit(False))
        .when(F.col(SOURCE_PRESENT).isNotNull(), F.coalesce(touches, F.lit(False)))
        .otherwise(some_clause_acts(plan, "not_matched_by_source"))
    )


JoinKind = Literal["inner", "right_outer", "full_outer"]


def join_kind(plan: MergePlan, *, unmatched_by: Sequence[str] | None) -> JoinKind:
    """Which rows phase 1's join keeps besides the matches, as the executor's clauses need them.

    * ``inner``: the matches alone (the matched-only executor; the classic one without NOT MATCHED BY
      SOURCE clauses);
    * ``right_outer``: unmatched target rows too, which a NOT MATCHED BY SOURCE clause may act on;
    * ``full_outer``: unmatched source rows too, whose key values phase 1 collects (``unmatched_by``).
    """
    if unmatched_by:
        return "full_outer"
    return "right_outer" if has_not_matched_by_source(plan.clauses) else "inner"


def find_touched_files(
    plan: MergePlan,
    source: DataFrame,
    recorder: MetricsRecorder,
    *,
    touches: Column,
    unmatched_by: Sequence[str] | None = None,
    matched_keys_by: Sequence[str] | None = None,
) -> TouchedFiles:
    """The candidate files holding matches and the acting ones among them, after the multiple-match check.

    The multiple-match check looks at every match, touching or not. With NOT MATCHED BY SOURCE clauses the
    join keeps unmatched target rows too, and a file is touched only where a clause acts on one of its
    rows: unlike Delta, which rewrites every candidate file then (a deliberate difference, see README).
    One Spark job, in three steps: the join (``_joined_pairs``), the counts per file (``_per_file``), and
    their collection with the check (``_collected_files``).

    Args:
        touches: over a matched (source, target) pair: whether it makes its file touched.
        unmatched_by: also find the source rows no target row matches, by these source columns
            (``joins.source_key_columns``): the join keeps unmatched source rows too (a full outer join, so
            for a source too big to broadcast only), and their distinct values of the columns come back
            with the files, up to ``MAX_UNMATCHED_KEYS``.
        matched_keys_by: keep the values of these source columns (``joins.source_key_columns``) of every
            match in Spark's cache, as ``TouchedFiles.matched_keys``; only where the join is an inner one
            (no NOT MATCHED BY SOURCE clause, no ``unmatched_by``), which holds the matches alone.

    Raises:
        MergeExecutionError: DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE, showing a few
            offending rows.
    """
    if not plan.candidate_files:
        # No target row can match; count the source directly, as Delta does when the join is optimized away.
        recorder.set(m.NUM_SOURCE_ROWS, source.count())
        return NOTHING_TOUCHED
    how = join_kind(plan, unmatched_by=unmatched_by)
    join = _joined_pairs(
        plan,
        source,
        touches=touches,
        how=how,
        unmatched_by=unmatched_by,
        # Kept only where the join holds the matches alone.
        matched_keys_by=matched_keys_by if matched_keys_by and how == "inner" else None,
    )
    per_row, per_file = _per_file(plan, join, unmatched_by=unmatched_by)
    try:
        collected, files = _collected_files(plan, source, recorder, join, per_file)
    except BaseException:
        join.release()
        raise
    touched_uris = {uri for uri, row in files.items() if row["acting"]}
    by_uri = join.by_uri
    return TouchedFiles(
        touched=_log_files(by_uri, touched_uris),
        matched=_log_files(by_uri, {uri for uri, row in files.items() if row["matched_rows"]}),
        matched_rows=sum(row["matched_rows"] for row in files.values()),
        surplus_matches=sum(files[uri]["surplus"] for uri in touched_uris),
        modified_rows={
            by_uri[uri].log_path: row["modified"]
            for uri, row in files.items()
            if plan.writes_deletion_vectors and row["acting"]
        },
        unmatched=(
            _unmatched_keys(unmatched_by, [row for row in collected if row[join.file_key] is None], per_row)
            if unmatched_by
            else None
        ),
        matched_keys=(
            _matched_keys(join.matched_keys_by, join.pairs) if join.matched_keys_by is not None else None
        ),
    )


@dataclass(frozen=True)
class _JoinedPairs:
    """Phase 1's join of the source with the candidate files' rows, projected to what its counts need."""

    joined: DataFrame  # the join itself, for the multiple-match error's examples
    pairs: DataFrame  # file, row index, match, acting (and the keys asked for): what Spark's cache holds
    by_uri: Mapping[str, DataFile]  # the candidate files by Spark's URI
    ids: FileIds | None  # the files' long ids, where rows are counted per row
    source_count: Observation  # the source rows, counted as they flow into the join
    matched_keys_by: tuple[str, ...] | None  # the source columns whose values of each match are kept

    @property
    def file_key(self) -> str:
        return FILE_COLUMN if self.ids is None else FILE_ID

    @property
    def per_row_counts(self) -> bool:
        return self.ids is not None

    def release(self) -> None:
        if self.matched_keys_by is not None:
            self.pairs.unpersist()


def _joined_pairs(
    plan: MergePlan,
    source: DataFrame,
    *,
    touches: Column,
    how: JoinKind,
    unmatched_by: Sequence[str] | None,
    matched_keys_by: Sequence[str] | None,
) -> _JoinedPairs:
    """The source joined with the candidate files' rows (``how``), one row per pair: its file and row
    index, whether a source row matches, whether some clause acts on it, and the keys asked for."""
    spark = source.sparkSession
    target = target_rows(spark, plan, plan.candidate_files)  # carries each row's file and index in it
    # Matches are counted per target row unless pruning found that no two source rows share their keys.
    per_row_counts = not plan.source_keys_unique or bool(unmatched_by)
    by_uri = files_by_uri(plan.snapshot, plan.candidate_files)
    # Rows shuffled by their row carry their file's id, not its URI.
    ids = file_ids(spark, by_uri) if per_row_counts else None
    if ids is not None:
        target = target.withColumn(FILE_ID, ids.column()).alias(plan.spec.target_alias)
    file_key = FILE_COLUMN if ids is None else FILE_ID
    counted_source, source_count = observe(source_rows(plan, source), F.count(F.lit(1)).alias("rows"))
    condition = join_condition(plan, plan.source_schema)
    joined = counted_source.join(target, condition, how)
    on_target = F.col(TARGET_PRESENT).isNotNull()
    acting = acting_column(plan, touches)
    # An unmatched source row has no file: its key values group it instead (one group per distinct values).
    unmatched_key = (
        [F.when(~on_target, F.struct(*[F.expr(c).alias(f"k{n}") for n, c in enumerate(unmatched_by)]))]
        if unmatched_by
        else []
    )
    # Only what the aggregations (and the kept keys) need: the projection is what Spark's cache holds.
    pairs = joined.select(
        file_key,
        ROW_INDEX_COLUMN,
        # NULL unless a source row matches (and counts, counts_toward_multiple_matches)
        F.when(on_target & counts_toward_multiple_matches(plan), F.col(SOURCE_PRESENT)).alias(_MATCH),
        acting.alias("acting"),
        *[k.alias(_UNMATCHED_KEY) for k in unmatched_key],
        *[F.expr(c).alias(f"k{n}") for n, c in enumerate(matched_keys_by or ())],
    )
    if matched_keys_by:
        pairs = pairs.persist()
    return _JoinedPairs(
        joined,
        pairs,
        by_uri,
        ids,
        source_count,
        tuple(matched_keys_by) if matched_keys_by else None,
    )


def _per_file(
    plan: MergePlan, join: _JoinedPairs, *, unmatched_by: Sequence[str] | None
) -> tuple[DataFrame, DataFrame]:
    """The pairs counted per target row, then per file (and, for unmatched source rows, per group of their
    key values): matched rows, multiple matches, acting, and the rows deletion vectors will hide."""
    pairs, file_key = join.pairs, join.file_key
    if not join.per_row_counts:
        # No target row can match two source rows: each target row is one row of the join already, and the
        # per-file aggregation reads the join directly (no shuffle of every match by its row).
        per_row = pairs.select(
            file_key,
            ROW_INDEX_COLUMN,
            F.when(F.col(_MATCH).isNotNull(), 1).otherwise(0).alias("matches"),
            "acting",
        )
    else:
        per_row = pairs.groupBy(file_key, ROW_INDEX_COLUMN, *([_UNMATCHED_KEY] if unmatched_by else [])).agg(
            F.count(_MATCH).alias("matches"), F.max("acting").alias("acting")
        )
    # With deletion vectors the acting rows themselves are wanted: they go into their file's new vector.
    modified = [F.collect_list(F.when(F.col("acting"), F.col(ROW_INDEX_COLUMN))).alias("modified")]
    # The unmatched source rows' key values, in groups of their hash (a file's rows all hash their NULL key
    # alike: one group per file, as before).
    unmatched_values = (
        [
            F.count(_UNMATCHED_KEY).alias("unmatched"),
            F.slice(F.collect_list(_UNMATCHED_KEY), 1, _MAX_GROUP_KEYS).alias("unmatched_values"),
        ]
        if unmatched_by
        else []
    )
    key_group = F.pmod(F.hash(_UNMATCHED_KEY), F.lit(_UNMATCHED_KEY_GROUPS)) if unmatched_by else None
    per_file = per_row.groupBy(
        file_key, *([key_group.alias(_KEY_GROUP)] if key_group is not None else [])
    ).agg(
        F.sum(F.when(F.col("matches") > 1, 1).otherwise(0)).alias("multiply_matched"),
        F.sum(F.greatest(F.col("matches") - 1, F.lit(0))).alias("surplus"),
        F.sum(F.when(F.col("matches") > 0, 1).otherwise(0)).alias("matched_rows"),
        F.max("acting").alias("acting"),
        *(modified if plan.writes_deletion_vectors else []),
        *unmatched_values,
    )
    return per_row, per_file


def _collected_files(
    plan: MergePlan, source: DataFrame, recorder: MetricsRecorder, join: _JoinedPairs, per_file: DataFrame
) -> tuple[list[Row], dict[str, Row]]:
    """Phase 1's one Spark job: the rows of ``per_file``, and each matched file's row by Spark's URI of the
    file; the source rows counted on the way; then the multiple-match check."""
    spark = source.sparkSession
    with balanced_splits(spark, scan_split(spark, plan.candidate_files)):
        collected = per_file.collect()
    file_key, ids = join.file_key, join.ids
    # Each matched file's row, by Spark's URI of the file; an unmatched source row has no file.
    files = {
        row[file_key] if ids is None else ids.uri(row[file_key]): row
        for row in collected
        if row[file_key] is not None
    }
    recorder.set(m.NUM_SOURCE_ROWS, observed_count(join.source_count, "rows", fallback=source))
    multiply_matched = sum(row["multiply_matched"] for row in files.values())
    if multiply_matched and not is_only_unconditional_delete(plan.clauses):
        on_target = F.col(TARGET_PRESENT).isNotNull()
        raise _multiple_match_error(plan, join.joined.filter(on_target), multiply_matched)
    return collected, files


def _matched_keys(columns: Sequence[str], pairs: DataFrame) -> MatchedKeys:
    matches = pairs.filter(F.col(_MATCH).isNotNull())
    return MatchedKeys(tuple(columns), matches.select(*[f"k{n}" for n in range(len(columns))]), pairs)


def _unmatched_keys(
    columns: Sequence[str], groups: Sequence[Row], per_row: DataFrame
) -> UnmatchedKeys | None:
    """The key values phase 1 collected of the unmatched source rows, or None when there were more than
    ``MAX_UNMATCHED_KEYS`` or a group was cut short (then the insert branch finds the rows by joining the
    source with the target)."""
    counts = [row["unmatched"] for row in groups]
    if sum(counts) > MAX_UNMATCHED_KEYS or any(n > _MAX_GROUP_KEYS for n in counts):
        return None
    schema = per_row.schema[_UNMATCHED_KEY].dataType
    assert isinstance(schema, StructType)
    values = tuple(tuple(value) for row in groups for value in row["unmatched_values"])
    return UnmatchedKeys(tuple(columns), values, schema)


def _log_files(by_uri: Mapping[str, DataFile], uris: set[str]) -> tuple[DataFile, ...]:
    """The candidate files (``by_uri``, in the log's order) Spark named ``uris``.

    Raises:
        MergeExecutionError: Spark named a file the engine did not hand it (never expected: rather fail
            than rewrite a file without its rows).
    """
    unknown = sorted(uris - by_uri.keys())
    if unknown:
        raise MergeExecutionError(
            f"Spark read files the engine cannot find in the table's log: {unknown[:3]}",
            error_class="DELTAMERGE_FILE_NOT_IN_LOG",
        )
    return tuple(f for uri, f in by_uri.items() if uri in uris)


def _multiple_match_error(plan: MergePlan, joined: DataFrame, multiply_matched: int) -> MergeExecutionError:
    columns = [f.name for f in plan.target_schema.fields]
    alias = plan.spec.target_alias
    examples = (
        joined.groupBy(FILE_COLUMN, ROW_INDEX_COLUMN)
        .agg(
            F.count(SOURCE_PRESENT).alias("matches"),
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
