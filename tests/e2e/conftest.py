"""The Airflow depth: real ``airflow`` CLI runs on a SQLite metadata database in a temporary AIRFLOW_HOME."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment of a project-local Airflow with the example DAGs and a local Spark master."""
    home = tmp_path_factory.mktemp("airflow_home")
    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        # A busy 2-core machine can take longer than the default 30 s to import a DAG file and its imports.
        AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT="300",
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags_examples"),
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        DELTAMERGE_LAKE=str(home / "lake"),
    )
    subprocess.run(["airflow", "db", "migrate"], env=env, check=True, capture_output=True)
    return env


@pytest.fixture(scope="session")
def run_airflow(airflow_env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["airflow", *args],
            env={**airflow_env, **(env or {})},
            capture_output=True,
            text=True,
            check=False,
        )

    return run


def start_dags_test(
    airflow_env: dict[str, str], home: Path, dag_id: str, logical_date: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``airflow dags test`` in its own AIRFLOW_HOME, on a copy of the migrated metadata database.

    Runs started side by side need their own databases: SQLite takes one writer at a time, and a second
    ``airflow`` process fails with "database is locked" before any merge runs.
    """
    home.mkdir()
    shutil.copy(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db", home / "airflow.db")
    return subprocess.Popen(
        ["airflow", "dags", "test", dag_id, logical_date],
        env={**airflow_env, "AIRFLOW_HOME": str(home), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


TRIGGER_STARTED = "[DAG TEST] running trigger in line"


def dags_test_with_deferral(
    env: dict[str, str], dag_id: str, logical_date: str, when_deferred: Callable[[], object]
) -> tuple[int, str]:
    """Run ``airflow dags test`` and call ``when_deferred`` once, as soon as a task has deferred and its
    trigger runs in line (``dags test`` runs triggers itself); the run's exit code and output."""
    run = subprocess.Popen(
        ["airflow", "dags", "test", dag_id, logical_date],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert run.stdout is not None
    output, deferred = [], False
    for line in run.stdout:
        output.append(line)
        if TRIGGER_STARTED in line and not deferred:
            when_deferred()
            deferred = True
    text = "".join(output)
    assert deferred, f"no task of {dag_id} deferred:\n{text[-3000:]}"
    return run.wait(timeout=120), text


def xcom_value(airflow_env: dict[str, str], dag_id: str, task_id: str) -> Any:
    """The newest ``return_value`` XCom of a task, read from the metadata database itself."""
    with sqlite3.connect(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db") as db:
        row = db.execute(
            "SELECT value FROM xcom WHERE dag_id = ? AND task_id = ? AND key = 'return_value' "
            "ORDER BY timestamp DESC LIMIT 1",
            (dag_id, task_id),
        ).fetchone()
    assert row is not None, f"no XCom for {dag_id}.{task_id}"
    value = row[0]
    return json.loads(value if isinstance(value, str) else value.decode())


def asset_event_extras(airflow_env: dict[str, str], uri: str, dag_id: str = "%") -> list[dict[str, Any]]:
    """The ``extra`` of every event of the asset at ``uri`` (emitted by ``dag_id``'s tasks), oldest first."""
    with sqlite3.connect(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db") as db:
        rows = db.execute(
            "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE a.uri = ? AND e.source_dag_id LIKE ? ORDER BY e.id",
            (uri, dag_id),
        ).fetchall()
    return [json.loads(extra) if isinstance(extra, str | bytes) else extra for (extra,) in rows]
