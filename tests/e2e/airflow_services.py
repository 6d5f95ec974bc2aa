"""A real Airflow on 127.0.0.1: API server, scheduler (LocalExecutor) and DAG processor on a PostgreSQL
metadata database (tests/e2e/postgres.py), as in production, driven through the REST API the UI uses."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy

if TYPE_CHECKING:
    from tests.e2e.postgres import Postgres

SERVICES = (("api-server", "--workers", "1"), ("scheduler",), ("dag-processor",))
BUSY_TIMEOUT = 30
# A loaded 2-core machine can take minutes to start the API server and stall it for half a minute (its first
# task start imports much); these wait it out instead of failing a call that would have been answered.
REQUEST_TIMEOUT = 120
EXECUTION_API_TIMEOUT = "60"
START_TIMEOUT = 300
# How long a test waits for Airflow to reach a state (a DAG parsed, a run listed or queued again): a guard
# against a state never reached, not a speed check; make test's two workers load the two cores at once.
WAIT_TIMEOUT = 300


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Airflow:
    """The REST API of a running Airflow, with the token of its (all-admin) simple auth manager, and its
    metadata database (``database_url``, still there after the services stopped)."""

    base: str
    database_url: str
    token: str = ""

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One REST call; a 503 is tried again for up to ``BUSY_TIMEOUT`` seconds, as the UI's form would be.

        The API server answers 503 when its database is busy (on SQLite, "Database is locked" while the
        scheduler writes); the request was rolled back, so sending it again is safe.
        """
        request = urllib.request.Request(
            f"{self.base}/api/v2/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        deadline = time.monotonic() + BUSY_TIMEOUT
        while True:
            try:
                with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
                    return json.loads(response.read() or b"null")
            except urllib.error.HTTPError as error:
                if error.code != HTTPStatus.SERVICE_UNAVAILABLE or time.monotonic() > deadline:
                    raise
                error.close()  # the refused response's connection, before the next try
            time.sleep(1)

    def wait_for(self, what: str, done: Callable[[], Any], *, timeout: float) -> Any:
        """Poll ``done`` until it returns something true; fail naming ``what`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                found = done()
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                found = None
            if found:
                return found
            time.sleep(1)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")

    def query(self, sql: str, **params: Any) -> list[Any]:
        """The rows of a read of the metadata database (``:name`` parameters)."""
        return metadata_rows(self.database_url, sql, **params)

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.call("GET", f"dags/{dag_id}/dagRuns/{run_id}")["state"])

    def wait_for_run(self, dag_id: str, run_id: str, *, timeout: float) -> str:
        """The run's state once it is finished."""
        return str(
            self.wait_for(
                f"run {run_id} of {dag_id} to finish",
                lambda: (state := self.run_state(dag_id, run_id)) in ("success", "failed") and state,
                timeout=timeout,
            )
        )


@contextmanager
def airflow_services(
    airflow_env: dict[str, str], home: Path, env: dict[str, str], postgres: Postgres
) -> Iterator[Airflow]:
    """Start the services in ``home`` on a fresh copy of the migrated PostgreSQL database; stop them when
    done."""
    home.mkdir()
    database_url = postgres.new_database()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    service_env = {
        **airflow_env,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database_url,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__API_AUTH__JWT_SECRET": "deltamerge-e2e-only",
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": EXECUTION_API_TIMEOUT,  # a task's calls (5 s by default)
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        **env,
    }
    processes = [
        subprocess.Popen(
            ["airflow", *service],
            env=service_env,
            stdout=(home / f"{service[0]}.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        for service in SERVICES
    ]
    try:
        airflow = Airflow(base, database_url)
        airflow.token = airflow.wait_for("the API server", lambda: _token(base), timeout=START_TIMEOUT)
        yield airflow
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def _token(base: str) -> str:
    with urllib.request.urlopen(f"{base}/auth/token", timeout=10) as response:
        return str(json.loads(response.read())["access_token"])


def metadata_rows(database_url: str, sql: str, **params: Any) -> list[Any]:
    """The rows of a read of an Airflow metadata database, SQLite or PostgreSQL (``:name`` parameters)."""
    engine = sqlalchemy.create_engine(database_url)
    try:
        with engine.connect() as connection:
            return list(connection.execute(sqlalchemy.text(sql), params).all())
    finally:
        engine.dispose()
