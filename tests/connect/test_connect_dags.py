"""The operator on a ``spark_connect`` connection under real Airflow: two ``airflow dags test`` runs, two
logical dates, merge into one Delta table through the session's one Spark Connect server."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyspark
import pytest
from deltalake import DeltaTable

from bench.connect_server import CONNECT_SERVER_CLASS, ConnectServer
from dags_examples.sample_lake import extract_path, orders, prepare
from tests.e2e.conftest import asset_event_extras, xcom_value
from tests.secret_leaks import command_lines_now, run_watching_descendants

pytestmark = pytest.mark.slow

DAGS = Path(__file__).parents[1] / "e2e" / "dags"
DAG_ID = "deltamerge_connect"
DAYS = (dt.date(2024, 1, 2), dt.date(2024, 1, 3))
JOB_COMMAND = "-m airflow_provider_deltamerge.job.main"


@dataclass(frozen=True)
class Runs:
    """What two runs of the DAG left: their output, XComs, the table, and every command line seen."""

    outputs: list[str]
    metrics: list[dict[str, Any]]
    lake: Path
    command_lines: set[str]  # of the processes the runs started
    task_logs: str
    running_before: set[str]  # command lines of processes already running (this suite's own Spark, say)


@pytest.fixture(scope="module")
def runs(
    airflow_env: dict[str, str],
    run_airflow: Callable[..., subprocess.CompletedProcess[str]],
    server: ConnectServer,
) -> Runs:
    """The sample lake (orders 0-999; 2024-01-02 updates 900-999 and adds 1000-1099), a 2024-01-03 extract
    of 60 rows (updates 1050-1099, adds 1100-1109), and the DAG run for each day in turn."""
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare(lake, DAYS[0])
    pq.write_table(orders(range(1050, 1110), DAYS[1], 2.0), extract_path(lake, "orders", DAYS[1]))
    # The connection as SparkConnectHook reads it: the token in the password field.
    connection = {"conn_type": "spark_connect", "host": server.host, "port": server.port}
    env = {
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW_CONN_SPARK_CONNECT": json.dumps({**connection, "password": server.token}),
    }
    outputs, metrics, command_lines = [], [], set()
    running_before = command_lines_now()
    for day in DAYS:
        result, seen = run_watching_descendants(
            lambda d=day: run_airflow("dags", "test", DAG_ID, str(d), env=env)
        )
        outputs.append(result.stdout + result.stderr)
        assert result.returncode == 0, outputs[-1][-4000:]
        metrics.append(xcom_value(airflow_env, DAG_ID, "merge"))
        command_lines |= seen
    logs = Path(airflow_env["AIRFLOW_HOME"]) / "logs"
    task_logs = "".join(p.read_text(errors="replace") for p in logs.rglob("*") if p.is_file())
    return Runs(outputs, metrics, lake, command_lines, task_logs, running_before)


def test_two_runs_merge_through_one_server_without_a_spark_start(
    runs: Runs, server: ConnectServer, airflow_env: dict[str, str]
) -> None:
    table = DeltaTable(str(runs.lake / "orders"))
    # Then: one merge commit per run, versions 1 and 2, and the rows of both extracts
    assert [(h["version"], h["operation"]) for h in table.history()][:2] == [(2, "MERGE"), (1, "MERGE")]
    rows = {r["order_id"]: r["amount"] for r in table.to_pyarrow_table().to_pylist()}
    assert len(rows) == 1110
    assert (rows[5], rows[950], rows[1000], rows[1060], rows[1109]) == (5.0, 1425.0, 1500.0, 2120.0, 2218.0)
    # And: each run's XCom has its headline first and its own merge's metrics
    first, second = runs.metrics
    assert first["summary"].startswith("100 inserted, 100 updated, 0 deleted, ")
    assert second["summary"].startswith("10 inserted, 50 updated, 0 deleted, ")
    assert [(m["numSourceRows"], m["tableVersion"]) for m in runs.metrics] == [(200, 1), (60, 2)]
    # And: each run announced its own commit as an asset event, with the XCom's metrics
    extras = asset_event_extras(airflow_env, (runs.lake / "orders").absolute().as_uri(), DAG_ID)
    assert [e["tableVersion"] for e in extras] == [1, 2]
    assert {k: extras[1][k] for k in second} == second
    # And: the job ran in the task's own process against the server: no task started Spark or a job process,
    # nothing was submitted
    for output in runs.outputs:
        assert re.search(
            rf"Spark started in [0-9.]+ s: Spark {re.escape(pyspark.__version__)}, Spark Connect server "
            rf"{re.escape(server.host)}",
            output,
        )
        assert "Spark-Submit cmd" not in output
    assert not any(JOB_COMMAND in line for line in runs.command_lines)
    assert any("airflow dags test" in line for line in runs.command_lines)  # the watcher saw the runs
    # Spark processes the runs started: the server (this test process's child too) was up before the runs
    # began; another test worker may submit jobs of its own meanwhile, which are not this process's children.
    assert any(CONNECT_SERVER_CLASS in line for line in runs.running_before)
    ours = runs.command_lines - runs.running_before
    started = [line for line in ours if "SparkSubmit" in line or "spark-submit" in line]
    assert started == [], started


def test_the_token_reaches_no_log_xcom_command_line_or_commit(runs: Runs, server: ConnectServer) -> None:
    # The server refuses a session without the token: both merges committing shows that it arrived.
    assert DeltaTable(str(runs.lake / "orders")).version() == 2
    history = json.dumps(DeltaTable(str(runs.lake / "orders")).history())
    for text in (*runs.outputs, runs.task_logs, json.dumps(runs.metrics), history, *runs.command_lines):
        assert server.token not in text
