"""A Delta table's state at one version, read from its log with ``deltalake`` (no Spark)."""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from airflow_provider_deltamerge.delta.format.column_mapping import logical_stats_columns, maps_columns
from airflow_provider_deltamerge.delta.format.deletion_vectors import DeletionVector
from airflow_provider_deltamerge.delta.log.live_adds import (
    add_actions_of,
    deletion_vectors_of,
    live_file_sizes,
)
from airflow_provider_deltamerge.delta.log.row_tracking import tracks_rows
from airflow_provider_deltamerge.delta.log.table_features import (
    Protocol,
    read_protocol,
    unreadable_features,
    unsupported_features_error,
)
from airflow_provider_deltamerge.exceptions import TargetTableError, UnsupportedFeaturesError
from airflow_provider_deltamerge.spec.delta_messages import delta_message

# The reader and writer feature of tables whose files may carry deletion vectors.
DELETION_VECTORS = "deletionVectors"


@dataclass(frozen=True)
class DataFile:
    """One data file of the snapshot, as its add action describes it."""

    log_path: str  # exactly as in the log (URI-encoded, relative to the table root)
    size: int
    partition_values: tuple[tuple[str, str | None], ...]
    num_records: int | None  # rows in the data file, those a deletion vector hides included
    deletion_vector: DeletionVector | None = None
    # Row tracking (delta/log/row_tracking.py): the id of the file's first row and the commit version of rows
    # that have none materialized; None on tables without the feature.
    base_row_id: int | None = None
    default_row_commit_version: int | None = None

    @property
    def logical_records(self) -> int | None:
        """The rows the table holds in this file: its rows less those its deletion vector hides."""
        if self.num_records is None or self.deletion_vector is None:
            return self.num_records
        return self.num_records - self.deletion_vector.cardinality

    @property
    def relative_path(self) -> str:
        """The file's path below the table root on the file system (the log path, decoded)."""
        return unquote(self.log_path)


@dataclass(frozen=True)
class Snapshot:
    """The files, schema and settings of a Delta table at ``version``."""

    table_uri: str
    version: int
    schema_json: str  # Delta's schema string, which is Spark's StructType JSON
    partition_columns: tuple[str, ...]
    configuration: tuple[tuple[str, str | None], ...]
    files: tuple[DataFile, ...]
    protocol: Protocol = field(default_factory=lambda: Protocol(1, 2))
    # The log's add actions with typed partition values and stats (``get_add_actions(flatten=True)``), one row
    # per entry of ``files``, in the same order: what file skipping reads.
    add_actions: pa.Table | None = field(default=None, compare=False, repr=False)

    def setting(self, key: str) -> str | None:
        """A table property (``delta.*``) from the metadata's configuration, or None if unset."""
        return dict(self.configuration).get(key)

    @property
    def num_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def schema(self) -> dict[str, Any]:
        return json.loads(self.schema_json)

    @property
    def on_local_disk(self) -> bool:
        """Whether the table is on this machine's file system (a path or a ``file:`` URI)."""
        scheme = urlparse(self.table_uri).scheme
        return len(scheme) <= 1 or scheme == "file"  # a one-letter scheme is a Windows drive letter

    @property
    def root_path(self) -> str:
        """The table root as a decoded path, no scheme or authority (what Spark's file paths start with)."""
        return table_root_path(self.table_uri)


def table_root_path(table_uri: str) -> str:
    parsed = urlparse(table_uri)
    if len(parsed.scheme) > 1:  # a one-letter scheme is a Windows drive letter
        return unquote(parsed.path).rstrip("/") or "/"
    return os.path.abspath(table_uri).rstrip("/") or "/"


def open_table(
    table_uri: str, version: int | None = None, *, storage_options: dict[str, str] | None = None
) -> DeltaTable:
    """Open the Delta table at ``table_uri`` (at ``version`` if given).

    Raises:
        TargetTableError: naming the path when there is no Delta table there.
        UnsupportedFeaturesError: the table has reader features ``deltalake`` cannot open it with (read from
            the log's protocol when the open fails), named with the way out.
    """
    try:
        return DeltaTable(table_uri, version=version, storage_options=storage_options)
    except TableNotFoundError as err:
        raise TargetTableError(
            delta_message("DELTA_TABLE_NOT_FOUND", tableName=table_uri)
            + " Check the target path (after templating), or create the table before merging into it.",
            error_class="DELTA_TABLE_NOT_FOUND",
        ) from err
    except DeltaError as err:
        unreadable = unreadable_features(read_protocol(table_uri, version, storage_options=storage_options))
        if not unreadable:
            raise
        raise unsupported_features_error(table_uri, unreadable) from err


