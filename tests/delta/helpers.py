"""Helpers for the storage tests: hand-made Delta logs for table features deltalake cannot create."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable

FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "qty", "type": "integer", "nullable": True, "metadata": {}},
]


def craft_table(
    path: Path,
    *,
    reader: int = 1,
    writer: int = 2,
    reader_features: Sequence[str] | None = None,
    writer_features: Sequence[str] | None = None,
    configuration: Mapping[str, str] | None = None,
    fields: Sequence[Mapping[str, Any]] = FIELDS,
) -> str:
    """An empty Delta table whose first commit declares exactly the given protocol, properties and schema."""
    log = path / "_delta_log"
    log.mkdir(parents=True)
    protocol: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    if reader_features is not None:
        protocol["readerFeatures"] = list(reader_features)
    if writer_features is not None:
        protocol["writerFeatures"] = list(writer_features)
    metadata = {
        "id": "00000000-0000-0000-0000-000000000000",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": list(fields)}),
        "partitionColumns": [],
        "configuration": dict(configuration or {}),
        "createdTime": 0,
    }
    commit = [
        {"commitInfo": {"timestamp": 0, "operation": "CREATE TABLE"}},
        {"protocol": protocol},
        {"metaData": metadata},
    ]
    (log / "00000000000000000000.json").write_text("\n".join(json.dumps(a) for a in commit) + "\n")
    return str(path)


def files_on_disk_match_log(table: str) -> bool:
    """No data file in the table folder that the log does not reference (no litter of a failed merge)."""
    on_disk = {p.relative_to(table).as_posix() for p in Path(table).rglob("*.parquet")}
    in_log = pa.table(DeltaTable(table).get_add_actions(flatten=True))["path"].to_pylist()
    return on_disk == {unquote(p) for p in in_log}
