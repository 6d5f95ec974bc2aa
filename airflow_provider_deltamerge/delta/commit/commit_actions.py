"""The actions of a merge commit, written as Delta writes a MERGE (PROTOCOL.md "Actions"): commitInfo first,
then metaData when the schema evolved, txn for the Airflow run, the files removed and added, and the change
data feed's files.

The text is made again for each attempt, since only the commit's timestamps depend on the version it lands
at; everything else is fixed when the merge's files are written.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_deltamerge.delta.commit.added_files import ChangeFile, WrittenFile
from airflow_provider_deltamerge.delta.format.column_mapping import (
    MAX_COLUMN_ID_KEY,
    maps_columns,
    max_column_id,
    stored_name,
)
from airflow_provider_deltamerge.delta.format.provenance import COMMIT_INFO_KEY
from airflow_provider_deltamerge.delta.format.type_changes import with_type_change_version
from airflow_provider_deltamerge.delta.log.row_tracking import DOMAIN as ROW_TRACKING_DOMAIN
from airflow_provider_deltamerge.delta.log.row_tracking import domain_metadata
from airflow_provider_deltamerge.delta.log.snapshot import DataFile, Snapshot

# The table property that turns on in-commit timestamps (writer feature inCommitTimestamp).
IN_COMMIT_TIMESTAMPS = "delta.enableInCommitTimestamps"


@dataclass(frozen=True)
class TableMetadata:
    """The parts of the table's metaData action a schema change keeps (PROTOCOL.md "Change Metadata")."""

    id: str
    name: str | None
    description: str | None
    created_time: int | None


@dataclass(frozen=True)
class MergeCommitActions:
    """Everything a merge commits, before it knows the version it lands at."""

    snapshot: Snapshot  # the version the merge read
    removed: Sequence[DataFile]
    added: Sequence[WrittenFile]
    operation_parameters: Mapping[str, str]
    operation_metrics: Mapping[str, int]
    info: Mapping[str, Any]
    engine_info: str
    schema: str | None = None  # the evolved schema, Delta's JSON form
    metadata: TableMetadata | None = None  # required with ``schema``
    # Add actions of removed files coming back under a new deletion vector (deletion_vector_writes).
    readded: Sequence[Mapping[str, Any]] = ()
    change_files: Sequence[ChangeFile] = ()  # the change data feed's files
    txn_id: str = field(default_factory=lambda: str(uuid.uuid4()))  # the same for every attempt

    def lines(
        self,
        *,
        timestamp: int,
        in_commit_timestamp: int | None,
        version: int | None = None,
        row_id_high_water_mark: int | None = None,
    ) -> bytes:
        """The commit file's text: one JSON action per line (newline-delimited, as Delta reads it).

        Args:
            version: the version the commit lands at.
            row_id_high_water_mark: under row tracking, the table's mark at ``version - 1``: each added file
                gets the row ids above it (``baseRowId``) and ``version`` as its ``defaultRowCommitVersion``,
                and the new mark is committed as the ``delta.rowTracking`` domain's metadata.
        """
        actions: list[dict[str, Any]] = []
        if self.schema is not None:
            actions.append({"metaData": self._metadata(version)})
        txn = _txn(self.info, timestamp)
        if txn is not None:
            actions.append({"txn": txn})
        stored = _stored_names(self.snapshot)
        actions += [{"remove": _remove(f, timestamp, stored)} for f in self.removed]
        adds = [_add(f, stored) for f in self.added]
        mark = row_id_high_water_mark
        if mark is not None:
            if version is None:
                raise ValueError("row ids need the version the commit lands at")
            for add, file in zip(adds, self.added, strict=True):
                add.update(baseRowId=mark + 1, defaultRowCommitVersion=version)
                mark += file.num_records
        actions += [{"add": add} for add in adds]
        actions += [{"add": dict(add)} for add in self.readded]  # as the log has them
        actions += [{"cdc": _cdc(f, stored)} for f in self.change_files]
        if mark is not None and adds:
            actions.append({"domainMetadata": domain_metadata(mark)})
        info = self._commit_info(timestamp, in_commit_timestamp, _isolation_level(actions))
        lines = [{"commitInfo": info}, *actions]
        return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in lines).encode()

    def _commit_info(
        self, timestamp: int, in_commit_timestamp: int | None, isolation_level: str
    ) -> dict[str, Any]:
        # With in-commit timestamps on, commitInfo must come first and carry the commit's time (PROTOCOL.md
        # "In-Commit Timestamps"); readers then take that instead of the file's modification time, and so do
        # those that read commitInfo's timestamp (deltalake's history).
        return {
            **({"inCommitTimestamp": in_commit_timestamp} if in_commit_timestamp is not None else {}),
            "timestamp": in_commit_timestamp if in_commit_timestamp is not None else timestamp,
            "operation": "MERGE",
            "operationParameters": dict(self.operation_parameters),
            "readVersion": self.snapshot.version,
            "isolationLevel": isolation_level,
            # A merge reads the target (even an insert-only one, to leave out the rows that match).
            "isBlindAppend": False,
            # Delta keeps every operation metric as a string.
            "operationMetrics": {name: str(value) for name, value in self.operation_metrics.items()},
            "engineInfo": self.engine_info,
            "txnId": self.txn_id,
            COMMIT_INFO_KEY: dict(self.info),
        }

    def _metadata(self, version: int | None) -> dict[str, Any]:
        if self.metadata is None or self.schema is None:
            raise ValueError("a schema change needs the table's metadata")
        # Type changes of a typeWidening-preview table name the version they were planned for, the one after
        # the snapshot's; a rebased commit lands later.
        planned = self.snapshot.version + 1
        schema = self.schema
        if version is not None and version != planned:
            schema = with_type_change_version(schema, planned, version)
        return {
            "id": self.metadata.id,
            **({"name": self.metadata.name} if self.metadata.name is not None else {}),
            **({"description": self.metadata.description} if self.metadata.description is not None else {}),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema,
            "partitionColumns": list(self.snapshot.partition_columns),
            "configuration": self._configuration(),
            **({"createdTime": self.metadata.created_time} if self.metadata.created_time is not None else {}),
        }

    def _configuration(self) -> dict[str, str]:
        """The table's properties; under column mapping, the largest column id the new schema gives."""
        configuration = {k: v for k, v in self.snapshot.configuration if v is not None}
        if self.schema is not None and maps_columns(configuration):
            configuration[MAX_COLUMN_ID_KEY] = str(max_column_id(configuration, self.schema))
        return configuration


