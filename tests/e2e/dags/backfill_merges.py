"""A daily merge into two tables at once, for backfills of many dates under a real scheduler.

``deltamerge_backfill`` merges each day's extract of accounts into ``accounts`` (one unpartitioned table:
every run rewrites the same file) and into ``accounts_by_shard`` (partitioned by ``shard``, 4 shards: the runs
of days 4 apart rewrite the same partition). January 1-8 2024 only, so that a scheduler creates no run of its
own. The merges run on the test session's Spark Connect server (connection ``spark_connect``).

Faults: on the days listed in ``DELTAMERGE_TEST_CRASH_DAYS`` the try of each merge that commits is killed
right after its commit (a worker lost at the worst moment, tests/faults.py); its automatic retry must return
that commit, and so makes none of its own to be killed after. Usually that is the first try; one that met
concurrent commits until it gave up commits nothing, and the next try is the one.
On the day ``DELTAMERGE_TEST_GATED_DAY`` names, each merge waits until the file ``DELTAMERGE_TEST_GATE`` names
exists: a test that makes Clears during the backfill holds that run open until it has made them.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all, update_all

LAKE = os.environ["DELTAMERGE_LAKE"]
CRASH_DAYS_ENV = "DELTAMERGE_TEST_CRASH_DAYS"
CRASH_ENV = "DELTAMERGE_TEST_CRASH_AT"  # tests/faults.py: the merge's process dies at this stage
GATED_DAY_ENV, GATE_ENV = "DELTAMERGE_TEST_GATED_DAY", "DELTAMERGE_TEST_GATE"
GATE_TIMEOUT_S = 900


def before_the_merge(context: Any) -> None:
    """Switch the commit-then-die fault on for this task's process and its merge job on the days listed
    (the task's process is its own: the switch goes nowhere else); on the gated day, wait for the gate."""
    if context["ds"] in os.environ.get(CRASH_DAYS_ENV, "").split(","):
        os.environ[CRASH_ENV] = "after_commit"
    if context["ds"] == os.environ.get(GATED_DAY_ENV):
        gate, waited = Path(os.environ[GATE_ENV]), 0.0
        while not gate.exists():
            if waited > GATE_TIMEOUT_S:
                raise TimeoutError(f"the test never opened {gate}")
            time.sleep(0.5)
            waited += 0.5


with DAG(
    dag_id="deltamerge_backfill",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    end_date=datetime(2024, 1, 8),
    catchup=False,
    max_active_runs=4,
):
    for task_id, table, condition in (
        ("merge_one_table", "accounts", "t.id = s.id"),
        ("merge_partitions", "accounts_by_shard", "t.shard = s.shard AND t.id = s.id"),
    ):
        DeltaMergeOperator(
            task_id=task_id,
            target=f"{LAKE}/{table}",
            source=LAKE + "/staging/accounts/{{ ds }}.parquet",
            condition=condition,
            clauses=[update_all(), insert_all()],
            spark_conn_id="spark_connect",
            # A merge that keeps meeting concurrent commits gives up (DELTA_CONCURRENT_MODIFICATION) and the
            # task is tried again, as in production; three retries leave room for that twice besides the
            # crash.
            retries=3,
            retry_delay=timedelta(seconds=1),
            pre_execute=before_the_merge,
        )
