"""A Delta table's commit files read by version, without loading a snapshot: the newest version, and the
``commitInfo`` of any version.

Each version is named by its own file, so a commit that lands while the log is read can never be taken for
another version (``DeltaTable.history()`` labels the commits it lists with a version it read apart, and a
commit landing between the two shifts every label by one). The newest version is found from
``_delta_log/_last_checkpoint`` and a few existence probes above it. Files go through ``deltalake``'s own
object-store client, so local paths and s3/abfs/gs URIs read alike with the same storage options.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from deltalake.exceptions import TableNotFoundError
from deltalake.fs import DeltaStorageHandler
from pyarrow.fs import FileType, PyFileSystem

from airflow_provider_deltamerge.exceptions import TargetTableError

LOG_DIR = "_delta_log"


def commit_path(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.json"


class LogReader:
    """The ``_delta_log`` of the table at ``table_uri``, read with ``storage_options`` (never shown)."""

    def __init__(self, table_uri: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.table_uri = table_uri
        try:
            self._store = DeltaStorageHandler(table_uri, dict(storage_options or {}) or None)
        except TableNotFoundError as err:  # a local folder that is not there
            raise _not_a_table(table_uri) from err

    @property
    def filesystem(self) -> PyFileSystem:
        """The table's folder as a pyarrow file system (paths relative to the table root)."""
        return PyFileSystem(self._store)

    def exists(self, name: str) -> bool:
        """Whether the file ``name`` (relative to the table root) exists."""
        (found,) = self._store.get_file_info([name])
        return bool(found.type == FileType.File)

    def latest_version(self) -> int:
        """The table's newest version.

        Raises:
            TargetTableError: DELTA_TABLE_NOT_FOUND when there is no Delta log at the table's location.
        """
        low = self._checkpoint_version()
        if low is None:
            if not self._exists(0):
                raise _not_a_table(self.table_uri)
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

    def commit_info(self, version: int) -> dict[str, Any] | None:
        """The ``commitInfo`` action of ``version`` ({} if none was written); None if its file is gone."""
        text = self._commit_text(version)
        if text is None:
            return None
        for line in text.splitlines():
            # Only the commitInfo line is parsed: a big commit's other lines are its many add actions.
            if '"commitInfo"' in line[:32]:
                info = json.loads(line).get("commitInfo")
                return info if isinstance(info, dict) else {}
        return {}

    def file_actions(self, version: int, kind: str) -> list[dict[str, Any]]:
        """The ``kind`` actions (``add``, ``remove``) of ``version``'s commit, as written.

        Raises:
            TargetTableError: DELTA_TABLE_NOT_FOUND-like when the commit file is gone (log clean-up).
        """
        return [action[kind] for action in self.actions(version) if kind in action]

    def actions(self, version: int) -> list[dict[str, Any]]:
        """Every action of ``version``'s commit (``{"add": {...}}``, ``{"commitInfo": {...}}``...), in order.

        Raises:
            TargetTableError: DELTA_TABLE_NOT_FOUND-like when the commit file is gone (log clean-up).
        """
        text = self._commit_text(version)
        if text is None:
            raise TargetTableError(
                f"The commit file {commit_path(version)} of {self.table_uri} is gone (the log was cleaned up "
                "past it): the table's history before its newest checkpoint cannot be read.",
                error_class="DELTA_VERSIONS_NOT_CONTIGUOUS",
            )
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def recent_commits(self, depth: int) -> Iterator[dict[str, Any]]:
        """The commitInfo of the newest ``depth`` versions, newest first, each with its ``version``, as
        ``DeltaTable.history()`` gives them; ends early where log clean-up removed older commit files."""
        latest = self.latest_version()
        for version in range(latest, max(latest - depth, -1), -1):
            info = self.commit_info(version)
            if info is None:
                return
            yield {**info, "version": version}

    def last_checkpoint(self) -> dict[str, Any] | None:
        """``_delta_log/_last_checkpoint`` (version, parts, v2Checkpoint...), or None when there is none."""
        try:
            with self._store.open_input_file(f"{LOG_DIR}/_last_checkpoint") as file:
                found = json.loads(file.read())
        except FileNotFoundError:
            return None
        return found if isinstance(found, dict) else None

    def _checkpoint_version(self) -> int | None:
        found = self.last_checkpoint()
        return int(found["version"]) if found else None

    def _commit_text(self, version: int) -> str | None:
        try:
            with self._store.open_input_file(commit_path(version)) as file:
                return str(file.read().decode())
        except FileNotFoundError:
            return None

    def _exists(self, version: int) -> bool:
        return self.exists(commit_path(version))


def _not_a_table(table_uri: str) -> TargetTableError:
    return TargetTableError(
        f"{table_uri} is not a Delta table: it has no {commit_path(0)} and no checkpoint.",
        error_class="DELTA_TABLE_NOT_FOUND",
    )