def _isolation_level(actions: Sequence[Mapping[str, Any]]) -> str:
    """The isolation level Delta records for a commit of ``actions`` (commitInfo aside) on a Serializable
    table, the only level Delta Lake's tables take: SnapshotIsolation when no file action changes data and
    no other action but row tracking's domain is there (an empty commit, recorded when
    skipRecordingEmptyCommits is off), as OptimisticTransaction.canDowngradeToSnapshotIsolation decides."""
    for action in actions:
        [(kind, body)] = action.items()
        if kind in ("add", "remove", "cdc") and not body.get("dataChange"):
            continue
        if kind == "domainMetadata" and body.get("domain") == ROW_TRACKING_DOMAIN:
            continue
        return "Serializable"
    return "SnapshotIsolation"


def _stored_names(snapshot: Snapshot) -> dict[str, str]:
    """The names the log keys partition values by: physical names under column mapping, else the
    columns' own (which the engine's files use)."""
    if not maps_columns(dict(snapshot.configuration)):
        return {}
    return {f["name"]: stored_name(f) for f in snapshot.schema["fields"]}


def _stored(values: tuple[tuple[str, str | None], ...], stored: Mapping[str, str]) -> dict[str, str | None]:
    return {stored.get(name, name): value for name, value in values}


def _txn(info: Mapping[str, Any], timestamp: int) -> dict[str, Any] | None:
    """The Airflow task instance as a Delta application transaction, so other Delta writers see the run.

    The try number only grows within a task instance (clears included), as a txn version must.
    """
    if not info.get("dagId") or not info.get("runId"):
        return None
    app_id = "/".join(str(info.get(k, "")) for k in ("dagId", "taskId", "runId", "mapIndex"))
    version = int(info.get("tryNumber") or 1)
    return {"appId": f"airflow:{app_id}", "version": version, "lastUpdated": timestamp}


def _remove(file: DataFile, timestamp: int, stored: Mapping[str, str]) -> dict[str, Any]:
    # The logical file is its path and its deletion vector: a remove naming the path alone misses it.
    vector = {"deletionVector": file.deletion_vector.to_action()} if file.deletion_vector else {}
    return {
        "path": file.log_path,  # exactly as the add action wrote it
        "deletionTimestamp": timestamp,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": _stored(file.partition_values, stored),
        "size": file.size,
        **vector,
    }


def _cdc(file: ChangeFile, stored: Mapping[str, str]) -> dict[str, Any]:
    # Change files are not data changes: the commit's adds and removes are (PROTOCOL.md "Add CDC File").
    return {
        "path": file.log_path,
        "partitionValues": _stored(file.partition_values, stored),
        "size": file.size,
        "dataChange": False,
    }


def _add(file: WrittenFile, stored: Mapping[str, str]) -> dict[str, Any]:
    return {
        "path": file.log_path,
        "partitionValues": _stored(file.partition_values, stored),
        "size": file.size,
        "modificationTime": file.modification_time,
        "dataChange": True,
        "stats": file.stats,
    }
