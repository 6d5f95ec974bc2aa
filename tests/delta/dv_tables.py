"""Tables with deletion vectors, made as Delta makes them (deltalake writes none): the table is turned to
protocol 3/7 with ``deletionVectors`` and ``delta.enableDeletionVectors=true``, then a commit swaps a file's
add action for one with a vector, as Delta's DELETE ... WHERE does with deletion vectors on.

The vectors are serialized with pyroaring's own 64-bit portable format behind Delta's framing, the layout
``tests/delta/test_deletion_vectors.py`` checks against a vector written by Delta itself.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from deltalake import DeltaTable
from pyroaring import BitMap64

from airflow_provider_deltamerge.delta.format.deletion_vectors import (
    DeletionVector,
    read_deleted_rows,
    serialize,
    stored_bytes,
    z85_encode,
)


def enable_deletion_vectors(table: str, *, enabled: bool = True) -> None:
    """Turn on deletion vectors: protocol 3/7 with the feature, and the table property ``enabled`` (off, a
    table keeps the vectors it has but writers add none: a table whose owner turned them off)."""
    dt = DeltaTable(table)
    metadata = dt.metadata()
    schema = dt.schema().to_json()
    configuration = {**metadata.configuration, "delta.enableDeletionVectors": str(enabled).lower()}
    _commit(
        table,
        dt.version() + 1,
        [
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": ["deletionVectors"],
                    "writerFeatures": ["deletionVectors", "appendOnly", "invariants"],
                }
            },
            {
                "metaData": {
                    "id": metadata.id,
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": schema,
                    "partitionColumns": list(metadata.partition_columns),
                    "configuration": configuration,
                    "createdTime": metadata.created_time,
                }
            },
        ],
        operation="SET TBLPROPERTIES",
    )


def delete_rows(
    table: str, rows: Mapping[str, Iterable[int]], *, inline: bool = False, prefix: str = ""
) -> None:
    """Mark ``rows`` (row indexes by the file's log path) deleted in one commit, as Delta's DELETE does with
    deletion vectors: a new vector holding the file's old deleted rows and the new ones replaces the old."""
    dt = DeltaTable(table)
    adds = {a["path"]: a for a in _add_actions(table)}
    actions: list[dict[str, Any]] = []
    now = int(time.time() * 1000)
    for path, indexes in rows.items():
        add = adds[path]
        old = DeletionVector.from_action(add.get("deletionVector"))
        deleted = BitMap64(indexes)
        if old is not None:
            deleted |= read_deleted_rows(table, old)
        vector = _write_vector(table, deleted, inline=inline, prefix=prefix)
        actions.append({"remove": _remove(add, now)})
        actions.append({"add": {**add, "deletionVector": vector.to_action(), "dataChange": True}})
    _commit(table, dt.version() + 1, actions, operation="DELETE")


def _write_vector(table: str, deleted: BitMap64, *, inline: bool, prefix: str) -> DeletionVector:
    if inline:
        data = serialize(deleted)
        return DeletionVector("i", z85_encode(data), len(data), len(deleted))
    name = uuid.uuid4()
    folder = Path(table) / prefix
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"deletion_vector_{name}.bin").write_bytes(stored_bytes(deleted))
    size = len(serialize(deleted))
    return DeletionVector("u", prefix + z85_encode(name.bytes), size, len(deleted), offset=1)


def _remove(add: Mapping[str, Any], now: int) -> dict[str, Any]:
    remove = {
        "path": add["path"],
        "deletionTimestamp": now,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": add.get("partitionValues", {}),
        "size": add["size"],
    }
    if add.get("deletionVector"):
        remove["deletionVector"] = add["deletionVector"]
    return remove


def _add_actions(table: str) -> list[dict[str, Any]]:
    """The live add actions, as the JSON commits wrote them (the last one per path wins)."""
    live: dict[str, dict[str, Any]] = {}
    for commit in sorted((Path(table) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return list(live.values())


def data_file_paths(table: str) -> list[str]:
    """The table's data files as the log names them, sorted."""
    return sorted(a["path"] for a in _add_actions(table))


def data_file(table: str, log_path: str) -> Path:
    return Path(table) / unquote(log_path)


def _commit(table: str, version: int, actions: list[dict[str, Any]], *, operation: str) -> None:
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": operation}}
    text = "".join(json.dumps(a) + "\n" for a in [info, *actions])
    (Path(table) / "_delta_log" / f"{version:020d}.json").write_text(text)
