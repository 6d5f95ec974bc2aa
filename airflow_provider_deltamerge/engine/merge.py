"""``run_merge``: one MERGE, from spec to commit, inside an existing SparkSession."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame, SparkSession

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.commit.conflicts import AlreadyCommitted, ReadSet, Rerun
from airflow_provider_deltamerge.delta.commit.deletion_vector_writes import (
    NO_VECTORS,
    WrittenVectors,
    discard_vectors,
    write_vectors,
)
from airflow_provider_deltamerge.delta.commit.log_store import check_conditional_puts
from airflow_provider_deltamerge.delta.commit.transaction import Committed, commit_merge
from airflow_provider_deltamerge.delta.files.writer import discard
from airflow_provider_deltamerge.delta.log.auto_compaction import AUTO_COMPACT_CONF, check_no_auto_compaction
from airflow_provider_deltamerge.delta.log.commit_match import MetricBounds
from airflow_provider_deltamerge.delta.log.idempotency import find_committed_run, same_run
from airflow_provider_deltamerge.delta.log.merge_commits import SUBMISSION_ID, MergeCommit
from airflow_provider_deltamerge.delta.log.protocol import check_writable
from airflow_provider_deltamerge.delta.log.snapshot import DataFile, Snapshot, read_snapshot
from airflow_provider_deltamerge.engine.execute.append import append_if_nothing_matches
from airflow_provider_deltamerge.engine.execute.classic import run_classic
from airflow_provider_deltamerge.engine.execute.clause_output import identities_generated
from airflow_provider_deltamerge.engine.execute.insert_only import run_insert_only
from airflow_provider_deltamerge.engine.execute.matched_only import run_matched_only
from airflow_provider_deltamerge.engine.execute.phases import FileChanges
from airflow_provider_deltamerge.engine.guards import check_bounds, dry_run_report
from airflow_provider_deltamerge.engine.identity import high_water_marks, with_high_water_marks
from airflow_provider_deltamerge.engine.plan.planning import ExecutorName, MergePlan, make_plan
from airflow_provider_deltamerge.engine.plan.pruning import FileFilter, prune_files
from airflow_provider_deltamerge.engine.progress import enter_phase
from airflow_provider_deltamerge.engine.resolve.casting import cast_failure
from airflow_provider_deltamerge.engine.resolve.target_table import table_location
from airflow_provider_deltamerge.engine.session_confs import (
    AUTO_MERGE,
    auto_merge,
    skip_empty_commits,
    warn_ignored_delta_confs,
)
from airflow_provider_deltamerge.engine.source.held import hold_small_source
from airflow_provider_deltamerge.engine.source.load import deduplicated, load_source
from airflow_provider_deltamerge.engine.source.materialize import (
    PreparedSource,
    materialization,
    prepare_merge_source,
)
from airflow_provider_deltamerge.engine.spark_errors import summarize
from airflow_provider_deltamerge.exceptions import (
    ClauseResolutionError,
    DeltaMergeError,
    MergeCommitError,
    MergeExecutionError,
    MergeGuardError,
)
from airflow_provider_deltamerge.metrics import MetricsRecorder
from airflow_provider_deltamerge.spec import MergeSpec, spec_hash
from airflow_provider_deltamerge.spec.delta_messages import delta_message
from airflow_provider_deltamerge.spec.transport import JobRerunPolicy, job_rerun_policy

log = logging.getLogger(__name__)

Executor = Callable[[SparkSession, MergePlan, DataFrame, MetricsRecorder], FileChanges]
EXECUTORS: Mapping[ExecutorName, Executor] = {
    "insert_only": run_insert_only,
    "matched_only": run_matched_only,
    "classic": run_classic,
}


# How many times a merge is run again from a fresh snapshot after a conflicting concurrent commit.
MAX_RERUNS = 3
# The pause before a re-run: uniform in [0, min(cap, base * 2**attempt)] seconds.
RERUN_BACKOFF_BASE_S = 0.5
RERUN_BACKOFF_CAP_S = 10.0


@dataclass(frozen=True)
class MergeResult:
    """What a merge did: Delta's metrics, the table version after it, the executor that ran it."""

    # None where the backend did not measure the metric (Delta's own MERGE: the ones its commit lacks).
    metrics: Mapping[str, m.MetricValue]
    version: int
    executor: str
    committed: bool  # False when the merge changed nothing, so no commit was made (as in Delta)
    # True when an earlier run of the same task and spec had already committed: nothing was done now, and
    # ``metrics`` and ``version`` are that commit's.
    already_committed: bool = False
    attempts: int = 1  # runs of the merge (more than 1 after conflicting concurrent commits)
    earlier_attempts_ms: int = 0  # from the start of the first run to the start of the last
    rebased_over: tuple[int, ...] = ()  # concurrent commits the final commit was placed after
    # A dry run's report of what the merge would have committed (``guards.dry_run_report``); None otherwise.
    dry_run: Mapping[str, Any] | None = None

    @property
    def runs(self) -> dict[str, int]:
        """The attempts as a commit records them (``metrics.attempts_report`` reads either)."""
        return {m.MERGE_ATTEMPTS: self.attempts, m.EARLIER_ATTEMPTS_TIME_MS: self.earlier_attempts_ms}


