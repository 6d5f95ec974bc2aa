"""The check operator and the sensor in DAGs run for real with ``airflow dags test`` (no Spark)."""

from __future__ import annotations

import json

import pytest

from tests.airflow.conftest import DAGS, make_table, merge_commit, task_states, xcom_value

pytestmark = pytest.mark.slow

DAGS_ENV = {"AIRFLOW__CORE__DAGS_FOLDER": str(DAGS)}


@pytest.fixture(scope="module")
def check_run(airflow_env, run_airflow) -> tuple[dict[str, str], str]:
    """One run of ``deltamerge_check`` (every outcome in it): task states and the run's output."""
    result = run_airflow("dags", "test", "deltamerge_check", "2024-01-02", env=DAGS_ENV)
    return task_states(airflow_env, "deltamerge_check"), result.stdout + result.stderr


def test_check_passes_metrics_within_bounds(airflow_env, check_run):
    states, output = check_run
    assert states["merge_orders"] == "success", output[-3000:]
    assert states["check_lenient"] == states["publish_after_check_lenient"] == "success"
    assert xcom_value(airflow_env, "deltamerge_check", "check_lenient")["numTargetRowsDeleted"] == 5000
    assert "DELTAMERGE CHECK: published after check_lenient" in output


def test_check_fails_listing_every_broken_bound(check_run):
    states, output = check_run
    assert (states["check_strict"], states["publish_after_check_strict"]) == ("failed", "upstream_failed")
    assert "3 of 4 metric bounds broken by merge merge_orders" in output
    assert "1. numSourceRows = 200, below min 500" in output
    assert "2. numTargetRowsDeleted = 5000, above max 1000" in output
    assert "3. numTargetRowsDeleted / numTargetRowsCopied = 0.5 (5000 / 10000), above max 0.1" in output
    assert "numTargetFilesAfterSkipping = " not in output  # 3 files: that bound holds
    assert "published after check_strict" not in output  # nor after check_strict_skip


def test_check_in_skip_mode_skips_downstream(check_run):
    states, output = check_run
    assert (states["check_strict_skip"], states["publish_after_check_strict_skip"]) == ("skipped", "skipped")
    assert "published after check_strict_skip" not in output


def test_sensor_in_poke_mode_returns_the_matching_commit(airflow_env, run_airflow, tmp_path):
    table = make_table(tmp_path / "orders")
    upsert = {"dagId": "deltamerge_upsert", "taskId": "merge_orders", "runId": "r1", "tryNumber": 1}
    merge_commit(table, metrics={"numTargetRowsInserted": 5}, provenance={**upsert, "dagId": "other"})
    merge_commit(table, metrics={"numTargetRowsInserted": 0}, provenance=upsert)
    merge_commit(table, metrics={"numTargetRowsInserted": 100}, provenance={**upsert, "runId": "r2"})

    result = run_airflow(
        "dags", "test", "deltamerge_sensor", "2024-01-02", "-c", json.dumps({"table": table}), env=DAGS_ENV
    )

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert task_states(airflow_env, "deltamerge_sensor") == {"wait_for_merge": "success"}
    commit = xcom_value(airflow_env, "deltamerge_sensor", "wait_for_merge")
    assert commit["version"] == 3
    assert commit["operation"] == "MERGE"
    assert commit["metrics"] == {"numTargetRowsInserted": 100}
    assert commit["provenance"]["runId"] == "r2"
