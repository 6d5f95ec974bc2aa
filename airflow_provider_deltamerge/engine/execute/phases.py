"""The two phases of a merge that may rewrite files, shared by the classic and matched-only executors.

* phase 1, ``touched_files.find_touched_files``: join the source with the candidate files' rows on the
  merge condition, check that no target row is matched by several source rows, and find the files holding
  matches and the files some clause acts on;
* phase 2, ``rewrite.rewrite_touched_files``: rewrite the acting files with the clauses applied and write
  the source rows no target row matches through the NOT MATCHED clauses, in one write.

A small merge (``one_query.fits_one_query``) runs both in one query, ``one_query.merge_in_one_query``, and
falls back to the two where that query cannot settle it. The executors differ only in which matches make a
file touched. The insert-only executor needs neither phase: it writes ``rewrite.write_inserts`` of an anti
join.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.commit.added_files import ChangeFile, WrittenFile
from airflow_provider_deltamerge.delta.commit.deletion_vector_writes import VectorChange, vector_changes
from airflow_provider_deltamerge.delta.log.snapshot import DataFile
from airflow_provider_deltamerge.engine.execute.joins import (
    broadcast_budget,
    fits_in_memory,
    source_key_columns,
)
from airflow_provider_deltamerge.engine.execute.one_query import fits_one_query, merge_in_one_query
from airflow_provider_deltamerge.engine.execute.rewrite import rewrite_touched_files
from airflow_provider_deltamerge.engine.execute.touched_files import find_touched_files, some_clause_acts
from airflow_provider_deltamerge.engine.plan.planning import MergePlan, has_inserts, has_not_matched_by_source
from airflow_provider_deltamerge.engine.progress import enter_phase
from airflow_provider_deltamerge.metrics import MetricsRecorder


@dataclass(frozen=True)
class FileChanges:
    """What an executor did to the table's files, not yet committed.

    With deletion vectors, ``removed`` holds every touched file (each leaves as the logical file it was) and
    ``vectors`` the ones that come back under a new vector.
    """

    removed: tuple[DataFile, ...]
    added: tuple[WrittenFile, ...]
    vectors: tuple[VectorChange, ...] = ()
    change_files: tuple[ChangeFile, ...] = ()  # the change data feed's files
    # Whether Delta would take its deletion-vector path: the table writes vectors and Delta's phase 1 finds a
    # file to rewrite (for a merge with inserts, every file holding a matched target row, and with a NOT
    # MATCHED BY SOURCE clause every file), whether or not a clause then acts on it. The identity marks a
    # commit records depend on it (merge._committed_schema).
    delta_vector_path: bool = False

    @property
    def written(self) -> tuple[WrittenFile | ChangeFile, ...]:
        """Every file the merge wrote: what a merge that does not commit deletes."""
        return (*self.added, *self.change_files)

    @property
    def kept_rows(self) -> int:
        """Rows of removed files that stay in the table under a new deletion vector."""
        return sum(v.kept_rows for v in self.vectors)


def run_two_phases(
    spark: SparkSession, plan: MergePlan, source: DataFrame, recorder: MetricsRecorder, *, touches: Column
) -> FileChanges:
    """Find the touched files, then rewrite them and write the inserts.

    Args:
        touches: over a matched (source, target) pair: whether it makes its file touched.
    """
    if plan.writes_deletion_vectors:
        # Only rows some clause acts on are modified; the rest stay where they are (Delta's
        # generateFilterForModifiedRows), so only files holding such rows are touched.
        touches = some_clause_acts(plan, "matched")
    if fits_one_query(plan):
        with recorder.timed(m.REWRITE_TIME_MS):
            enter_phase(
                "one query: the touched files rewritten, the inserts written", files=len(plan.candidate_files)
            )
            one_query = merge_in_one_query(spark, plan, source, recorder, touches=touches)
        if one_query is not None:
            touched, written = one_query
            _record_removed(recorder, touched)
            return FileChanges(touched, written.files, change_files=written.change_files)
    unmatched_by, matched_keys_by = _insert_keys(spark, plan)
    with recorder.timed(m.SCAN_TIME_MS):
        enter_phase("scan: finding the touched files among the candidates", files=len(plan.candidate_files))
        found = find_touched_files(
            plan,
            source,
            recorder,
            touches=touches,
            unmatched_by=unmatched_by,
            matched_keys_by=matched_keys_by,
        )
    try:
        with recorder.timed(m.REWRITE_TIME_MS):
            enter_phase("rewrite of the touched files and the inserts", files=len(found.touched))
            # Nothing touched: the source comes straight from its scan (or materialization) into the writer.
            written = rewrite_touched_files(spark, plan, source, found, recorder, presized=not found.touched)
            # Several source rows deleting one target row count it once (Delta's correction).
            recorder.add(m.NUM_TARGET_ROWS_DELETED, -found.surplus_matches)
            recorder.add(m.NUM_TARGET_ROWS_MATCHED_DELETED, -found.surplus_matches)
    finally:
        found.release()
    if plan.writes_deletion_vectors:
        vectors = vector_changes(plan.snapshot, found.touched, found.modified_rows)
        for name, value in _vector_metrics(vectors).items():
            recorder.set(name, value)
        delta_touched = bool(found.matched) or (
            has_not_matched_by_source(plan.clauses) and bool(plan.snapshot.files)
        )
        return FileChanges(
            found.touched, written.files, vectors, written.change_files, delta_vector_path=delta_touched
        )
    _record_removed(recorder, found.touched)
    return FileChanges(found.touched, written.files, change_files=written.change_files)


def _record_removed(recorder: MetricsRecorder, touched: Sequence[DataFile]) -> None:
    """The file metrics of the ``touched`` files a merge without deletion vectors removes whole."""
    recorder.set(m.NUM_TARGET_FILES_REMOVED, len(touched))
    recorder.set(m.NUM_TARGET_BYTES_REMOVED, sum(f.size for f in touched))
    recorder.set(
        m.NUM_TARGET_PARTITIONS_REMOVED_FROM, m.count_partitions(f.partition_values for f in touched)
    )
    # A rewritten file's deletion vector goes with it (its rows were left out when the file was read).
    recorder.set(m.NUM_TARGET_DELETION_VECTORS_REMOVED, sum(f.deletion_vector is not None for f in touched))


def _insert_keys(
    spark: SparkSession, plan: MergePlan
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The source columns by which phase 1 helps the insert branch find the unmatched source rows, as
    ``find_touched_files``' ``unmatched_by`` and ``matched_keys_by`` (at most one of them), or None for both
    when it cannot help.

    Without help, the insert branch joins the source with the matched files' rows again. When the ON
    condition's source key columns alone decide a match (``source_key_columns``):

    * a source known to be too big to broadcast (a full sync, say): phase 1's join, shuffled anyway, keeps
      the unmatched source rows too (a full outer join), and the insert branch picks them out of the source
      by their few key values. A full outer join cannot stream the target past a broadcast, so a source
      that fits is not joined so;
    * a source that fits, with no NOT MATCHED BY SOURCE clause (an inner join: only the matches are kept):
      phase 1 keeps the matches' key values in Spark's cache, and the insert branch drops the source rows
      holding them, with no second read of the matched files.
    """
    if not has_inserts(plan.clauses) or plan.source_rows is None or not plan.candidate_files:
        return None, None
    columns = source_key_columns(plan)
    if not fits_in_memory(plan.source_schema, plan.source_rows, broadcast_budget(spark)):
        return columns, None
    return None, None if has_not_matched_by_source(plan.clauses) else columns


def _vector_metrics(changes: Sequence[VectorChange]) -> dict[str, int]:
    """Delta's file and vector metrics of a merge that wrote vectors: files count only when removed whole,
    and (Delta's MERGE_DELETION_VECTORS sums) an updated vector counts as added and as removed too."""
    removed = [c.file for c in changes if c.removes_file]
    kept = [c.file for c in changes if not c.removes_file]
    updated = sum(f.deletion_vector is not None for f in kept)
    return {
        m.NUM_TARGET_FILES_REMOVED: len(removed),
        m.NUM_TARGET_BYTES_REMOVED: sum(f.size for f in removed),
        m.NUM_TARGET_PARTITIONS_REMOVED_FROM: m.count_partitions(f.partition_values for f in removed),
        m.NUM_TARGET_DELETION_VECTORS_ADDED: len(kept),
        m.NUM_TARGET_DELETION_VECTORS_REMOVED: sum(f.deletion_vector is not None for f in removed) + updated,
        m.NUM_TARGET_DELETION_VECTORS_UPDATED: updated,
        m.NUM_TARGET_ROWS_COPIED: 0,  # the unchanged rows stay where they are
    }
