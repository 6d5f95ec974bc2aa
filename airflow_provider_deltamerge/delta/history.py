"""Merge commits as the Delta log records them: what the Airflow side reads back after a job (no Spark)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltamerge.delta.snapshot import open_table

# The commitInfo key under which every merge commit of this provider records who made it and how.
COMMIT_INFO_KEY = "deltamerge"
SUBMISSION_ID = "submissionId"
# How far back to look for a commit of ours: concurrent writers may have committed after it.
DEFAULT_HISTORY_DEPTH = 100


@dataclass(frozen=True)
class MergeCommit:
    """One merge commit: its version, Delta's operation metrics (as numbers) and our provenance record."""

    version: int
    metrics: Mapping[str, int]
    info: Mapping[str, Any]


def run_identity(user_metadata: str | None) -> dict[str, Any]:
    """The run identity a delta-spark backend merge wrote into a commit's ``userMetadata``; {} if none.

    Delta's own MERGE cannot add keys to commitInfo, so that backend records the same identity there.
    """
    try:
        parsed = json.loads(user_metadata or "")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def find_merge_commit(
    table_uri: str,
    *,
    submission_id: str,
    depth: int = DEFAULT_HISTORY_DEPTH,
    storage_options: dict[str, str] | None = None,
) -> MergeCommit | None:
    """The commit that the merge job with ``submission_id`` made, or None if it made none."""
    for entry in open_table(table_uri, storage_options=storage_options or None).history(depth):
        info = entry.get(COMMIT_INFO_KEY) or run_identity(entry.get("userMetadata"))
        if isinstance(info, dict) and info.get(SUBMISSION_ID) == submission_id:
            metrics = {k: int(v) for k, v in (entry.get("operationMetrics") or {}).items()}
            return MergeCommit(version=int(entry["version"]), metrics=metrics, info=info)
    return None
