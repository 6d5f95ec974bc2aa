"""A real Spark Connect server, started from the installed pyspark once per test session (the e2e depth's,
shared); it demands a token, as a shared server should, so a merge that lost it on the way fails."""

from __future__ import annotations

import pytest

from bench.connect_server import ConnectServer
from tests.e2e.conftest import airflow_env, run_airflow, spark_connect_server

__all__ = ["airflow_env", "run_airflow", "spark_connect_server"]  # fixtures of the Airflow depth, shared here


@pytest.fixture(scope="session")
def server(spark_connect_server: ConnectServer) -> ConnectServer:
    """The session's server, up until the session's end."""
    return spark_connect_server


@pytest.fixture(scope="session")
def connect_url(server: ConnectServer) -> str:
    """``sc://localhost:<port>/;token=...`` of the session's server."""
    return server.url
