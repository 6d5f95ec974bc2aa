"""The metrics of a MERGE commit made by Delta's own runtime (the delta-spark backend), read from the log.

Delta's commit keeps only ``DeltaOperationMetrics.MERGE`` in ``commitInfo.operationMetrics`` (Delta's
``DeltaOperations.scala``): the row counts, files and bytes added and removed, change files added, deletion
vectors, ``numOutputRows`` and the four timings. ``MergeIntoCommandBase.baseMetrics`` declares more, which
Delta measures in Spark SQL metrics and leaves out of the commit. Of those, some are exact functions of the
log, computed here as Delta's merge executors compute them:

* ``numTargetFilesBeforeSkipping`` / ``numTargetBytesBeforeSkipping``: ``deltaTxn.snapshot.numOfFiles`` and
  ``sizeInBytes``, the snapshot at the commit's ``readVersion``;
* ``numTargetPartitionsRemovedFrom`` / ``numTargetPartitionsAddedTo``: distinct ``partitionValues`` of the
  files the commit removed for good and of the data files it added (``totalBytesAndDistinctPartitionValues``,
  0 for an unpartitioned table); a file re-added under a new deletion vector is neither;
* ``numTargetChangeFileBytes``: the sizes of the commit's ``cdc`` actions.

The others (files, bytes and partitions after skipping, ``numSourceRowsInSecondScan``) exist only in
Delta's SQL metrics: the backend reads them from the executed command (``engine/backends/
delta_command_metrics.py``); read from the log alone (a retry that finds its run committed, Spark Connect)
they are None (not measured), never 0, so a consumer cannot mistake them for counts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from deltalake.exceptions import DeltaError

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.snapshot import table_size
from airflow_provider_deltamerge.exceptions import TargetTableError

log = logging.getLogger(__name__)

# The executor name the delta-spark backend records in its commits' provenance.
DELTA_SPARK_EXECUTOR = "delta-spark"


def delta_merge_metrics(
    table_uri: str, version: int, *, storage_options: Mapping[str, str] | None = None
) -> dict[str, m.MetricValue]:
    """Every declared metric of Delta's MERGE commit at ``version``: Delta's ``operationMetrics`` as numbers,
    what the log gives for the ones it lacks (see the module's docstring), None for the rest.

    Raises:
        TargetTableError: the commit file of ``version`` is gone (log clean-up).
    """
    actions = LogReader(table_uri, storage_options).actions(version)
    info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    derived = {
        **before_skipping(table_uri, info.get("readVersion"), storage_options),
        **_partitions_and_change_bytes(actions),
    }
    recorded = {
        k: int(v) for k, v in (info.get("operationMetrics") or {}).items() if k in m.METRIC_DESCRIPTIONS
    }
    # Delta's own value wins where its commit has one; anything neither recorded nor derived was not measured.
    metrics: dict[str, m.MetricValue] = {**dict.fromkeys(m.METRIC_DESCRIPTIONS), **derived, **recorded}
    return metrics


def before_skipping(
    table_uri: str, read_version: Any, storage_options: Mapping[str, str] | None = None
) -> dict[str, m.MetricValue]:
    """Files and bytes of the snapshot Delta's merge read (``readVersion``); {} (not measured) when no read
    version is known or that version can no longer be loaded (its commits cleaned up)."""
    if not isinstance(read_version, int):
        return {}
    try:
        files, size = table_size(table_uri, read_version, storage_options=dict(storage_options or {}) or None)
    except (TargetTableError, DeltaError) as err:
        log.warning("The snapshot at version %d of %s cannot be read: %s", read_version, table_uri, err)
        return {}
    return {m.NUM_TARGET_FILES_BEFORE_SKIPPING: files, m.NUM_TARGET_BYTES_BEFORE_SKIPPING: size}


def _partitions_and_change_bytes(actions: list[dict[str, Any]]) -> dict[str, m.MetricValue]:
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    # Under deletion vectors Delta removes a touched file and adds it back with its new vector (same path):
    # such a file was neither removed from nor added to its partition.
    re_added = {a["path"] for a in adds} & {r["path"] for r in removes}
    removed = [r for r in removes if r["path"] not in re_added]
    # A remove written without extended file metadata does not say its partition: then it is not measured.
    partitions_known = all("partitionValues" in r for r in removed)
    return {
        m.NUM_TARGET_PARTITIONS_REMOVED_FROM: (
            m.count_partitions(_partition_key(r) for r in removed) if partitions_known else None
        ),
        m.NUM_TARGET_PARTITIONS_ADDED_TO: m.count_partitions(
            _partition_key(a) for a in adds if a["path"] not in re_added
        ),
        m.NUM_TARGET_CHANGE_FILE_BYTES: sum(int(a["cdc"]["size"]) for a in actions if "cdc" in a),
    }


def _partition_key(action: Mapping[str, Any]) -> str:
    """A file action's partition as one comparable value; empty for an unpartitioned table's file."""
    values = action.get("partitionValues") or {}
    return json.dumps(values, sort_keys=True) if values else ""
