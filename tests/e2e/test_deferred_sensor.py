"""The deferrable sensor end to end: ``airflow dags test`` runs the task, then its trigger in line, while
another writer commits to the table."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake

from tests.e2e.conftest import xcom_value
from tests.e2e.test_example_dags import prepare_lake

pytestmark = pytest.mark.slow

TRIGGER_STARTED = "[DAG TEST] running trigger in line"


def test_sensor_defers_and_resumes_when_the_commit_arrives(airflow_env):
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)
    env = {**airflow_env, "AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).parent / "dags")}
    run = subprocess.Popen(
        ["airflow", "dags", "test", "deltamerge_wait_for_commit", "2024-01-02"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert run.stdout is not None
    output, committed = [], False
    for line in run.stdout:
        output.append(line)
        if TRIGGER_STARTED in line and not committed:
            # The task has deferred and nothing matched yet: now another writer commits version 1.
            orders = str(lake / "orders")
            write_deltalake(orders, DeltaTable(orders).to_pyarrow_table().slice(0, 1), mode="append")
            committed = True
    text = "".join(output)
    assert run.wait(timeout=60) == 0, text[-4000:]
    assert committed, text[-4000:]
    assert "No commit of" in text  # the trigger polled before the commit arrived
    found = xcom_value(airflow_env, "deltamerge_wait_for_commit", "wait")
    assert (found["version"], found["operation"]) == (1, "WRITE")
