"""The Delta log's commit files, each written by one put-if-absent: the whole commit lands, or another
writer's commit already holds that version and nothing of ours does.

``obstore``'s ``put(mode="create")`` maps to each store's own conditional write: a hard link of a fully
written temporary file on a local disk, ``If-None-Match: *`` on S3 and on Google Cloud Storage, and Azure
Blob Storage's ``If-None-Match``. It reads credentials from the same environment variables as ``deltalake``.
Stores it has no client for (HDFS, and the OpenDAL stores ``deltalake`` reaches) have no ``LogStore``: their
commits go through ``deltalake``'s own transaction instead (see ``delta/commit.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import obstore
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import LocalStore, from_url

# URL schemes whose stores take a conditional put through obstore (the local disk needs none).
CONDITIONAL_PUT_SCHEMES = frozenset({"file", "s3", "s3a", "gs", "az", "abfs", "abfss", "adl", "azure"})


def commit_file(version: int) -> str:
    """The name of a version's commit file in ``_delta_log`` (PROTOCOL.md "Delta Log Entries")."""
    return f"{version:020d}.json"


@dataclass(frozen=True)
class LogStore:
    """A table's ``_delta_log`` folder."""

    store: Any  # an obstore store whose root is the table's _delta_log

    def put_if_absent(self, name: str, data: bytes) -> bool:
        """Write ``name`` unless it exists; False when another writer's file is already there.

        S3 answers a conditional put that races another one on the same key with 409 (obstore's
        PreconditionError here): the version is taken or about to be, so the caller looks again.
        """
        try:
            obstore.put(self.store, name, data, mode="create")
        except (AlreadyExistsError, PreconditionError):
            return False
        return True


def log_store(table_uri: str) -> LogStore | None:
    """The table's log folder as a conditional-put store, or None where obstore has no such store."""
    store = object_store(table_uri.rstrip("/") + "/_delta_log")
    return None if store is None else LogStore(store)


def object_store(location: str) -> Any:
    """An obstore store rooted at ``location`` (a path or URI), or None where obstore has no client."""
    parsed = urlparse(location)
    if len(parsed.scheme) <= 1:  # a plain path (a one-letter scheme is a Windows drive letter)
        return LocalStore(prefix=os.path.abspath(location))
    if parsed.scheme.lower() not in CONDITIONAL_PUT_SCHEMES:
        return None
    return from_url(location)
