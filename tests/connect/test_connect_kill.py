"""``on_kill`` on a Spark Connect connection: the task's own process runs the merge, so a task stopped from
the UI (or timing out) must stop the server's queries itself, and commit nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.job_contract import SPARK_STARTED
from airflow_provider_deltamerge.spec import MergeSpec, QuerySource, insert_all, update_all
from bench.connect_server import ConnectServer, connection_of
from tests.conftest import MergeInThread, make_table, table_state

pytestmark = pytest.mark.slow
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60
# A source whose first query scans 300M rows through SHA-512 and keeps none: minutes of work on two cores,
# bounded if the interrupt failed, so that the test fails rather than the machine stays busy for good.
SLOW_SOURCE = (
    "SELECT id, CAST(id AS INT) AS qty, 'eu' AS region FROM range(0, 300000000) "
    "WHERE sha2(CAST(id AS STRING), 512) = 'none'"
)


def test_on_kill_interrupts_the_merge_on_the_server_and_the_table_is_unchanged(
    tmp_path: Path, server: ConnectServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_KILL", json.dumps(connection_of(server)))
    target = make_table(tmp_path / "orders")
    before = table_state(target)
    spec = MergeSpec(
        target=target,
        source=QuerySource(SLOW_SOURCE),
        condition="t.id = s.id",
        clauses=(update_all(), insert_all()),
    )
    hook = DeltaMergeHook("spark_connect_kill")
    merge = MergeInThread(hook, spec)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not any(line.startswith(SPARK_STARTED) for _, line in hook.job_lines()):
        assert not merge.outcome, f"the merge ended before it could be killed: {merge.outcome}"
        assert time.monotonic() < deadline, "the job's Connect session did not start"
        time.sleep(0.2)
    time.sleep(3)  # let the merge start its first query on the server
    assert not merge.outcome, f"the merge ended before it could be killed: {merge.outcome}"

    killed = time.monotonic()
    hook.on_kill()
    merge.thread.join(timeout=STOP_TIMEOUT_S)

    # Then: the merge stopped well before its first query could have ended, failed, and changed nothing
    assert not merge.thread.is_alive(), "the merge went on after on_kill"
    assert time.monotonic() - killed < STOP_TIMEOUT_S
    assert isinstance(merge.outcome[0], Exception), merge.outcome
    assert table_state(target) == before
