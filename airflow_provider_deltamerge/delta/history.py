"""Merge commits as the Delta log records them: what the Airflow side reads back after a job (no Spark)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltamerge.delta.log_reader import LogReader
from airflow_provider_deltamerge.delta.operation_metrics import DELTA_SPARK_EXECUTOR, delta_merge_metrics

# The commitInfo key under which every merge commit of this provider records who made it and how.
COMMIT_INFO_KEY = "deltamerge"
SUBMISSION_ID = "submissionId"
# How far back to look for a commit of ours: concurrent writers may have committed after it.
DEFAULT_HISTORY_DEPTH = 100


@dataclass(frozen=True)
class MergeCommit:
    """One merge commit: its version, Delta's operation metrics (as numbers) and our provenance record."""

    version: int
    metrics: Mapping[str, int | None]  # None: not measured by the backend that made the commit
    info: Mapping[str, Any]


def provenance_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Who made a history entry, as this provider records it; {} for commits of other writers.

    Our engine's commits carry the record under ``COMMIT_INFO_KEY``; Delta's own MERGE (the delta-spark
    backend) cannot add keys to commitInfo, so that backend writes the same record as ``userMetadata`` JSON.
    """
    own = entry.get(COMMIT_INFO_KEY)
    if isinstance(own, dict):
        return own
    try:
        parsed = json.loads(entry.get("userMetadata") or "")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def find_merge_commit_where(
    table_uri: str,
    matches: Callable[[Mapping[str, Any]], bool],
    *,
    depth: int = DEFAULT_HISTORY_DEPTH,
    storage_options: dict[str, str] | None = None,
) -> MergeCommit | None:
    """The newest of the last ``depth`` commits whose provenance record ``matches``, if any."""
    for entry in LogReader(table_uri, storage_options).recent_commits(depth):
        info = provenance_of(entry)
        if info and matches(info):
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
