"""The actions of one kind (``protocol``, ``metaData``, ``domainMetadata``) in force at a version, read from
the log itself, newest first: what a reader needs where ``deltalake`` cannot open the table or omits it.

The newest action of a kind wins, so the commits are read newest first down to the newest checkpoint, then
the checkpoint (classic, multi-part or v2; protocol, metadata and domains are in its own files, never in a
v2 checkpoint's sidecars, which hold only file actions).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltamerge.delta.log.live_adds import checkpoint_files
from airflow_provider_deltamerge.delta.log.log_reader import LogReader


def newest_actions(reader: LogReader, version: int, kind: str) -> Iterator[dict[str, Any]]:
    """The ``kind`` actions of the table at ``version``, newest first (the first one met is in force)."""
    checkpoint = checkpoint_files(reader, version)
    first_commit = checkpoint[0] + 1 if checkpoint else 0
    for commit in range(version, first_commit - 1, -1):
        for action in reversed(reader.actions(commit)):
            if kind in action:
                yield action[kind]
    if checkpoint:
        for name in checkpoint[1]:
            yield from _checkpoint_actions(reader, name, kind)


def newest_action(reader: LogReader, version: int, kind: str) -> dict[str, Any] | None:
    """The ``kind`` action in force at ``version`` (a table has one protocol, one metaData); None if none."""
    return next(newest_actions(reader, version, kind), None)


def _checkpoint_actions(reader: LogReader, name: str, kind: str) -> list[dict[str, Any]]:
    """The ``kind`` actions of one checkpoint file (JSON or parquet), maps as dicts as in a commit."""
    with reader.filesystem.open_input_stream(name) as stream:
        data = stream.read()
    if name.endswith(".json"):
        actions = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        return [a[kind] for a in actions if kind in a]
    checkpoint = pq.ParquetFile(pa.BufferReader(data))
    if kind not in checkpoint.schema_arrow.names:
        return []
    rows = checkpoint.read(columns=[kind]).to_pylist(maps_as_pydicts="strict")
    return [row[kind] for row in rows if row[kind]]
