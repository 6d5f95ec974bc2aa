"""A commit as a row of the history page: who made it (our provenance record or another writer), what it did.

Rows rely on the provenance record and ``operationMetrics`` only, never on the operation's name: our engine,
Delta's own MERGE and other writers name their operations differently, and names change between versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_provider_deltamerge.delta.log.merge_commits import provenance_of
from airflow_provider_deltamerge.metrics import (
    EXECUTION_TIME_MS,
    NUM_TARGET_BYTES_ADDED,
    NUM_TARGET_BYTES_REMOVED,
    NUM_TARGET_FILES_ADDED,
    NUM_TARGET_FILES_REMOVED,
    NUM_TARGET_ROWS_COPIED,
    NUM_TARGET_ROWS_DELETED,
    NUM_TARGET_ROWS_INSERTED,
    NUM_TARGET_ROWS_UPDATED,
)

# The columns of the page, each read from Delta's MERGE metric or, for other writers' commits, from the
# names Delta's other operations and delta-rs record the same quantity under.
COLUMNS: Mapping[str, tuple[str, ...]] = {
    NUM_TARGET_ROWS_INSERTED: (NUM_TARGET_ROWS_INSERTED, "num_added_rows"),
    NUM_TARGET_ROWS_UPDATED: (NUM_TARGET_ROWS_UPDATED, "num_updated_rows"),
    NUM_TARGET_ROWS_DELETED: (NUM_TARGET_ROWS_DELETED, "numDeletedRows", "num_deleted_rows"),
    NUM_TARGET_ROWS_COPIED: (NUM_TARGET_ROWS_COPIED, "numCopiedRows", "num_copied_rows"),
    NUM_TARGET_FILES_REMOVED: (NUM_TARGET_FILES_REMOVED, "numRemovedFiles", "num_removed_files"),
    NUM_TARGET_FILES_ADDED: (NUM_TARGET_FILES_ADDED, "numAddedFiles", "numFiles", "num_added_files"),
    NUM_TARGET_BYTES_REMOVED: (NUM_TARGET_BYTES_REMOVED, "numRemovedBytes"),
    NUM_TARGET_BYTES_ADDED: (NUM_TARGET_BYTES_ADDED, "numAddedBytes", "numOutputBytes"),
    EXECUTION_TIME_MS: (EXECUTION_TIME_MS, "execution_time_ms"),
}


@dataclass(frozen=True)
class HistoryEntry:
    """One commit: its version and time, our provenance record ({} for another writer), its numbers."""

    version: int
    time: datetime | None
    operation: str
    provenance: Mapping[str, Any]
    # COLUMNS' keys -> value; a quantity the writer did not record is absent.
    numbers: Mapping[str, int]

    @property
    def ours(self) -> bool:
        return bool(self.provenance)

    @property
    def rows_changed(self) -> int:
        return sum(
            self.numbers.get(k, 0)
            for k in (NUM_TARGET_ROWS_INSERTED, NUM_TARGET_ROWS_UPDATED, NUM_TARGET_ROWS_DELETED)
        )


def history_entry(version: int, commit_info: Mapping[str, Any]) -> HistoryEntry:
    """The row of commit ``version`` from its ``commitInfo`` action (Delta keeps metrics as strings)."""
    metrics = commit_info.get("operationMetrics") or {}
    numbers = {}
    for column, names in COLUMNS.items():
        value = next((metrics[name] for name in names if name in metrics), None)
        try:
            numbers[column] = int(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
    stamp = commit_info.get("inCommitTimestamp") or commit_info.get("timestamp")
    return HistoryEntry(
        version=version,
        time=datetime.fromtimestamp(stamp / 1000, UTC) if isinstance(stamp, int) else None,
        operation=str(commit_info.get("operation") or ""),
        provenance=provenance_of(commit_info),
        numbers=numbers,
    )
