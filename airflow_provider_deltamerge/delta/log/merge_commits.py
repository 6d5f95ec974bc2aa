"""Merge commits as the Delta log records them: what the Airflow side reads back after a job (no Spark)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltamerge.delta.format.provenance import DEFAULT_HISTORY_DEPTH, provenance_of
from airflow_provider_deltamerge.delta.log.commit_match import MERGE, Commit, CommitCriteria, operation_of
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.operation_metrics import DELTA_SPARK_EXECUTOR, delta_merge_metrics
from airflow_provider_deltamerge.exceptions import TargetTableError

SUBMISSION_ID = "submissionId"


@dataclass(frozen=True)
class MergeCommit:
    """One merge commit: its version, Delta's operation metrics (as numbers) and our provenance record."""

    version: int
    metrics: Mapping[str, int | None]  # None: not measured by the backend that made the commit
    info: Mapping[str, Any]


def find_merge_commit_where(
    table_uri: str,
    matches: Callable[[Mapping[str, Any]], bool],
    *,
    depth: int = DEFAULT_HISTORY_DEPTH,
    storage_options: dict[str, str] | None = None,
) -> MergeCommit | None:
    """The newest of the last ``depth`` merge commits whose provenance record ``matches``, if any.

    Merge commits only: Delta's auto compaction commits an OPTIMIZE right after a merge on Delta's runtime,
    in the merge's session, so its commit carries the merge's provenance record too.
    """
    for entry in LogReader(table_uri, storage_options).recent_commits(depth):
        info = provenance_of(entry)
        if info and operation_of(entry) == MERGE and matches(info):
            version = int(entry["version"])
            metrics: Mapping[str, int | None]
            if info.get("executor") == DELTA_SPARK_EXECUTOR:
                # Delta's commit lacks some of its MERGE's metrics: the same completion as the backend's.
                metrics = delta_merge_metrics(table_uri, version, storage_options=storage_options)
            else:
                metrics = {k: int(v) for k, v in (entry.get("operationMetrics") or {}).items()}
            return MergeCommit(version=version, metrics=metrics, info=info)
    return None


def find_merge_commit(
    table_uri: str,
    *,
    submission_id: str,
    depth: int = DEFAULT_HISTORY_DEPTH,
    storage_options: dict[str, str] | None = None,
) -> MergeCommit | None:
    """The commit that the merge job with ``submission_id`` made, or None if it made none."""
    return find_merge_commit_where(
        table_uri,
        lambda info: info.get(SUBMISSION_ID) == submission_id,
        depth=depth,
        storage_options=storage_options,
    )


def find_commit(
    table_uri: str,
    criteria: CommitCriteria,
    *,
    depth: int = DEFAULT_HISTORY_DEPTH,
    storage_options: dict[str, str] | None = None,
) -> Commit | None:
    """The newest of the newest ``depth`` commits of ``table_uri`` that meets ``criteria``; with
    ``after_version``, the oldest after it (the next commit, so that none is passed over).

    Returns None, too, when there is no Delta table at ``table_uri`` yet: a sensor may wait for one.
    """
    try:
        history = list(LogReader(table_uri, storage_options).recent_commits(depth))
    except TargetTableError:
        return None
    found = None
    for entry in history:  # newest first
        commit = Commit.from_history(entry)
        if criteria.after_version is not None and commit.version <= criteria.after_version:
            break
        if criteria.matches(commit):
            found = commit
            if criteria.after_version is None:
                break
    return found
