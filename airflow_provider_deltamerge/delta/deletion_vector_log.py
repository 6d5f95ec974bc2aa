"""Which deletion vector each live data file of a version carries, read from the log.

``deltalake`` lists a snapshot's files without their deletion vector descriptors, and a merge needs them
twice: to leave out the deleted rows when it reads a file, and to name the exact logical file (path and
vector) in the remove action that replaces it. The newest add action of a path holds its vector, so the
commits are read newest first down to the last checkpoint, and the checkpoint (classic, multi-part or v2 with
sidecars) only for the paths still not found.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow.fs import FileSelector, PyFileSystem

from airflow_provider_deltamerge.delta.deletion_vectors import DeletionVector
from airflow_provider_deltamerge.delta.log_reader import LOG_DIR, LogReader


def deletion_vectors_of(table_uri: str, version: int, paths: Collection[str]) -> dict[str, DeletionVector]:
    """The vector of each of ``paths`` (log paths of files live at ``version``) that has one."""
    reader = LogReader(table_uri)
    wanted, found = set(paths), dict[str, DeletionVector]()
    checkpoint = _checkpoint_at_or_below(reader, version)
    first_commit = checkpoint[0] + 1 if checkpoint else 0
    for commit in range(version, first_commit - 1, -1):
        for add in reader.file_actions(commit, "add"):
            _take(add, wanted, found)
        if not wanted:
            return found
    if checkpoint:
        for entry in _checkpoint_adds(reader, checkpoint[1]):
            _take(entry, wanted, found)
    return found


def _take(add: Mapping[str, Any], wanted: set[str], found: dict[str, DeletionVector]) -> None:
    """Record the newest add of a path still wanted (its vector, or none: an add without one wins too)."""
    path = add.get("path")
    if path in wanted:
        wanted.discard(path)
        vector = DeletionVector.from_action(add.get("deletionVector"))
        if vector is not None:
            found[path] = vector


def _checkpoint_at_or_below(reader: LogReader, version: int) -> tuple[int, list[str]] | None:
    """The newest checkpoint's version and files (relative to the table) when it is not after ``version``."""
    last = reader.last_checkpoint()
    if last is None or int(last["version"]) > version:
        return None  # a snapshot older than the newest checkpoint is read from the first commit on
    at = int(last["version"])
    v2 = last.get("v2Checkpoint")
    if isinstance(v2, Mapping) and v2.get("path"):
        return at, [f"{LOG_DIR}/{v2['path']}"]
    parts = int(last.get("parts") or 0)
    if parts:
        return at, [
            f"{LOG_DIR}/{at:020d}.checkpoint.{n:010d}.{parts:010d}.parquet" for n in range(1, parts + 1)
        ]
    classic = f"{LOG_DIR}/{at:020d}.checkpoint.parquet"
    if reader.exists(classic):
        return at, [classic]
    # A v2 checkpoint that _last_checkpoint does not describe: <version>.checkpoint.<uuid>.(json|parquet).
    prefix = f"{at:020d}.checkpoint."
    listed = reader.filesystem.get_file_info(FileSelector(LOG_DIR))
    return at, sorted(info.path for info in listed if info.base_name.startswith(prefix))


def _checkpoint_adds(reader: LogReader, files: list[str]) -> Iterator[Mapping[str, Any]]:
    """The add actions (path, vector) of the checkpoint's files and of the sidecars a v2 checkpoint names."""
    for name in files:
        for row in _read_actions(reader.filesystem, name):
            if row.get("sidecar"):
                yield from _read_actions(reader.filesystem, f"{LOG_DIR}/_sidecars/{row['sidecar']}")
            elif row.get("path"):
                yield row


def _read_actions(filesystem: PyFileSystem, name: str) -> list[dict[str, Any]]:
    """Rows of ``path``, ``deletionVector`` (of add actions) and ``sidecar`` (a sidecar's file name)."""
    with filesystem.open_input_stream(name) as stream:
        data = stream.read()
    if name.endswith(".json"):
        actions = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        return [
            {**a["add"]} if "add" in a else {"sidecar": a["sidecar"]["path"]}
            for a in actions
            if "add" in a or "sidecar" in a
        ]
    checkpoint = pq.ParquetFile(pa.BufferReader(data))
    names = checkpoint.schema_arrow.names
    # Only the nested fields the lookup needs: the stats stay unread.
    rows = checkpoint.metadata.num_rows
    columns = {
        key: checkpoint.read(columns=[f"{parent}.{field}"])
        .column(0)
        .combine_chunks()
        .field(field)
        .to_pylist()
        if parent in names
        else [None] * rows
        for key, parent, field in (
            ("path", "add", "path"),
            ("deletionVector", "add", "deletionVector"),
            ("sidecar", "sidecar", "path"),
        )
    }
    return [
        {"path": path, "deletionVector": vector, "sidecar": sidecar}
        for path, vector, sidecar in zip(
            columns["path"], columns["deletionVector"], columns["sidecar"], strict=True
        )
        if path or sidecar
    ]


def _nested(checkpoint: pq.ParquetFile, parent: str, field: str) -> list[Any]:
    """One field of a struct column, read alone (the leaf names of two fields would collide in one read)."""
    return list(
        checkpoint.read(columns=[f"{parent}.{field}"]).column(0).combine_chunks().field(field).to_pylist()
    )
