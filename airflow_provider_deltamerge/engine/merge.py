"""``run_merge``: one MERGE, from spec to commit, inside an existing SparkSession."""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge.delta.commit import commit_merge
from airflow_provider_deltamerge.delta.history import SUBMISSION_ID
from airflow_provider_deltamerge.delta.protocol import check_writable
from airflow_provider_deltamerge.delta.snapshot import read_snapshot
from airflow_provider_deltamerge.delta.writer import discard
from airflow_provider_deltamerge.engine import metrics as m
from airflow_provider_deltamerge.engine.executors.classic import FileChanges, run_classic
from airflow_provider_deltamerge.engine.metrics import MetricsRecorder
from airflow_provider_deltamerge.engine.planning import ExecutorName, MergePlan, make_plan
from airflow_provider_deltamerge.engine.pruning import prune_files
from airflow_provider_deltamerge.engine.source import load_source
from airflow_provider_deltamerge.exceptions import (
    ClauseResolutionError,
    DeltaMergeError,
    MergeExecutionError,
)
from airflow_provider_deltamerge.spec import MergeSpec
from airflow_provider_deltamerge.spec.delta_messages import delta_message

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MergeResult:
    """What a merge did: Delta's metrics, the table version after it, the executor that ran it."""

    metrics: Mapping[str, int]
    version: int
    executor: str
    committed: bool  # False when the merge changed nothing, so no commit was made (as in Delta)


def run_merge(
    spark: SparkSession,
    spec: MergeSpec,
    *,
    executor: ExecutorName | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> MergeResult:
    """Resolve, plan, execute, commit.

    1. Resolve the clauses against the real target and source schemas.
    2. Plan: pick the executor (unless ``executor`` forces one) and the target files to read.
    3. Execute: write new files; metrics are observed during the write, not by extra scans.
    4. Commit once, atomically, with the metrics and ``provenance`` (run identity) in commitInfo.

    Raises:
        DeltaMergeError: a subclass naming the phase; the table is unchanged.
    """
    recorder = MetricsRecorder()
    info = {"engineVersion": __version__, "specHash": spec.spec_hash, **(provenance or {})}
    info.setdefault(SUBMISSION_ID, uuid.uuid4().hex)
    with recorder.timed(m.EXECUTION_TIME_MS):
        snapshot = read_snapshot(spec.target)
        log.info("Snapshot: %s at version %d, %d files", spec.target, snapshot.version, len(snapshot.files))
        check_writable(snapshot, modifies_rows=any(c.kind != "not_matched_insert" for c in spec.clauses))
        plan, changes = _execute(spark, spec, snapshot, executor, recorder)
    if not changes.removed and not changes.added:
        log.info("Nothing to change: no commit made; table stays at version %d", snapshot.version)
        return MergeResult(recorder.freeze(), snapshot.version, plan.executor, committed=False)
    try:
        check_record_counts(changes, recorder)
        version = commit_merge(
            snapshot,
            removed=changes.removed,
            added=changes.added,
            operation_parameters=operation_parameters(spec),
            operation_metrics=recorder.freeze(),
            info={**info, "executor": plan.executor},
        )
    except BaseException:
        discard(spark, snapshot, changes.added)
        raise
    log.info(
        "Committed version %d: %d files removed, %d added", version, len(changes.removed), len(changes.added)
    )
    return MergeResult(recorder.freeze(), version, plan.executor, committed=True)


def _execute(
    spark: SparkSession,
    spec: MergeSpec,
    snapshot: Any,
    executor: ExecutorName | None,
    recorder: MetricsRecorder,
) -> tuple[MergePlan, FileChanges]:
    """Plan and run the executor, turning Spark's errors into the merge's own."""
    source = load_source(spark, spec.source)
    try:
        plan = make_plan(spec, snapshot, source.schema, forced=executor)
        pruning = prune_files(spark, plan, source)
        plan = dataclasses.replace(plan, candidate_files=pruning.files)
        recorder.set(m.NUM_TARGET_FILES_BEFORE_SKIPPING, len(snapshot.files))
        recorder.set(m.NUM_TARGET_BYTES_BEFORE_SKIPPING, snapshot.num_bytes)
        recorder.set(m.NUM_TARGET_FILES_AFTER_SKIPPING, len(plan.candidate_files))
        recorder.set(m.NUM_TARGET_BYTES_AFTER_SKIPPING, sum(f.size for f in plan.candidate_files))
        recorder.set(m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING, pruning.partitions())
        log.info(
            "Plan: %s executor, %d of %d files to scan",
            plan.executor,
            len(plan.candidate_files),
            len(snapshot.files),
        )
        return plan, run_classic(spark, plan, source, recorder)
    except DeltaMergeError:
        raise
    except AnalysisException as err:
        raise ClauseResolutionError(
            f"The merge does not resolve against the target and source schemas: {err.getMessage()}",
            error_class=err.getCondition(),
        ) from err
    except (PySparkException, Py4JJavaError) as err:
        condition = err.getCondition() if isinstance(err, PySparkException) else None
        raise MergeExecutionError(
            f"The merge failed while computing its files: {err}", error_class=condition
        ) from err


def check_record_counts(changes: FileChanges, recorder: MetricsRecorder) -> None:
    """Delta's invariants: removed = updated + deleted + copied rows; added = inserted + updated + copied.

    Raises:
        MergeExecutionError: DELTA_NUM_RECORDS_MISMATCH, before anything is committed.
    """
    added = sum(f.num_records for f in changes.added)
    expected_added = (
        recorder[m.NUM_TARGET_ROWS_INSERTED]
        + recorder[m.NUM_TARGET_ROWS_UPDATED]
        + recorder[m.NUM_TARGET_ROWS_COPIED]
    )
    removed_counts = [f.num_records for f in changes.removed]
    expected_removed = (
        recorder[m.NUM_TARGET_ROWS_UPDATED]
        + recorder[m.NUM_TARGET_ROWS_DELETED]
        + recorder[m.NUM_TARGET_ROWS_COPIED]
    )
    removed = sum(n for n in removed_counts if n is not None)
    if added != expected_added or (None not in removed_counts and removed != expected_removed):
        raise MergeExecutionError(
            delta_message(
                "DELTA_NUM_RECORDS_MISMATCH",
                operation="MERGE",
                numAddedRecords=added,
                numRemovedRecords=removed,
            )
            + f" Expected {expected_added} added and {expected_removed} removed from the merge metrics. "
            "Nothing was committed; please report this with the merge spec.",
            error_class="DELTA_NUM_RECORDS_MISMATCH",
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
