"""The Delta log's commit files, each written by one put-if-absent: the whole commit lands, or another
writer's commit already holds that version and nothing of ours does.

``obstore``'s ``put(mode="create")`` maps to each store's own conditional write: a hard link of a fully
written temporary file on a local disk, ``If-None-Match: *`` on S3 and on Google Cloud Storage, and Azure
Blob Storage's ``If-None-Match``. It reads credentials from the same environment variables as ``deltalake``.
Stores it has no client for (HDFS, and the OpenDAL stores ``deltalake`` reaches) have no ``LogStore``: their
commits go through ``deltalake``'s own transaction instead (see ``delta/commit/transaction.py``).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import obstore
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import LocalStore, from_url

from airflow_provider_deltamerge.delta.log.store_errors import reading_store
from airflow_provider_deltamerge.exceptions import StorageAccessError

# URL schemes whose stores take a conditional put through obstore (the local disk needs none).
CONDITIONAL_PUT_SCHEMES = frozenset({"file", "s3", "s3a", "gs", "az", "abfs", "abfss", "adl", "azure"})
# The stores (scheme://authority) this process has seen refuse to create an existing key: their conditional
# puts hold.
_CHECKED_STORES: set[str] = set()
# The modes of the files and folders a merge creates on a local disk, whatever the worker's umask: those
# Spark's own files get from Hadoop's local file system (0666 and 0777 less Hadoop's default umask, 022).
FILE_MODE = 0o644
FOLDER_MODE = 0o755


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
        return put_file(self.store, name, data, if_absent=True)


def log_store(table_uri: str) -> LogStore | None:
    """The table's log folder as a conditional-put store, or None where obstore has no such store."""
    store = object_store(table_uri.rstrip("/") + "/_delta_log")
    return None if store is None else LogStore(store)


def check_conditional_puts(table_uri: str) -> None:
    """Check, once per store and process, that the table's store refuses to create a key that exists.

    A store that ignores ``If-None-Match`` (some S3-compatible servers) would let two writers' commits of one
    version overwrite each other, and one merge would be lost without a word. One key created twice under
    ``_delta_log`` (hidden: Delta's readers skip it) tells such a store apart before the merge does any work;
    a local disk needs no check.

    Raises:
        StorageAccessError: DELTAMERGE_STORE_IGNORES_CONDITIONAL_PUT, nothing read or written.
    """
    parsed = urlparse(table_uri)
    place = f"{parsed.scheme.lower()}://{parsed.netloc}"
    if len(parsed.scheme) <= 1 or parsed.scheme.lower() == "file" or place in _CHECKED_STORES:
        return  # a local disk (whose table may not even be there: the snapshot says so), or checked
    store = object_store(table_uri.rstrip("/") + "/_delta_log")
    if store is None:
        return
    probe = f".deltamerge-conditional-put-{uuid.uuid4().hex}"
    with reading_store(table_uri, None):  # the first request of a merge to its store: a wrong key fails here
        put_file(store, probe, b"", if_absent=True)
        try:
            overwritten = put_file(store, probe, b"", if_absent=True)
        finally:
            obstore.delete(store, probe)
    if overwritten:
        raise StorageAccessError(
            f"The store of {table_uri} ignores conditional writes (If-None-Match): it let a second writer "
            "create a key that existed, so two merges committing the same version would overwrite each "
            "other. The merge read and wrote nothing. Use a store that refuses such writes (AWS S3, Azure "
            "Blob Storage, Google Cloud Storage, MinIO since 2024-05) for tables this provider writes.",
            error_class="DELTAMERGE_STORE_IGNORES_CONDITIONAL_PUT",
        )
    _CHECKED_STORES.add(place)


def object_store(location: str) -> Any:
    """An obstore store rooted at ``location`` (a path or URI), or None where obstore has no client."""
    parsed = urlparse(location)
    if len(parsed.scheme) <= 1:  # a plain path (a one-letter scheme is a Windows drive letter)
        return LocalStore(prefix=os.path.abspath(location))
    if parsed.scheme.lower() not in CONDITIONAL_PUT_SCHEMES:
        return None
    return from_url(location)


def put_file(store: Any, name: str, data: bytes, *, if_absent: bool = False) -> bool:
    """Write ``data`` as ``name`` below ``store``'s root; with ``if_absent`` only where no file has that name
    (False then).

    On a local disk the file gets ``FILE_MODE`` and the folders it needs ``FOLDER_MODE``: obstore's local
    store leaves them as the umask says, world-writable under umask 000.
    """
    if isinstance(store, LocalStore) and store.prefix is not None:
        return _put_local(Path(store.prefix), name, data, if_absent=if_absent)
    try:
        obstore.put(store, name, data, mode="create" if if_absent else "overwrite")
    except (AlreadyExistsError, PreconditionError):
        if not if_absent:
            raise
        return False
    return True


def settle_local_modes(location: str, names: Iterable[str]) -> None:
    """Give the files another library wrote as ``names`` below ``location`` ``FILE_MODE`` where it is a local
    folder (deltalake's checkpoints); elsewhere the store decides."""
    store = object_store(location)
    if isinstance(store, LocalStore) and store.prefix is not None:
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(Path(store.prefix) / name, FILE_MODE)


def _put_local(root: Path, name: str, data: bytes, *, if_absent: bool) -> bool:
    """As obstore's local put: a fully written hidden file in the same folder, then linked (a put-if-absent:
    the link fails where the name exists) or renamed into place; its mode is set before it has its name."""
    path = root / name
    make_local_folders(path.parent)
    staged = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with os.fdopen(os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE), "wb") as out:
            os.fchmod(out.fileno(), FILE_MODE)  # open's mode is masked by the umask; this one is not
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if not if_absent:
            os.replace(staged, path)
            return True
        try:
            os.link(staged, path)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)


def make_local_folders(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each with ``FOLDER_MODE``."""
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        try:
            created.mkdir()
        except FileExistsError:  # another writer made it meanwhile: its mode is its own
            continue
        os.chmod(created, FOLDER_MODE)
