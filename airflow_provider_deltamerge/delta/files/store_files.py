"""The table's files through ``obstore`` from this process: how a Spark Connect job, which has no Hadoop
file system of its own, places the files Spark wrote (the worker reaches the table's storage anyway: it
reads and writes the Delta log)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

import obstore
from obstore.store import LocalStore

from airflow_provider_deltamerge.delta.commit.log_store import make_local_folders, object_store, put_file
from airflow_provider_deltamerge.exceptions import MergeExecutionError


class StoreFiles:
    """``TableFiles``' operations on an obstore store rooted at the table."""

    def __init__(self, table_uri: str) -> None:
        self.root = table_uri.rstrip("/")
        store = object_store(self.root)
        if store is None:
            raise MergeExecutionError(
                f"The table {self.root} is on a store this worker cannot reach through obstore (S3, GCS, "
                "Azure, a local path): with a Spark Connect connection the worker places the written files. "
                "Use a spark-submit connection for this table.",
                error_class="DELTAMERGE_CONNECT_STORE_UNSUPPORTED",
            )
        if isinstance(store, LocalStore):
            # Deleting a folder's last file removes the emptied folders too, as a directory delete does.
            store = LocalStore(prefix=os.path.abspath(self.root), automatic_cleanup=True)
        self._store: Any = store

    def list_parquet(self, folder: str) -> Iterator[tuple[str, int, int]]:
        """(path below ``folder``, size, modification time in ms) of every parquet file under ``folder``."""
        prefix = self._relative(folder)
        for batch in obstore.list(self._store, prefix=prefix + "/"):
            for entry in batch:
                if entry["path"].endswith(".parquet"):
                    modified = int(entry["last_modified"].timestamp() * 1000)
                    yield entry["path"][len(prefix) + 1 :], int(entry["size"]), modified

    def move_into_table(self, folder: str, relative_path: str, table_path: str) -> None:
        if isinstance(self._store, LocalStore) and self._store.prefix is not None:
            make_local_folders((self._store.prefix / table_path).parent)  # obstore's would follow the umask
        obstore.rename(self._store, f"{self._relative(folder)}/{relative_path}", table_path)

    def delete(self, relative_path: str) -> None:
        """Delete a file, or a folder and every file under it; nothing when neither is there (as Hadoop's
        recursive delete)."""
        if isinstance(self._store, LocalStore) and self._store.prefix is not None:
            # A write Spark aborted leaves its folders on a local disk with no file in them, which obstore
            # neither lists nor deletes.
            local = self._store.prefix / relative_path
            if local.is_dir():
                shutil.rmtree(local)
                return
        paths = [e["path"] for batch in obstore.list(self._store, prefix=relative_path + "/") for e in batch]
        with contextlib.suppress(FileNotFoundError):
            obstore.delete(self._store, paths or [relative_path])

    def write_text(self, relative_path: str, text: str) -> None:
        put_file(self._store, relative_path, text.encode("utf-8"))

    def _relative(self, location: str) -> str:
        return location[len(self.root) + 1 :] if location.startswith(self.root + "/") else location
