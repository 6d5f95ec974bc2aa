"""Deletion vectors, written: a merge into a table with ``delta.enableDeletionVectors=true`` marks the rows it
updates or deletes in each touched file's vector instead of copying the file's other rows (Delta's
``ClassicMergeExecutor.writeDVs`` and ``DMLWithDeletionVectorsHelper.processUnmodifiedData``).

Each touched file leaves the table as the logical file it was (a remove naming its old vector) and comes back
under a new vector holding its old hidden rows and the merge's modified ones, with its stats turned to wide
bounds; a file whose every row is gone is removed outright. The new vectors of one merge go in one
``deletion_vector_<uuid>.bin`` file beside the data, written after the guards and before the commit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import obstore
from pyroaring import BitMap64

from airflow_provider_deltamerge.delta.commit.log_store import log_store, object_store, put_file
from airflow_provider_deltamerge.delta.format.deletion_vectors import (
    FILE_FORMAT_VERSION,
    DeletionVector,
    framed,
    read_deleted_rows,
    serialize,
    z85_encode,
)
from airflow_provider_deltamerge.delta.log.live_adds import add_actions_of
from airflow_provider_deltamerge.delta.log.snapshot import DELETION_VECTORS, DataFile, Snapshot

ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"


def writes_deletion_vectors(snapshot: Snapshot) -> bool:
    """Whether a merge into ``snapshot`` marks rows in deletion vectors rather than copying files.

    As Delta: only with the table property on (PROTOCOL.md: writers write new vectors only then). The
    engine needs its own commit for it (``deltalake``'s transaction cannot name a vector) and every file's
    row count (a file with a vector must have ``numRecords``); without either it copies the rows.
    """
    return (
        (snapshot.setting(ENABLE_DELETION_VECTORS) or "").lower() == "true"
        and DELETION_VECTORS in snapshot.protocol.writer_features
        and log_store(snapshot.table_uri) is not None
        and all(f.num_records is not None for f in snapshot.files)
    )


@dataclass(frozen=True)
class VectorChange:
    """A touched file and every row of it hidden after the merge (its old vector's and the modified ones)."""

    file: DataFile
    hidden: BitMap64

    @property
    def removes_file(self) -> bool:
        """Every row of the file is gone: it is removed, with no vector to keep."""
        return len(self.hidden) >= (self.file.num_records or 0)

    @property
    def kept_rows(self) -> int:
        """The rows the file still holds in the table after the merge."""
        return 0 if self.removes_file else (self.file.num_records or 0) - len(self.hidden)


def vector_changes(
    snapshot: Snapshot, touched: Sequence[DataFile], modified: Mapping[str, Sequence[int]]
) -> tuple[VectorChange, ...]:
    """Each touched file with its rows ``modified`` (row indexes by log path) added to its old vector."""
    changes = []
    for file in touched:
        hidden = BitMap64(modified.get(file.log_path, ()))
        vector = file.deletion_vector
        if vector is not None:
            hidden |= read_deleted_rows(snapshot.table_uri, vector, num_records=file.num_records)
        changes.append(VectorChange(file, hidden))
    return tuple(changes)


@dataclass(frozen=True)
class WrittenVectors:
    """The add actions re-adding files under their new vectors, and the vector file they read from."""

    readded: tuple[dict[str, Any], ...]
    file_name: str | None  # relative to the table root; None when no vector was needed


NO_VECTORS = WrittenVectors((), None)


def write_vectors(snapshot: Snapshot, changes: Sequence[VectorChange]) -> WrittenVectors:
    """Write the kept files' new vectors into one ``.bin`` file and make their add actions.

    The file holds a version byte, then for each vector its size, data and CRC-32 (big-endian, as
    PROTOCOL.md "Deletion Vector File Storage Format"); each descriptor's offset points at its size.
    """
    kept = [c for c in changes if not c.removes_file]
    if not kept:
        return NO_VECTORS
    name = uuid.uuid4()
    body = bytearray(FILE_FORMAT_VERSION)
    vectors = []
    for change in kept:
        data = serialize(change.hidden)
        vectors.append(DeletionVector("u", z85_encode(name.bytes), len(data), len(change.hidden), len(body)))
        body += framed(data)
    file_name = f"deletion_vector_{name}.bin"
    put_file(object_store(snapshot.table_uri), file_name, bytes(body))
    adds = add_actions_of(snapshot.table_uri, snapshot.version, [c.file.log_path for c in kept])
    readded = tuple(
        _readded(adds[change.file.log_path], change.file, vector)
        for change, vector in zip(kept, vectors, strict=True)
    )
    return WrittenVectors(readded, file_name)


def discard_vectors(snapshot: Snapshot, written: WrittenVectors) -> None:
    """Delete a vector file no commit will reference."""
    if written.file_name is not None:
        obstore.delete(object_store(snapshot.table_uri), written.file_name)


def _readded(add: Mapping[str, Any], file: DataFile, vector: DeletionVector) -> dict[str, Any]:
    """The file's add action under its new vector, its stats turned to wide bounds (Delta's
    ``updateStatsToWideBounds``): the min/max may now belong to hidden rows; its row ids as they were."""
    return {
        "path": file.log_path,
        "partitionValues": dict(add.get("partitionValues") or file.partition_values),
        "size": file.size,
        "modificationTime": add.get("modificationTime", 0),
        "dataChange": True,
        "stats": _wide_bounds(add.get("stats"), file),
        **({"tags": add["tags"]} if add.get("tags") else {}),
        "deletionVector": vector.to_action(),
        # Row tracking: the rows it keeps keep their ids and commit versions (delta/log/row_tracking.py).
        **{k: add[k] for k in ("baseRowId", "defaultRowCommitVersion") if add.get(k) is not None},
    }


def _wide_bounds(stats: str | None, file: DataFile) -> str:
    """``stats`` with ``tightBounds`` false; a column all NULL among the visible rows under tight bounds gets
    the physical row count as its null count (Delta keeps it right for the wide state)."""
    parsed: dict[str, Any] = json.loads(stats) if stats else {}
    physical = int(parsed.get("numRecords", file.num_records or 0))
    parsed["numRecords"] = physical
    tight = parsed.get("tightBounds", True)
    logical = physical - (file.deletion_vector.cardinality if file.deletion_vector else 0)

    def widen(counts: Any) -> Any:
        if isinstance(counts, dict):
            return {k: widen(v) for k, v in counts.items()}
        return physical if tight and counts == logical else counts

    if "nullCount" in parsed:
        parsed["nullCount"] = widen(parsed["nullCount"])
    parsed["tightBounds"] = False
    return json.dumps(parsed, separators=(",", ":"))
