"""The live add actions of chosen files of a version, as the log holds them.

``deltalake`` lists a snapshot's files without their deletion vector descriptors and without their stats as
written, and a merge needs both: the vectors to leave out the deleted rows when it reads a file and to name
the exact logical file (path and vector) in the remove action that replaces it; the whole add action to
re-add a file under a new deletion vector. The newest add action of a path is the live one, so the commits
are read newest first down to the last checkpoint, and the checkpoint (classic, multi-part or v2 with
sidecars) only for the paths still not found.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow.fs import FileSelector, PyFileSystem

from airflow_provider_deltamerge.delta.format.deletion_vectors import DeletionVector
from airflow_provider_deltamerge.delta.log.log_reader import LOG_DIR, LogReader

# What a lookup of vectors only reads of a checkpoint's add actions; a whole add is these and the rest.
_VECTOR_FIELDS = ("path", "deletionVector")
# Row tracking's fields too: a file re-added under a new vector keeps its row ids (delta/log/row_tracking.py).
_ADD_FIELDS = (
    *_VECTOR_FIELDS,
    "partitionValues",
    "size",
    "modificationTime",
    "stats",
    "tags",
    "baseRowId",
    "defaultRowCommitVersion",
)
_MAPS = frozenset({"partitionValues", "tags"})  # read from parquet as lists of (key, value) pairs


def deletion_vectors_of(table_uri: str, version: int, paths: Collection[str]) -> dict[str, DeletionVector]:
    """The vector of each of ``paths`` (log paths of files live at ``version``) that has one."""
    adds = add_actions_of(table_uri, version, paths, fields=_VECTOR_FIELDS)
    vectors = {path: DeletionVector.from_action(add.get("deletionVector")) for path, add in adds.items()}
    return {path: vector for path, vector in vectors.items() if vector is not None}


def add_actions_of(
    table_uri: str, version: int, paths: Collection[str], *, fields: tuple[str, ...] = _ADD_FIELDS
) -> dict[str, dict[str, Any]]:
    """The live add action of each of ``paths`` (log paths of files live at ``version``).

    Args:
        fields: the add's fields read from a checkpoint (commits give every field).
    """
    reader = LogReader(table_uri)
    wanted, found = set(paths), dict[str, dict[str, Any]]()
    checkpoint = checkpoint_files(reader, version)
    first_commit = checkpoint[0] + 1 if checkpoint else 0
    for commit in range(version, first_commit - 1, -1):
        for add in reader.file_actions(commit, "add"):
            _take(add, wanted, found)
        if not wanted:
            return found
    if checkpoint:
        for entry in _checkpoint_adds(reader, checkpoint[1], fields):
            _take(entry, wanted, found)
    return found


def live_file_sizes(
    table_uri: str, version: int, *, storage_options: Mapping[str, str] | None = None
) -> dict[str, int]:
    """Every file live at ``version`` (its log path) and its size, replayed from the log alone: the
    checkpoint's add actions, then each later commit's removes and adds. For tables ``deltalake`` cannot
    open (reader features it lacks), whose size Delta's merge metrics still report."""
    reader = LogReader(table_uri, storage_options)
    checkpoint = checkpoint_files(reader, version)
    live = (
        {add["path"]: int(add["size"]) for add in _checkpoint_adds(reader, checkpoint[1], ("path", "size"))}
        if checkpoint
        else {}
    )
    for commit in range(checkpoint[0] + 1 if checkpoint else 0, version + 1):
        actions = reader.actions(commit)
        # A file re-added under a new deletion vector is removed and added in one commit: the add stays.
        for action in actions:
            if "remove" in action:
                live.pop(action["remove"]["path"], None)
        live.update({a["add"]["path"]: int(a["add"]["size"]) for a in actions if "add" in a})
    return live


def _take(add: Mapping[str, Any], wanted: set[str], found: dict[str, dict[str, Any]]) -> None:
    """Keep the newest add of a path still wanted (the first one met, reading newest first)."""
    path = add.get("path")
    if path in wanted:
        wanted.discard(path)
        found[path] = dict(add)


def checkpoint_files(reader: LogReader, version: int) -> tuple[int, list[str]] | None:
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


def _checkpoint_adds(
    reader: LogReader, files: list[str], fields: tuple[str, ...]
) -> Iterator[dict[str, Any]]:
    """The add actions (``fields`` of them) of the checkpoint's files and of the sidecars a v2 checkpoint
    names."""
    for name in files:
        for row in _read_actions(reader.filesystem, name, fields):
            if row.get("sidecar"):
                yield from _read_actions(reader.filesystem, f"{LOG_DIR}/_sidecars/{row['sidecar']}", fields)
            elif row.get("path"):
                yield row


def _read_actions(filesystem: PyFileSystem, name: str, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """The add actions (``fields`` of them) of a checkpoint file, and ``{"sidecar": file name}`` rows."""
    with filesystem.open_input_stream(name) as stream:
        data = stream.read()
    if name.endswith(".json"):
        actions = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        return [
            dict(a["add"]) if "add" in a else {"sidecar": a["sidecar"]["path"]}
            for a in actions
            if "add" in a or "sidecar" in a
        ]
    checkpoint = pq.ParquetFile(pa.BufferReader(data))
    schema = checkpoint.schema_arrow
    rows: list[dict[str, Any]] = [{} for _ in range(checkpoint.metadata.num_rows)]
    if "add" in schema.names:
        present = {f.name for f in schema.field("add").type}
        # Only the nested fields asked for: a wide table's stats stay unread when only vectors are wanted.
        for field in (f for f in fields if f in present):
            for row, value in zip(rows, _nested(checkpoint, "add", field), strict=True):
                row[field] = dict(value) if field in _MAPS and value is not None else value
    if "sidecar" in schema.names:
        for row, value in zip(rows, _nested(checkpoint, "sidecar", "path"), strict=True):
            row["sidecar"] = value
    return [
        {k: v for k, v in row.items() if v is not None}
        for row in rows
        if row.get("path") or row.get("sidecar")
    ]


def _nested(checkpoint: pq.ParquetFile, parent: str, field: str) -> list[Any]:
    """One field of a struct column, read alone (the leaf names of two fields would collide in one read)."""
    column = checkpoint.read(columns=[f"{parent}.{field}"]).column(0).combine_chunks()
    return list(column.field(field).to_pylist())
