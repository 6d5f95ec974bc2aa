"""The files a merge adds, as its commit's add and cdc actions describe them: what the writer hands on.

Plain records (no pyspark), so the commit group reads them without the Spark side.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote


@dataclass(frozen=True)
class WrittenFile:
    """A new data file in the table location, described as its add action will describe it."""

    log_path: str
    size: int
    partition_values: tuple[tuple[str, str | None], ...]
    modification_time: int
    stats: str
    num_records: int

    @property
    def relative_path(self) -> str:
        return unquote(self.log_path)


@dataclass(frozen=True)
class ChangeFile:
    """A new change data file under ``_change_data/``, described as its cdc action will describe it."""

    log_path: str
    size: int
    partition_values: tuple[tuple[str, str | None], ...]

    @property
    def relative_path(self) -> str:
        return unquote(self.log_path)