def read_snapshot(table_uri: str, version: int | None = None) -> Snapshot:
    """Read the snapshot of ``table_uri``: its files with sizes, partition values and row counts."""
    table = open_table(table_uri, version)
    return snapshot_of(table, table_uri)


def table_size(
    table_uri: str, version: int, *, storage_options: dict[str, str] | None = None
) -> tuple[int, int]:
    """The files and bytes of the table at ``version``, as Delta's ``Snapshot.numOfFiles`` and
    ``sizeInBytes`` count them (the log's add actions; no deletion vector or data file is read).

    Raises:
        TargetTableError: when there is no Delta table at ``table_uri``.
    """
    try:
        table = open_table(table_uri, version, storage_options=storage_options)
    except UnsupportedFeaturesError:
        # deltalake cannot open the table (a merge of it runs on Delta's runtime): its log can be replayed.
        sizes = live_file_sizes(table_uri, version, storage_options=storage_options)
        return len(sizes), sum(sizes.values())
    adds = pa.table(table.get_add_actions())
    return adds.num_rows, sum(adds.column("size_bytes").to_pylist())


def snapshot_of(table: DeltaTable, table_uri: str) -> Snapshot:
    """The snapshot of an open table at the version it was loaded at."""
    metadata = table.metadata()
    protocol = table.protocol()
    partition_columns = tuple(metadata.partition_columns)
    adds = pa.table(table.get_add_actions(flatten=True))
    schema_json = table.schema().to_json()
    if maps_columns(metadata.configuration):
        # deltalake names stats columns by the physical paths the log keys them by; skipping uses logical.
        adds = adds.rename_columns(logical_stats_columns(adds.column_names, json.loads(schema_json)))
    columns = adds.to_pydict()
    # deltalake lists files without their deletion vectors and row ids: those come from the log itself.
    row_ids: dict[str, tuple[int | None, int | None]] = {}
    if tracks_rows(protocol.writer_features or ()):
        live = add_actions_of(
            table_uri,
            table.version(),
            columns["path"],
            fields=("path", "deletionVector", "baseRowId", "defaultRowCommitVersion"),
        )
        vectors = {
            path: vector
            for path, add in live.items()
            if (vector := DeletionVector.from_action(add.get("deletionVector"))) is not None
        }
        row_ids = {
            path: (add.get("baseRowId"), add.get("defaultRowCommitVersion")) for path, add in live.items()
        }
    elif DELETION_VECTORS in (protocol.reader_features or ()):
        vectors = deletion_vectors_of(table_uri, table.version(), columns["path"])
    else:
        vectors = {}
    files = tuple(
        DataFile(
            log_path=path,
            size=columns["size_bytes"][i],
            partition_values=tuple(
                (c, partition_value_string(columns[f"partition.{c}"][i])) for c in partition_columns
            ),
            num_records=columns["num_records"][i] if "num_records" in columns else None,
            deletion_vector=vectors.get(path),
            base_row_id=row_ids.get(path, (None, None))[0],
            default_row_commit_version=row_ids.get(path, (None, None))[1],
        )
        for i, path in enumerate(columns["path"])
    )
    return Snapshot(
        table_uri=table_uri,
        version=table.version(),
        schema_json=schema_json,
        partition_columns=partition_columns,
        configuration=tuple(sorted(metadata.configuration.items())),
        files=files,
        protocol=Protocol(
            protocol.min_reader_version,
            protocol.min_writer_version,
            tuple(protocol.reader_features or ()),
            tuple(protocol.writer_features or ()),
        ),
        add_actions=adds,
    )


def partition_value_string(value: object) -> str | None:
    """A typed partition value in the text form of the Delta log (protocol: Partition Value Serialization)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return str(value)