def run_merge(
    spark: SparkSession,
    spec: MergeSpec,
    *,
    executor: ExecutorName | None = None,
    provenance: Mapping[str, Any] | None = None,
    rerun: JobRerunPolicy = "skip",
    bounds: MetricBounds | None = None,
    dry_run: bool = False,
) -> MergeResult:
    """Resolve, plan, execute, commit.

    1. Find the table (a catalog name is looked up in the session's catalog) and read its snapshot; refuse
       tables and merges the engine cannot do correctly; with
       ``rerun="skip"``, return the recorded result if the log already holds this run's commit
       (same dag, task, run, map index and spec hash in ``provenance``).
    2. Resolve the clauses against the real target and source schemas.
    3. Plan: pick the executor (unless ``executor`` forces one) and prune the target files to read.
    4. Execute: write new files; metrics are observed during the write, not by extra scans.
    5. Check the metrics against ``bounds``: a breach deletes the written files and fails the merge. A
       ``dry_run`` stops here too, deletes its files and reports what it would commit.
    6. Commit once, atomically, with the metrics and ``provenance`` (run identity) in commitInfo. Concurrent
       commits that cannot change the answer are rebased over; otherwise the merge runs again from a fresh
       snapshot, at most ``MAX_RERUNS`` times.

    Raises:
        MergeSpecError: ``rerun`` is neither "skip" nor "merge" (``DELTAMERGE_INVALID_RERUN``).
        DeltaMergeError: a subclass naming the phase; the table is unchanged.
    """
    rerun = job_rerun_policy(rerun)
    info = {"engineVersion": __version__, "specHash": spec_hash(spec), **(provenance or {})}
    info.setdefault(SUBMISSION_ID, uuid.uuid4().hex)
    warn_ignored_delta_confs(spark)
    if auto_merge(spark) and not spec.schema_evolution:
        # As Delta's ResolveDeltaMergeInto: canEvolveSchema = WITH SCHEMA EVOLUTION or autoMerge.enabled.
        # The run keeps the spec's hash: it is the same merge, run under the session's conf.
        log.info("Schema evolution: on, from %s", AUTO_MERGE)
        spec = dataclasses.replace(spec, schema_evolution=True)
    table = table_location(spark, spec.target)
    if table != spec.target:
        log.info("Target: the catalog's table %s is the Delta table at %s", spec.target, table)
    check_conditional_puts(table)
    competing: list[str] = []
    started = time.monotonic()
    for attempt in range(1, MAX_RERUNS + 2):
        earlier_ms = round((time.monotonic() - started) * 1000)
        runs = {m.MERGE_ATTEMPTS: attempt, m.EARLIER_ATTEMPTS_TIME_MS: earlier_ms}
        outcome = _attempt(spark, spec, table, executor, info, _Checks(rerun, bounds, dry_run), runs=runs)
        if isinstance(outcome, MergeResult) and outcome.already_committed:
            return outcome
        if isinstance(outcome, MergeResult):
            return dataclasses.replace(outcome, attempts=attempt, earlier_attempts_ms=earlier_ms)
        competing.append(f"{outcome.version} ({outcome.reason})")
        if attempt > MAX_RERUNS:
            break
        pause = rerun_pause(attempt)
        log.warning(
            "Concurrent commit %d %s: running the merge again in %.1f s",
            outcome.version,
            outcome.reason,
            pause,
        )
        time.sleep(pause)
    raise MergeCommitError(
        f"The merge into {spec.target} conflicted with concurrent commits {MAX_RERUNS + 1} times: versions "
        f"{'; '.join(competing)}. Nothing was changed; run the task again when the other writers are done.",
        error_class="DELTA_CONCURRENT_MODIFICATION",
    )


