"""Every example DAG, run for real with ``airflow dags test``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.delta.commit import CRASH_ENV
from tests.e2e.conftest import ROOT, asset_event_extras, xcom_value

pytestmark = pytest.mark.slow


def prepare_lake(lake: Path) -> None:
    """The demo's sample lake: orders 0-999 and a 2024-01-02 extract (updates 900-999, adds 1000-1099)."""
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "sample_lake.py"), str(lake), "2024-01-02"], check=True
    )


def test_upsert_example_merges_and_pushes_metrics(airflow_env, run_airflow):
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "sample_lake.py"), str(lake), "2024-01-02"], check=True
    )

    result = run_airflow("dags", "test", "deltamerge_upsert", "2024-01-02")

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    metrics = xcom_value(airflow_env, "deltamerge_upsert", "merge_orders")
    # The sample extract updates orders 900-999 and adds 1000-1099 to a table of 1000 orders.
    assert metrics["numSourceRows"] == 200
    assert metrics["numTargetRowsUpdated"] == 100
    assert metrics["numTargetRowsInserted"] == 100
    assert metrics["tableVersion"] == 1
    table = DeltaTable(str(lake / "orders"))
    assert table.version() == 1
    rows = table.to_pyarrow_table().to_pylist()
    assert len(rows) == 1100
    assert {r["order_id"]: r["amount"] for r in rows}[950] == 950 * 1.5
    output = result.stdout + result.stderr
    assert "DELTAMERGE DEMO: table version 1" in output
    # The task log shows each phase of the job in one line, with counts.
    assert "Plan: classic executor; pruning kept 1 of 1 files" in output
    assert "rows 100 inserted, 100 updated, 0 deleted, 900 copied" in output
    assert "Committed version 1" in output
    # The table is the task's outlet Asset, and its event carries the same metrics.
    [extra] = asset_event_extras(airflow_env, (lake / "orders").absolute().as_uri())
    assert extra["numTargetRowsInserted"] == 100 and extra["tableVersion"] == 1

    # The consumer example finds that merge in the log, checks its metrics and reads them.
    consumer = run_airflow("dags", "test", "deltamerge_consumer", "2024-01-02")
    assert consumer.returncode == 0, consumer.stdout[-3000:] + consumer.stderr[-3000:]
    assert xcom_value(airflow_env, "deltamerge_consumer", "wait_for_merge")["version"] == 1
    assert "DELTAMERGE CONSUMER: 100 new orders to publish" in consumer.stdout + consumer.stderr


def test_sql_example_merges_like_the_python_one(airflow_env, run_airflow):
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)

    result = run_airflow("dags", "test", "deltamerge_sql", "2024-01-02")

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    metrics = xcom_value(airflow_env, "deltamerge_sql", "merge_orders_sql")
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (100, 100)
    assert metrics["numTargetRowsDeleted"] == 0
    assert DeltaTable(str(lake / "orders")).version() == 1


def test_preflight_fails_a_wrong_column_before_spark(airflow_env, run_airflow):
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)

    result = run_airflow(
        "dags",
        "test",
        "deltamerge_unknown_column",
        "2024-01-02",
        env={"AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).parent / "dags")},
    )

    output = result.stdout + result.stderr
    assert "DELTA_MERGE_UNRESOLVED_EXPRESSION" in output
    assert "Cannot resolve s.amout in UPDATE clause" in output
    assert "spark-submit" not in output.lower()
    assert DeltaTable(str(lake / "orders")).version() == 0


def test_storage_secret_reaches_neither_command_nor_log(airflow_env, run_airflow):
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)
    planted = "planted-S3CR3T-9f8e7d"
    connection = {
        "conn_type": "aws",
        "login": "AKIAPLANTED",
        "password": planted,
        "extra": {"region_name": "eu-west-1"},
    }

    result = run_airflow(
        "dags",
        "test",
        "deltamerge_storage_credentials",
        "2024-01-02",
        env={
            "AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).parent / "dags"),
            "AIRFLOW_CONN_LAKE_STORAGE": json.dumps(connection),
        },
    )

    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "Spark-Submit cmd" in output
    assert planted not in output
    assert DeltaTable(str(lake / "orders")).version() == 1


def test_retry_after_a_committed_merge_does_not_merge_twice(airflow_env, run_airflow):
    # Try 1: the job is killed right after its commit, so the task fails. Try 2 must find the commit.
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)

    result = run_airflow(
        "dags",
        "test",
        "deltamerge_retry_after_commit",
        "2024-01-02",
        env={"AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).parent / "dags"), CRASH_ENV: "after_commit"},
    )

    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "already committed as version 1" in output
    table = DeltaTable(str(lake / "orders"))
    assert table.version() == 1
    assert table.count() == 1100
    metrics = xcom_value(airflow_env, "deltamerge_retry_after_commit", "merge")
    assert (metrics["numTargetRowsInserted"], metrics["tableVersion"]) == (100, 1)


def test_failed_merge_fails_the_task_with_the_cause(airflow_env, run_airflow, tmp_path):
    # No staged extract for this date: the task fails naming the path; the table keeps its version.
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "sample_lake.py"), str(lake), "2024-01-02"], check=True
    )

    result = run_airflow("dags", "test", "deltamerge_upsert", "2024-03-01")

    output = result.stdout + result.stderr
    assert "Path does not exist" in output and "2024-03-01.parquet" in output
    assert "SourceError" in output
    assert DeltaTable(str(lake / "orders")).version() == 0
