"""A merge's identity in the log: the Airflow run that asked for it and the spec it ran, so a retried or
duplicated task finds the commit it already made instead of merging twice."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_deltamerge.delta.log.merge_commits import MergeCommit, find_merge_commit_where

# The provenance keys that name one Airflow task instance (the try number is left out: a retry is the same
# run), and the key of the spec hash in our commitInfo record.
RUN_IDENTITY_KEYS = ("dagId", "taskId", "runId", "mapIndex")
SPEC_HASH_KEY = "specHash"
# How many recent commits are searched for an earlier commit of the same run.
IDEMPOTENCY_DEPTH = 1000


def run_identity(info: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The run identity in a commitInfo record (or provenance), or None when it names no Airflow run."""
    if not info.get("dagId") or not info.get("runId"):
        return None
    return (*(info.get(k) for k in RUN_IDENTITY_KEYS), info.get(SPEC_HASH_KEY))


def same_run(info: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """A test for commitInfo records made by the merge ``info`` describes (never true without an identity)."""
    identity = run_identity(info)
    return lambda other: identity is not None and run_identity(other) == identity


def find_committed_run(
    table_uri: str,
    info: Mapping[str, Any],
    *,
    depth: int = IDEMPOTENCY_DEPTH,
    storage_options: dict[str, str] | None = None,
) -> MergeCommit | None:
    """The newest commit of the same run and spec as ``info`` among the last ``depth`` commits, if any."""
    if run_identity(info) is None:
        return None
    return find_merge_commit_where(table_uri, same_run(info), depth=depth, storage_options=storage_options)
