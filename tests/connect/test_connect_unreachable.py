"""A Spark Connect server that is not there fails the task in seconds, naming the server and what to check.

pyspark's Connect client retries a call for ten minutes and more by default, to ride out a server's
restart; the job's first call is tried for about 8 s instead (``job/connect.FIRST_CALL_RETRIES``).
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from airflow.exceptions import AirflowException

from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all
from tests.conftest import make_table, table_state, write_extract

pytestmark = pytest.mark.slow

TOKEN = "unreachable-token-4711"
# Far above the first call's 8 s of retries, far below pyspark's default of ten minutes: a guard against
# the default policy, not a speed check.
FAILS_WITHIN_S = 90


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_server_that_is_not_there_fails_the_merge_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given: a connection to a port where nothing listens, and a table
    port = free_port()
    connection = {"conn_type": "spark_connect", "host": "localhost", "port": port, "password": TOKEN}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_NOWHERE", json.dumps(connection))
    target = make_table(tmp_path / "t")
    before = table_state(target)
    source = write_extract(tmp_path / "s.parquet", [(1, 5, "eu")])
    spec = MergeSpec(target, PathSource(source), "t.id = s.id", (update_all(), insert_all()))
    # When
    start = time.monotonic()
    with pytest.raises(AirflowException) as failed:
        DeltaMergeHook("spark_nowhere").run_merge(spec)
    # Then: it failed soon, saying which server and what to check, without the token; nothing changed
    assert time.monotonic() - start < FAILS_WITHIN_S
    message = str(failed.value)
    assert f"localhost:{port} could not be reached or refused the session (UNAVAILABLE" in message
    assert "ConnectServerUnavailable" in message and "connection's token" in message
    assert TOKEN not in message
    assert table_state(target) == before
