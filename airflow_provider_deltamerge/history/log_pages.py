"""A Delta table's commits, newest first, one page at a time: only the commit files of the page are read.

The newest version is found from ``_delta_log/_last_checkpoint`` and a few existence probes above it, so a
page costs about 15 small requests plus one read per commit on it, whether the log holds ten commits or a
million; the whole log (or even a snapshot of the table) is never loaded (``delta/log/log_reader.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.history.entries import HistoryEntry, history_entry

PAGE_SIZE = 50
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


class DeltaLog(LogReader):
    """The ``_delta_log`` of a table, read page by page."""

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
