"""The deferrable sensor end to end: ``airflow dags test`` runs the task, then its trigger in line, while
another writer commits to the table."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake

from tests.e2e.conftest import dags_test_with_deferral, xcom_value
from tests.e2e.test_example_dags import prepare_lake

pytestmark = pytest.mark.slow


def test_sensor_defers_and_resumes_when_the_commit_arrives(airflow_env):
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)
    env = {**airflow_env, "AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).parent / "dags")}
    orders = str(lake / "orders")

    def another_writer_commits() -> None:
        # The task has deferred and nothing matched yet: now another writer commits version 1.
        write_deltalake(orders, DeltaTable(orders).to_pyarrow_table().slice(0, 1), mode="append")

    returncode, text = dags_test_with_deferral(
        env, "deltamerge_wait_for_commit", "2024-01-02", another_writer_commits
    )

    assert returncode == 0, text[-4000:]
    assert "No commit of" in text  # the trigger polled before the commit arrived
    found = xcom_value(airflow_env, "deltamerge_wait_for_commit", "wait")
    assert (found["version"], found["operation"]) == (1, "WRITE")
