"""A real Spark Connect server, started from the installed pyspark once per test session; it demands a token,
as a shared server should, so a merge that lost it on the way fails."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from bench.connect_server import ConnectServer, ConnectServerError, connect_server
from tests.e2e.conftest import airflow_env, run_airflow

__all__ = ["airflow_env", "run_airflow"]  # fixtures of the Airflow depth, shared here


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """The session's server, up until the session's end."""
    log = tmp_path_factory.mktemp("connect") / "server.log"
    try:
        with connect_server(log, token=f"connect-token-{uuid.uuid4().hex}") as running:
            yield running
    except ConnectServerError as err:
        pytest.fail(str(err))


@pytest.fixture(scope="session")
def connect_url(server: ConnectServer) -> str:
    """``sc://localhost:<port>/;token=...`` of the session's server."""
    return server.url
