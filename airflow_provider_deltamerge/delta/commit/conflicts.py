"""Our own conflict check: when the table moved on before a merge could commit, decide what the winning
commits mean for it (DESIGN.md "Our own conflict check").

The commit itself is made with no automatic rebase (``CommitProperties(max_commit_retries=0)``), so
deltalake's own check, which lets an append race with a concurrent insert-only merge of the same key, never
decides. For every winning commit, in order:

* the same merge (same run identity and spec hash) already committed: ``AlreadyCommitted``;
* the schema, partitioning, table properties or protocol changed: re-run. This includes a metaData that
  only moves identity columns' high-water marks (a merge that generated identity values), so racing
  inserts into an identity column never reuse values. Delta's ConflictChecker.checkNoMetadataUpdates lets
  such a winning commit pass when the losing transaction changes no metadata itself: stricter here, a
  re-run where Delta might have committed (README, "Identity columns");
* a file this merge read was removed: re-run (Delta's ConcurrentDeleteRead);
* a file was added that the merge's read predicate could have selected, by a commit that is not a blind
  append: re-run (Delta's ConcurrentAppend, under WriteSerializable);
* otherwise (blind appends, commits confined to files and partitions this merge did not read): rebase, i.e.
  commit the same actions on top of the newer version, without re-running.

Winning commits are read through deltalake's public API: each version's snapshot (add actions) is compared
with the previous one. Each version's commitInfo is read from that version's own commit file
(``LogReader``), never from ``history()``, whose labels shift when yet another commit lands meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from airflow_provider_deltamerge.delta.format.provenance import COMMIT_INFO_KEY
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.merge_commits import MergeCommit
from airflow_provider_deltamerge.delta.log.snapshot import DataFile, Snapshot, read_snapshot

# Decides which of the given files (entries of the snapshot) the merge's read predicate could select.
ReadPredicate = Callable[[Snapshot, Sequence[DataFile]], Sequence[DataFile]]


@dataclass(frozen=True)
class ReadSet:
    """What a merge read: the version, the files, and the predicate that chose them."""

    version: int
    files: frozenset[str]  # log paths
    could_read: ReadPredicate


@dataclass(frozen=True)
class Rebase:
    """Every winning commit leaves this merge's answer unchanged: commit on top of ``snapshot``."""

    snapshot: Snapshot


@dataclass(frozen=True)
class Rerun:
    """A winning commit may change what the merge read: run it again from a fresh snapshot."""

    version: int
    reason: str


@dataclass(frozen=True)
class AlreadyCommitted:
    """A winning commit is this same merge (an earlier try of the same task, still running)."""

    commit: MergeCommit


Decision = Rebase | Rerun | AlreadyCommitted


def check_winning_commits(
    base: Snapshot, read: ReadSet, *, same_run: Callable[[Mapping[str, Any]], bool]
) -> Decision:
    """What the commits after ``base`` (the version this merge would commit on) mean for the merge.

    Args:
        base: the snapshot the failed commit attempt was based on.
        read: what the merge read (at ``read.version`` <= ``base.version``; earlier winners were checked).
        same_run: true for the commitInfo record of a commit made by this same merge.
    """
    log = LogReader(base.table_uri)
    latest = log.latest_version()
    previous = base
    for version in range(base.version + 1, latest + 1):
        current = read_snapshot(base.table_uri, version)
        info = log.commit_info(version) or {}
        ours = info.get(COMMIT_INFO_KEY)
        if isinstance(ours, dict) and same_run(ours):
            metrics = {k: int(v) for k, v in (info.get("operationMetrics") or {}).items()}
            return AlreadyCommitted(MergeCommit(version=version, metrics=metrics, info=ours))
        if _table_changed(previous, current):
            return Rerun(version, "changed the table's schema, partitioning, properties or protocol")
        # The commit's own remove actions: a file whose deletion vector changed keeps its path in both
        # snapshots, yet rows of it are gone (Delta's DELETE, UPDATE and MERGE with deletion vectors).
        removed = {unquote(r["path"]) for r in log.file_actions(version, "remove")}
        read_removed = removed & {unquote(path) for path in read.files}
        if read_removed:
            return Rerun(version, f"removed {len(read_removed)} file(s) this merge read")
        before = {f.log_path for f in previous.files}
        added = [f for f in current.files if f.log_path not in before]
        if added and not is_blind_append(info, removed=bool(removed)):
            could = read.could_read(current, added)
            if could:
                return Rerun(version, f"added {len(could)} file(s) this merge would have read")
        previous = current
    return Rebase(previous)


def is_blind_append(info: Mapping[str, Any], *, removed: bool) -> bool:
    """A commit that only appended data without reading the table (Delta's isBlindAppend).

    Delta Spark records ``isBlindAppend``; deltalake's ``write_deltalake(mode="append")`` records a WRITE in
    Append mode. A commit of this provider is never blind: every merge reads the table.
    """
    if removed or COMMIT_INFO_KEY in info:
        return False
    if info.get("isBlindAppend") is True:
        return True
    mode = (info.get("operationParameters") or {}).get("mode")
    return info.get("operation") == "WRITE" and mode == "Append" and "isBlindAppend" not in info


def _table_changed(before: Snapshot, after: Snapshot) -> bool:
    return (
        before.schema_json != after.schema_json
        or before.partition_columns != after.partition_columns
        or before.configuration != after.configuration
        or before.protocol != after.protocol
    )