def rerun_pause(attempt: int) -> float:
    """Seconds to wait after run ``attempt`` met a conflicting commit, drawn with full jitter: writers that
    collided once should not collide again by re-running in step."""
    return random.uniform(0, min(RERUN_BACKOFF_CAP_S, RERUN_BACKOFF_BASE_S * 2**attempt))


@dataclass(frozen=True)
class _Checks:
    """What a run checks besides the merge itself: an earlier commit of the run, bounds, a dry run."""

    rerun: JobRerunPolicy
    bounds: MetricBounds | None
    dry_run: bool


def _attempt(
    spark: SparkSession,
    spec: MergeSpec,
    table: str,
    executor: ExecutorName | None,
    info: Mapping[str, Any],
    checks: _Checks,
    *,
    runs: Mapping[str, int],
) -> MergeResult | Rerun:
    """One run of the merge on a fresh snapshot: its result, or the conflict that calls for another run.

    ``runs`` counts this run and times the earlier ones; the commit records it, so that a task finding the
    commit later reports the same attempts as the job did.
    """
    recorder = MetricsRecorder()
    with recorder.timed(m.EXECUTION_TIME_MS):
        enter_phase("reading the table's snapshot")
        snapshot = read_snapshot(table)
        log.info("Snapshot: %s at version %d, %d files", table, snapshot.version, len(snapshot.files))
        check_writable(snapshot, modifies_rows=any(c.kind != "not_matched_insert" for c in spec.clauses))
        check_no_auto_compaction(table, dict(snapshot.configuration), spark.conf.get(AUTO_COMPACT_CONF, None))
        earlier = find_committed_run(table, info) if checks.rerun == "skip" and not checks.dry_run else None
        if earlier is not None:
            return _already_committed(earlier)
        plan, changes, read = _execute(spark, spec, snapshot, executor, recorder)
    _log_work(recorder, changes)
    try:
        check_bounds(checks.bounds, recorder.freeze(), spec.target)
    except MergeGuardError:
        _discard(spark, snapshot, changes)
        raise
    if checks.dry_run:
        _discard(spark, snapshot, changes)
        report = dry_run_report(
            executor=plan.executor,
            removed=changes.removed,
            added=changes.added,
            marked=[v.file for v in changes.vectors if not v.removes_file],
            new_columns=[f.name for f in plan.final_schema.fields if f.name not in plan.target_schema.names],
        )
        log.info(
            "Dry run: nothing committed; table stays at version %d; would commit %s", snapshot.version, report
        )
        return MergeResult(
            recorder.freeze(), snapshot.version, plan.executor, committed=False, dry_run=report
        )
    # Delta commits a merge that only evolves the schema, and with skipRecordingEmptyCommits=false one that
    # changes nothing at all (its commitInfo keeps the metrics).
    if not changes.removed and not changes.added and not plan.evolves_schema and skip_empty_commits(spark):
        log.info("Nothing to change: no commit made; table stays at version %d", snapshot.version)
        return MergeResult(recorder.freeze(), snapshot.version, plan.executor, committed=False)
    vectors = NO_VECTORS
    try:
        enter_phase("committing")
        check_record_counts(plan, changes, recorder)
        schema = _committed_schema(spark, plan, changes)
        vectors = write_vectors(snapshot, changes.vectors)
        outcome = commit_merge(
            snapshot,
            removed=changes.removed,
            added=changes.added,
            change_files=changes.change_files,
            readded=vectors.readded,
            operation_parameters=operation_parameters(spec),
            operation_metrics=recorder.freeze(),
            info={**info, **runs, "executor": plan.executor},
            read=read,
            same_run=same_run(info),
            schema=schema,
            engine_info=f"Apache-Spark/{spark.version} airflow-provider-deltamerge/{__version__}",
        )
    except BaseException:
        _discard(spark, snapshot, changes, vectors)
        raise
    if not isinstance(outcome, Committed):
        _discard(spark, snapshot, changes, vectors)
        return _already_committed(outcome.commit) if isinstance(outcome, AlreadyCommitted) else outcome
    log.info(
        "Committed version %d: %d files removed, %d added%s",
        outcome.version,
        len(changes.removed),
        len(changes.added),
        f" (rebased over versions {list(outcome.rebased_over)})" if outcome.rebased_over else "",
    )
    return MergeResult(
        recorder.freeze(), outcome.version, plan.executor, committed=True, rebased_over=outcome.rebased_over
    )


