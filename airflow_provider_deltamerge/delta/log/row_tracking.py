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

from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.newest_actions import newest_actions

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
    """The table's row id high-water mark at ``version``: the newest ``delta.rowTracking`` domain metadata
    (commits down to the newest checkpoint, then the checkpoint); ``NO_ROW_IDS`` without."""
    for domain in newest_actions(LogReader(table_uri), version, "domainMetadata"):
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
