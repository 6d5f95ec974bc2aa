"""Row tracking (PROTOCOL.md "Row Tracking"): the row ids and commit versions a merge keeps and assigns.

A row's id is its file's materialized row id column where that is set, else the file's ``baseRowId`` plus
the row's index in the file; its commit version is the materialized commit version column where set, else
the file's ``defaultRowCommitVersion``. A writer gives every file it adds a ``baseRowId`` above the table's
high-water mark (the ``delta.rowTracking`` domain's ``rowIdHighWaterMark``) and the commit's version as
``defaultRowCommitVersion``, and commits the new mark in the same commit; rows it copies keep their id and
commit version in the materialized columns, rows it updates keep their id there (their commit version
becomes the commit's), rows it inserts leave both NULL. Delta names the two columns in table properties.

Pure Python: the commit assigns the ids when it knows the version it lands at (after any rebase over
concurrent commits, whose marks it reads again).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltamerge.delta.log.live_adds import checkpoint_files
from airflow_provider_deltamerge.delta.log.log_reader import LogReader

FEATURE = "rowTracking"
DOMAIN = "delta.rowTracking"
HIGH_WATER_MARK_KEY = "rowIdHighWaterMark"
ROW_ID_COLUMN_KEY = "delta.rowTracking.materializedRowIdColumnName"
ROW_COMMIT_VERSION_COLUMN_KEY = "delta.rowTracking.materializedRowCommitVersionColumnName"
# The mark of a table that has assigned no row id yet.
NO_ROW_IDS = -1


@dataclass(frozen=True)
class MaterializedColumns:
    """The data-file columns a table keeps preserved row ids and commit versions in (Delta's names)."""

    row_id: str
    row_commit_version: str

    @property
    def names(self) -> tuple[str, str]:
        return self.row_id, self.row_commit_version


def tracks_rows(writer_features: Iterable[str]) -> bool:
    """Whether the table's writers must assign row ids (the feature is supported, enabled or not)."""
    return FEATURE in set(writer_features)


def materialized_columns(configuration: dict[str, str | None]) -> MaterializedColumns | None:
    """The materialized columns the table's properties name; None when either is unnamed."""
    row_id, version = configuration.get(ROW_ID_COLUMN_KEY), configuration.get(ROW_COMMIT_VERSION_COLUMN_KEY)
    return MaterializedColumns(row_id, version) if row_id and version else None


def high_water_mark(table_uri: str, version: int) -> int:
    """The table's row id high-water mark at ``version``: the newest ``delta.rowTracking`` domain metadata,
    read from the commits down to the newest checkpoint, then from the checkpoint; ``NO_ROW_IDS`` without."""
    reader = LogReader(table_uri)
    checkpoint = checkpoint_files(reader, version)
    first_commit = checkpoint[0] + 1 if checkpoint else 0
    for commit in range(version, first_commit - 1, -1):
        for action in reversed(reader.actions(commit)):
            domain = action.get("domainMetadata")
            if domain and domain.get("domain") == DOMAIN:
                return _mark(domain)
    if checkpoint:
        for name in checkpoint[1]:
            for domain in _checkpoint_domains(reader, name):
                if domain.get("domain") == DOMAIN:
                    return _mark(domain)
    return NO_ROW_IDS


def domain_metadata(mark: int) -> dict[str, Any]:
    """The ``domainMetadata`` action that records ``mark``, as Delta writes it."""
    configuration = json.dumps({HIGH_WATER_MARK_KEY: mark, "domainName": DOMAIN}, separators=(",", ":"))
    return {"domain": DOMAIN, "configuration": configuration, "removed": False}


def _mark(domain: dict[str, Any]) -> int:
    if domain.get("removed"):
        return NO_ROW_IDS
    return int(json.loads(domain["configuration"]).get(HIGH_WATER_MARK_KEY, NO_ROW_IDS))


def _checkpoint_domains(reader: LogReader, name: str) -> list[dict[str, Any]]:
    """The domainMetadata actions of one checkpoint file (JSON or parquet)."""
    with reader.filesystem.open_input_stream(name) as stream:
        data = stream.read()
    if name.endswith(".json"):
        actions = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        return [a["domainMetadata"] for a in actions if "domainMetadata" in a]
    checkpoint = pq.ParquetFile(pa.BufferReader(data))
    if "domainMetadata" not in checkpoint.schema_arrow.names:
        return []
    column = checkpoint.read(columns=["domainMetadata"]).column(0).to_pylist()
    return [dict(d) for d in column if d]
