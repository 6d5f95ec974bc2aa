"""``on_kill`` (a task stopped from the UI, or timing out) ends the Spark application and commits nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from airflow.providers.common.compat.sdk import AirflowException

from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from tests.conftest import MergeInThread, make_table, table_state, upsert_from_extract

pytestmark = pytest.mark.slow
STARTUP_TIMEOUT_S = 120


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` (read from /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().decode(errors="replace"):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue  # the process ended while we looked
    return found


def test_on_kill_stops_the_job_and_the_table_is_unchanged(tmp_path, local_spark_connection):
    target = make_table(tmp_path / "orders")
    before = table_state(target)
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 7, "eu"), (99, 8, "us")])
    hook = DeltaMergeHook(local_spark_connection, spark_submit_kwargs={"name": "deltamerge-on-kill-test"})
    merge = MergeInThread(hook, spec)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not processes_mentioning("deltamerge-on-kill-test"):
        assert not merge.outcome, f"the merge ended before it could be killed: {merge.outcome}"
        assert time.monotonic() < deadline, "spark-submit did not start"
        time.sleep(0.2)
    time.sleep(3)  # let the driver start its Spark work

    hook.on_kill()
    merge.thread.join(timeout=60)

    assert not merge.thread.is_alive()
    assert isinstance(merge.outcome[0], AirflowException)
    deadline = time.monotonic() + 30
    while processes_mentioning("deltamerge-on-kill-test") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_mentioning("deltamerge-on-kill-test") == []
    assert table_state(target) == before