def _discard(
    spark: SparkSession, snapshot: Snapshot, changes: FileChanges, vectors: WrittenVectors = NO_VECTORS
) -> None:
    """Delete what this run wrote that no commit will reference: its data and change files, then its
    deletion vector file (none before the vectors are written)."""
    discard(spark, snapshot, changes.written)
    discard_vectors(snapshot, vectors)


def _committed_schema(spark: SparkSession, plan: MergePlan, changes: FileChanges) -> str | None:
    """The schema the commit records when it changes: evolved columns, or identity columns' new
    high-water marks (Delta writes a metaData action for either); None when it stays as it was."""
    generated = identities_generated(plan)
    marks = high_water_marks(spark, plan.snapshot, changes.added, generated)
    if not marks and not plan.evolves_schema and not (generated and _tracks_unwritten_marks(plan, changes)):
        return None
    if marks:
        log.info("Identity: new high-water marks %s", marks)
    return with_high_water_marks(plan.final_schema, marks).json()


def _tracks_unwritten_marks(plan: MergePlan, changes: FileChanges) -> bool:
    """Whether Delta records identity marks for a merge that generates identity values but writes no row.

    Its write of no row still tracks marks, and its commit (made under skipRecordingEmptyCommits=false)
    carries the schema as it was, so that Delta records it as Serializable, not SnapshotIsolation. Except on
    its deletion-vector path with change data, whose write of no row tracks none: measured on Delta's
    runtime (tests/engine/test_identity_marks.py), every other path records them."""
    if changes.added or changes.removed:
        return False
    return not (changes.delta_vector_path and plan.writes_change_data)


def _already_committed(commit: MergeCommit) -> MergeResult:
    log.info("This run already committed version %d: nothing to do", commit.version)
    return MergeResult(
        commit.metrics,
        commit.version,
        str(commit.info.get("executor", "")),
        committed=True,
        already_committed=True,
        attempts=int(commit.info.get(m.MERGE_ATTEMPTS) or 1),
        earlier_attempts_ms=int(commit.info.get(m.EARLIER_ATTEMPTS_TIME_MS) or 0),
    )


