"""Airflow-side consumers of merge metrics: Delta tables whose commits look like ours, and the real CLI."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties

from airflow_provider_deltamerge.delta.format.provenance import COMMIT_INFO_KEY
from tests.e2e.conftest import airflow_env, run_airflow, xcom_value

__all__ = ["DAGS", "airflow_env", "make_table", "merge_commit", "run_airflow", "task_states", "xcom_value"]

DAGS = Path(__file__).parent / "dags"


def make_table(path: Path) -> str:
    """A small Delta table at version 0, written by delta-rs (operation WRITE, no provenance)."""
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    return str(path)


def merge_commit(table: str, *, metrics: Mapping[str, int], provenance: Mapping[str, Any]) -> int:
    """Commit to ``table`` as our engine does (``delta/commit/transaction.py``): metrics as strings,
    provenance record."""
    dt = DeltaTable(table)
    dt.create_write_transaction(
        [],
        mode="append",
        schema=dt.schema(),
        commit_properties=CommitProperties(
            custom_metadata={
                "operationMetrics": {k: str(v) for k, v in metrics.items()},
                COMMIT_INFO_KEY: dict(provenance),
            }
        ),
    )
    return DeltaTable(table).version()


def task_states(airflow_env: dict[str, str], dag_id: str) -> dict[str, str]:
    """State of each task in the newest run of ``dag_id``, read from the metadata database."""
    with sqlite3.connect(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db") as db:
        rows = db.execute(
            "SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = "
            "(SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1)",
            (dag_id, dag_id),
        ).fetchall()
    return dict(rows)
