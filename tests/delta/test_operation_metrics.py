"""A delta-spark MERGE commit's metrics read from the log: the commit shapes the backend's tests do not make.

The commits are written by hand, line for line as Delta's runtime writes a MERGE (which cannot run here),
into tables written by deltalake; nothing else is faked.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.operation_metrics import delta_merge_metrics
from tests.conftest import make_table

MERGED = {"numTargetRowsUpdated": "1", "numTargetFilesAdded": "1", "numTargetFilesRemoved": "1"}


def delta_commit(table: Path, info: dict[str, Any], *actions: dict[str, Any]) -> int:
    """Write the table's next commit as Delta's MERGE does: commitInfo first, then the file actions."""
    log = table / "_delta_log"
    version = max(int(f.stem) for f in log.glob("*.json")) + 1
    lines = [{"commitInfo": {"timestamp": 1, "operation": "MERGE", **info}}, *actions]
    (log / f"{version:020d}.json").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return version


def remove(path: str, **partition: str) -> dict[str, Any]:
    values = {"partitionValues": partition} if partition else {}
    return {"remove": {"path": path, "deletionTimestamp": 1, "dataChange": True, "size": 10, **values}}


def add(path: str, size: int = 10, **partition: str) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": partition, "size": size, "dataChange": True}}


def first_file(table: Path) -> str:
    """The log path of a file of version 0 (deltalake writes one per partition)."""
    commit = (table / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    return next(json.loads(line)["add"]["path"] for line in commit if '"add"' in line)


def test_a_remove_that_does_not_name_its_partition_leaves_removed_from_unmeasured(tmp_path):
    # Given: a partitioned table, and a commit whose remove lacks partitionValues (no extended metadata)
    table = Path(make_table(tmp_path / "t", partition_by=["region"]))
    old = first_file(table)
    info = {"readVersion": 0, "operationMetrics": MERGED}
    version = delta_commit(table, info, remove(old), add("region=eu/new.parquet", region="eu"))
    # When
    metrics = delta_merge_metrics(str(table), version)
    # Then: not a made-up 0; what the adds say is still counted
    assert metrics[m.NUM_TARGET_PARTITIONS_REMOVED_FROM] is None
    assert metrics[m.NUM_TARGET_PARTITIONS_ADDED_TO] == 1


def test_without_a_read_version_files_before_skipping_are_unmeasured(tmp_path):
    table = Path(make_table(tmp_path / "t", partition_by=["region"]))
    version = delta_commit(table, {"operationMetrics": MERGED}, add("region=us/new.parquet", region="us"))
    metrics = delta_merge_metrics(str(table), version)
    assert metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] is None
    assert metrics[m.NUM_TARGET_BYTES_BEFORE_SKIPPING] is None


def test_a_read_version_cleaned_from_the_log_is_unmeasured_and_said(tmp_path, caplog):
    # Given: the commit's read version 0 is gone from the log (no checkpoint covers it)
    table = Path(make_table(tmp_path / "t"))
    info = {"readVersion": 0, "operationMetrics": MERGED}
    version = delta_commit(table, info, add("new.parquet"))
    (table / "_delta_log" / f"{0:020d}.json").unlink()
    # When
    with caplog.at_level(logging.WARNING):
        metrics = delta_merge_metrics(str(table), version)
    # Then
    assert metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] is None
    assert "The snapshot at version 0" in caplog.text
    assert metrics[m.NUM_TARGET_ROWS_UPDATED] == 1


def test_change_file_bytes_are_the_commits_cdc_sizes_and_delta_s_own_values_win(tmp_path):
    # Given: a commit with two change data files, whose operationMetrics (a later Delta) has partitions
    table = Path(make_table(tmp_path / "t", partition_by=["region"]))
    cdc = [
        {
            "cdc": {
                "path": f"_change_data/region=us/cdc-{n}.parquet",
                "partitionValues": {"region": "us"},
                "size": size,
                "dataChange": False,
            }
        }
        for n, size in enumerate((700, 35))
    ]
    info = {"readVersion": 0, "operationMetrics": {**MERGED, "numTargetPartitionsAddedTo": "7"}}
    version = delta_commit(table, info, remove(first_file(table), region="eu"), *cdc)
    # When
    metrics = delta_merge_metrics(str(table), version)
    # Then: cdc files are not data files added to a partition (Delta counts AddFiles only)
    assert metrics[m.NUM_TARGET_CHANGE_FILE_BYTES] == 735
    assert metrics[m.NUM_TARGET_PARTITIONS_REMOVED_FROM] == 1
    assert metrics[m.NUM_TARGET_PARTITIONS_ADDED_TO] == 7  # Delta's value, not the log's 0
    assert metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 2  # deltalake wrote one file per region
