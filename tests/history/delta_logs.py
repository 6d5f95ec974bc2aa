"""Delta tables with many commits, made cheaply: merge-like commits written through deltalake, and long logs.

A real deltalake commit costs tens of milliseconds (it reloads the table), so a 10,000-commit log is grown by
copying one real commit's file under the next version numbers; deltalake checkpoints it on the way and the
tests open it with deltalake, which fail on a log deltalake cannot read.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from tests.airflow.conftest import merge_commit

# The logical date of the first daily run; run n's is n - 1 days later.
FIRST_LOGICAL_DATE = datetime(2026, 1, 1, tzinfo=UTC)


def logical_date(n: int) -> datetime:
    return FIRST_LOGICAL_DATE + timedelta(days=n - 1)


def provenance(n: int, *, dag_id: str = "orders_daily") -> dict[str, Any]:
    """A provenance record as DeltaMergeOperator writes it, for the ``n``-th daily run."""
    return {
        "dagId": dag_id,
        "taskId": "merge",
        "runId": f"scheduled__{n:04d}",
        "executor": "classic",
        "logicalDate": logical_date(n).isoformat(),
    }


def merge_metrics(n: int) -> dict[str, int]:
    """A small daily merge's metrics: 1 to 4 rows inserted, 1 to 2 updated, 0 or 1 deleted."""
    return {
        "numTargetRowsInserted": 1 + n % 4,
        "numTargetRowsUpdated": 1 + n % 2,
        "numTargetRowsDeleted": n % 2,
        "numTargetRowsCopied": 100,
        "numTargetFilesAdded": 2,
        "numTargetFilesRemoved": 1,
        "numTargetBytesAdded": 4096,
        "executionTimeMs": 1000 + n,
    }


def table_with_merges(path: Path, merges: int) -> str:
    """A table written by delta-rs (version 0) and then ``merges`` merge commits carrying our record."""
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    for n in range(1, merges + 1):
        merge_commit(str(path), metrics=merge_metrics(n), provenance=provenance(n))
    return str(path)


def long_log(path: Path, commits: int, *, since_checkpoint: int = 57) -> str:
    """A table of ``commits`` + 1 versions: every one after version 1 a copy of the real merge commit 1 (its
    metrics numbered by version), checkpointed by deltalake ``since_checkpoint`` commits before the end."""
    table_with_merges(path, 1)
    log = path / "_delta_log"
    template = json.loads((log / f"{1:020d}.json").read_text().splitlines()[0])
    info = template["commitInfo"]
    for version in range(2, commits + 1):
        info["operationMetrics"] = {k: str(v) for k, v in merge_metrics(version).items()}
        info["deltamerge"] = provenance(version)
        (log / f"{version:020d}.json").write_text(json.dumps(template) + "\n")
        if version == commits - since_checkpoint:
            DeltaTable(str(path)).create_checkpoint()
    return str(path)


def other_writer_commit(table: str) -> None:
    """An append by delta-rs itself, with no provenance record (another writer)."""
    write_deltalake(table, pa.table({"id": pa.array([9], pa.int64())}), mode="append")