def _execute(
    spark: SparkSession,
    spec: MergeSpec,
    snapshot: Snapshot,
    executor: ExecutorName | None,
    recorder: MetricsRecorder,
) -> tuple[MergePlan, FileChanges, ReadSet]:
    """Plan and run the executor, turning Spark's errors into the merge's own."""
    enter_phase("loading the source and planning")
    loaded = load_source(spark, spec.source)
    source = deduplicated(spec, loaded)
    try:
        plan = make_plan(spark, spec, snapshot, source.schema, forced=executor)
        decision = materialization(spark, plan, loaded, source, recorder)
        held = (
            hold_small_source(spark, spec, source, recorder, reason=decision.reason)
            if decision.materialize
            else None
        )
        if decision.materialize and held is None:
            # A source to materialize is first read for its keys' bounds alone: if no file can hold them, it
            # is written as read, once, and not materialized. A held one costs nothing to materialize, and
            # pruning reads its keys where it is held: with no file left, its rows are written all the same.
            appended = append_if_nothing_matches(spark, plan, source, recorder)
            if appended is not None:
                log.info("No file can hold the source's keys: its rows were appended, not materialized")
                read = _pruned(spark, plan, recorder, (), appended.file_filter)
                return plan, appended.changes, read
        enter_phase("materializing the source")
        prepared = held or prepare_merge_source(spark, source, recorder, decision=decision)
        try:
            return _prune_and_run(spark, plan, prepared, recorder)
        finally:
            prepared.release()
    except DeltaMergeError:
        raise
    except AnalysisException as err:
        failure = summarize(err)
        raise ClauseResolutionError(
            f"The merge does not resolve against the target and source schemas: {failure}",
            error_class=failure.error_class,
        ) from err
    except (PySparkException, Py4JJavaError) as err:
        failed_cast = cast_failure(err)
        if failed_cast is not None:
            raise failed_cast from err
        failure = summarize(err)
        raise MergeExecutionError(
            f"The merge failed while computing its files: {failure} Nothing was committed.",
            error_class=failure.error_class,
        ) from err


def _prune_and_run(
    spark: SparkSession, plan: MergePlan, source: PreparedSource, recorder: MetricsRecorder
) -> tuple[MergePlan, FileChanges, ReadSet]:
    """Prune the target files with the source, then run the plan's executor over the candidates."""
    snapshot = plan.snapshot
    enter_phase("pruning the target's files", files=len(snapshot.files))
    plan = dataclasses.replace(plan, source_rows=source.row_count)
    pruning = prune_files(spark, plan, source.rows, held=source.held)
    plan = dataclasses.replace(
        plan, candidate_files=pruning.files, source_keys_unique=pruning.source_keys_unique
    )
    read = _pruned(spark, plan, recorder, pruning.files, pruning.file_filter)
    return plan, EXECUTORS[plan.executor](spark, plan, source.rows, recorder), read


def _pruned(
    spark: SparkSession,
    plan: MergePlan,
    recorder: MetricsRecorder,
    candidates: Sequence[DataFile],
    file_filter: FileFilter,
) -> ReadSet:
    """Record and log which files pruning kept (``candidates``, chosen by ``file_filter``); what the merge
    read, for the conflict check."""
    snapshot = plan.snapshot
    recorder.set(m.NUM_TARGET_FILES_BEFORE_SKIPPING, len(snapshot.files))
    recorder.set(m.NUM_TARGET_BYTES_BEFORE_SKIPPING, snapshot.num_bytes)
    recorder.set(m.NUM_TARGET_FILES_AFTER_SKIPPING, len(candidates))
    recorder.set(m.NUM_TARGET_BYTES_AFTER_SKIPPING, sum(f.size for f in candidates))
    recorder.set(
        m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING, m.count_partitions(f.partition_values for f in candidates)
    )
    log.info(
        "Plan: %s executor; pruning kept %d of %d files (%d skipped)",
        plan.executor,
        len(candidates),
        len(snapshot.files),
        len(snapshot.files) - len(candidates),
    )
    return ReadSet(
        snapshot.version,
        frozenset(f.log_path for f in candidates),
        lambda later, files: file_filter.select(spark, later, files),
    )


