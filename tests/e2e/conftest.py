"""The Airflow depth: real ``airflow`` CLI runs on a SQLite metadata database in a temporary AIRFLOW_HOME; the
real scheduler and API server (airflow_services.py) on a private PostgreSQL server (postgres.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.connect_server import ConnectServer, ConnectServerError, connect_server
from tests.e2e.airflow_services import Airflow, metadata_rows
from tests.e2e.postgres import Postgres, PostgresError, postgres_server

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
def postgres(tmp_path_factory: pytest.TempPathFactory, airflow_env: dict[str, str]) -> Iterator[Postgres]:
    """The session's PostgreSQL server with a migrated Airflow database; a server that cannot start fails
    the tests that need it, naming the reason (never a skip)."""
    log = tmp_path_factory.mktemp("postgres") / "server.log"
    try:
        with postgres_server(log, airflow_env) as running:
            yield running
    except PostgresError as err:
        pytest.fail(str(err))


@pytest.fixture(scope="session")
def spark_connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A real Spark Connect server, started from the installed pyspark once per session: merges through it
    start no JVM of their own. It demands a token, as a shared server should."""
    log = tmp_path_factory.mktemp("connect") / "server.log"
    try:
        with connect_server(log, token=f"connect-token-{uuid.uuid4().hex}") as running:
            yield running
    except ConnectServerError as err:
        pytest.fail(str(err))


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


def metadata_url(airflow_env: dict[str, str]) -> str:
    """The metadata database of an Airflow environment: its configured URL, else SQLite in AIRFLOW_HOME."""
    configured = airflow_env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
    return configured or f"sqlite:///{Path(airflow_env['AIRFLOW_HOME']) / 'airflow.db'}"


def metadata_env(airflow: Airflow) -> dict[str, str]:
    """The environment naming a real Airflow's metadata database, for the readers below."""
    return {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": airflow.database_url}


def json_value(value: Any) -> Any:
    """A JSON column's value: SQLite hands back its text, PostgreSQL's driver the decoded value."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def xcom_value(airflow_env: dict[str, str], dag_id: str, task_id: str) -> Any:
    """The newest ``return_value`` XCom of a task, read from the metadata database itself."""
    rows = metadata_rows(
        metadata_url(airflow_env),
        "SELECT value FROM xcom WHERE dag_id = :dag_id AND task_id = :task_id AND key = 'return_value' "
        "ORDER BY timestamp DESC LIMIT 1",
        dag_id=dag_id,
        task_id=task_id,
    )
    assert rows, f"no XCom for {dag_id}.{task_id}"
    return json_value(rows[0][0])


def asset_event_extras(airflow_env: dict[str, str], uri: str, dag_id: str = "%") -> list[dict[str, Any]]:
    """The ``extra`` of every event of the asset at ``uri`` (emitted by ``dag_id``'s tasks), oldest first."""
    rows = metadata_rows(
        metadata_url(airflow_env),
        "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
        "WHERE a.uri = :uri AND e.source_dag_id LIKE :dag_id ORDER BY e.id",
        uri=uri,
        dag_id=dag_id,
    )
    return [json_value(extra) for (extra,) in rows]
