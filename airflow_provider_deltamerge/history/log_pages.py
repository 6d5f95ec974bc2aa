"""A Delta table's commits, newest first, one page at a time: only the commit files of the page are read.

The newest version is found from ``_delta_log/_last_checkpoint`` and a few existence probes above it, so a
page costs about 15 small requests plus one read per commit on it, whether the log holds ten commits or a
million; the whole log (or even a snapshot of the table) is never loaded. Files go through ``deltalake``'s
own object-store client, so local paths and s3/abfs/gs URIs read alike with the same storage options.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from deltalake.fs import DeltaStorageHandler
from pyarrow.fs import FileType

from airflow_provider_deltamerge.exceptions import TargetTableError
from airflow_provider_deltamerge.history.entries import HistoryEntry, history_entry

PAGE_SIZE = 50
LOG_DIR = "_delta_log"
# Reads of one page run side by side: an object store answers each in tens of milliseconds.
_PARALLEL_READS = 8


@dataclass(frozen=True)
class LogPage:
    """One page of a table's history: ``entries`` newest first, page numbers from 1 (the newest)."""

    entries: Sequence[HistoryEntry]
    latest_version: int
    page: int
    pages: int
    # True when the page ends where log clean-up removed the older commit files.
    older_removed: bool


def commit_path(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.json"


class DeltaLog:
    """The ``_delta_log`` of the table at ``table_uri``, read with ``storage_options`` (never shown)."""

    def __init__(self, table_uri: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.table_uri = table_uri
        self._store = DeltaStorageHandler(table_uri, dict(storage_options or {}) or None)

    def latest_version(self) -> int:
        """The table's newest version.

        Raises:
            TargetTableError: DELTA_TABLE_NOT_FOUND when there is no Delta log at the table's location.
        """
        low = self._checkpoint_version()
        if low is None:
            if not self._exists(0):
                raise TargetTableError(
                    f"{self.table_uri} is not a Delta table: it has no {commit_path(0)} and no checkpoint.",
                    error_class="DELTA_TABLE_NOT_FOUND",
                )
            low = 0
        # Versions are contiguous above the checkpoint: double the step while commits exist, then bisect
        # between the last version found and the first one missing.
        step = 1
        while self._exists(low + step):
            low, step = low + step, step * 2
        high = low + step
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if self._exists(middle) else (low, middle)
        return low

    def page(self, page: int, *, page_size: int = PAGE_SIZE) -> LogPage:
        """Page ``page`` (1 = the newest commits) of the history; past the last page, an empty one."""
        latest = self.latest_version()
        pages = max(1, -(-(latest + 1) // page_size))
        newest = latest - (page - 1) * page_size
        versions = range(newest, max(newest - page_size, -1), -1)
        with ThreadPoolExecutor(_PARALLEL_READS) as pool:
            infos = list(pool.map(self.commit_info, versions))
        entries: list[HistoryEntry] = []
        for version, info in zip(versions, infos, strict=True):
            if info is None:  # removed by log clean-up, and so is every older one
                return LogPage(entries, latest, page, pages, older_removed=True)
            entries.append(history_entry(version, info))
        return LogPage(entries, latest, page, pages, older_removed=False)

    def commit_info(self, version: int) -> dict[str, Any] | None:
        """The ``commitInfo`` action of ``version`` ({} if none was written); None if its file is gone."""
        try:
            with self._store.open_input_file(commit_path(version)) as file:
                text = file.read().decode()
        except FileNotFoundError:
            return None
        for line in text.splitlines():
            # Only the commitInfo line is parsed: a big commit's other lines are its many add actions.
            if '"commitInfo"' in line[:32]:
                info = json.loads(line).get("commitInfo")
                return info if isinstance(info, dict) else {}
        return {}

    def _checkpoint_version(self) -> int | None:
        try:
            with self._store.open_input_file(f"{LOG_DIR}/_last_checkpoint") as file:
                return int(json.loads(file.read())["version"])
        except FileNotFoundError:
            return None

    def _exists(self, version: int) -> bool:
        (found,) = self._store.get_file_info([commit_path(version)])
        return bool(found.type == FileType.File)