def _log_work(recorder: MetricsRecorder, changes: FileChanges) -> None:
    """One line each for the scan and the rewrite, with their counts and times, for the task log."""
    log.info(
        "Scan: %d source rows, %d files touched, %d ms",
        recorder[m.NUM_SOURCE_ROWS],
        len(changes.removed),
        recorder[m.SCAN_TIME_MS],
    )
    log.info(
        "Rewrite: %d files written; rows %d inserted, %d updated, %d deleted, %d copied; %d ms",
        len(changes.added),
        recorder[m.NUM_TARGET_ROWS_INSERTED],
        recorder[m.NUM_TARGET_ROWS_UPDATED],
        recorder[m.NUM_TARGET_ROWS_DELETED],
        recorder[m.NUM_TARGET_ROWS_COPIED],
        recorder[m.REWRITE_TIME_MS],
    )


def check_record_counts(plan: MergePlan, changes: FileChanges, recorder: MetricsRecorder) -> None:
    """Delta's ``validateNumRecords``: by the files' record counts, a merge without INSERT clauses adds no
    rows on balance and one without DELETE clauses removes none. Where a removed file has no record count,
    Delta checks nothing, and neither does this.

    Delta's other invariants, over its metrics, only log by default (``commandInvariantChecksThrow`` is off):
    a merge whose metrics disagree with its files is committed, as Delta commits it, with a warning.

    Raises:
        MergeExecutionError: DELTA_NUM_RECORDS_MISMATCH, before anything is committed.
    """
    removed_counts = [f.logical_records for f in changes.removed]
    if None in removed_counts:
        return
    # As Delta counts them: a file that comes back under a new deletion vector is added with its kept rows.
    added = sum(f.num_records for f in changes.added) + changes.kept_rows
    removed = sum(n for n in removed_counts if n is not None)
    # The metrics count neither side of a kept row.
    _warn_if_metrics_disagree(added - changes.kept_rows, removed - changes.kept_rows, recorder)
    kinds = {c.kind for c in plan.clauses}
    if added > removed and "not_matched_insert" not in kinds:
        operation = "MERGE without INSERT clauses"
        what_to_do = (
            " The likely cause: a target row that more than one source row matches, where no clause acts"
            " on one of the pairs, is written once per pair (as Delta writes it). Make ON match at most one"
            " source row per target row, or de-duplicate the source."
        )
    elif added < removed and not kinds & {"matched_delete", "not_matched_by_source_delete"}:
        operation = "MERGE without DELETE clauses"
        what_to_do = " Please report it with the merge spec."
    else:
        return
    raise MergeExecutionError(
        delta_message(
            "DELTA_NUM_RECORDS_MISMATCH",
            operation=operation,
            numAddedRecords=added,
            numRemovedRecords=removed,
        )
        + " Nothing was committed."
        + what_to_do,
        error_class="DELTA_NUM_RECORDS_MISMATCH",
    )


def _warn_if_metrics_disagree(added: int, removed: int, recorder: MetricsRecorder) -> None:
    updated, copied = recorder[m.NUM_TARGET_ROWS_UPDATED], recorder[m.NUM_TARGET_ROWS_COPIED]
    by_metrics = (
        recorder[m.NUM_TARGET_ROWS_INSERTED] + updated + copied,
        updated + recorder[m.NUM_TARGET_ROWS_DELETED] + copied,
    )
    if (added, removed) != by_metrics:
        log.warning(
            "The files add %d rows and remove %d; the merge metrics say %d and %d (as where a target row "
            "matched by several source rows is written once per pair); Delta commits such a merge too",
            added,
            removed,
            *by_metrics,
        )


def operation_parameters(spec: MergeSpec) -> dict[str, str]:
    """commitInfo.operationParameters in Delta's MERGE form (each value a JSON string, as Delta writes)."""

    def predicates(group: str) -> str:
        return json.dumps(
            [
                {"predicate": c.condition, "actionType": c.kind.rsplit("_", 1)[1]}
                if c.condition
                else {"actionType": c.kind.rsplit("_", 1)[1]}
                for _, c in spec.clauses_of(group)
            ]
        )

    return {
        "predicate": json.dumps([spec.condition]),
        "matchedPredicates": predicates("matched"),
        "notMatchedPredicates": predicates("not_matched"),
        "notMatchedBySourcePredicates": predicates("not_matched_by_source"),
    }
