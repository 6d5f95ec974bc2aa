"""Reprocessing from the UI against a real scheduler: an automatic retry after a commit skips, a Clear and a
reprocessing backfill merge again.

The merge task of ``deltamerge_reprocess`` has one retry, and every job is killed right after its commit (a
worker lost at the worst moment), so each step below is a try that commits and dies, then an automatic
retry that must return that commit. All is driven through the REST API the UI uses:

1. a backfill of 2024-01-02: try 1 commits, try 2 returns it;
2. the extract is fixed and the task cleared: try 3 merges it, try 4 returns it;
3. the extract is fixed again and the date backfilled with "reprocess completed runs": try 5 merges, try 6
   returns it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.delta.log.merge_commits import provenance_of
from dags_examples.sample_lake import extract_path, orders, prepare
from tests.e2e.airflow_services import WAIT_TIMEOUT, Airflow, airflow_services
from tests.e2e.conftest import asset_event_extras, metadata_env
from tests.faults import CRASH_ENV

pytestmark = pytest.mark.slow

DAG_ID, TASK_ID = "deltamerge_reprocess", "merge"  # tests/e2e/dags/orders_merges.py
DAY = dt.date(2024, 1, 2)
RUN_TIMEOUT = 600  # a guard against a run that never ends on a loaded 2-core machine, not a speed check


def test_a_clear_or_a_reprocessing_backfill_merges_again_while_an_automatic_retry_skips(
    airflow_env, postgres, tmp_path
):
    lake, home = tmp_path / "lake", tmp_path / "airflow"
    prepare(lake, DAY)  # orders 0-999; the extract updates 900-999 and adds 1000-1099
    dags = str(Path(__file__).parent / "dags")
    env = {"DELTAMERGE_LAKE": str(lake), "AIRFLOW__CORE__DAGS_FOLDER": dags, CRASH_ENV: "after_commit"}
    with airflow_services(airflow_env, home, env, postgres) as airflow:
        airflow.wait_for(
            "the DAG to be parsed", lambda: airflow.call("GET", f"dags/{DAG_ID}"), timeout=WAIT_TIMEOUT
        )
        airflow.call("PATCH", f"dags/{DAG_ID}", {"is_paused": False})

        run_id = backfill(airflow, reprocess="none")
        assert amount_of_order_950(lake, version=1) == 950 * 1.5
        assert try_number(airflow, run_id) == 2

        fix_extract(lake, factor=2.0)
        airflow.call(
            "POST",
            f"dags/{DAG_ID}/clearTaskInstances",
            {"dag_run_id": run_id, "task_ids": [TASK_ID], "dry_run": False, "only_failed": False},
        )
        wait_until_done_again(airflow, run_id)
        assert amount_of_order_950(lake, version=2) == 950 * 2.0

        fix_extract(lake, factor=3.0)
        assert backfill(airflow, reprocess="completed") == run_id
        assert amount_of_order_950(lake, version=3) == 950 * 3.0
        assert try_number(airflow, run_id) == 6

    table = DeltaTable(str(lake / "orders"))
    made_by = [provenance_of(entry) for entry in table.history(3)]  # newest first
    assert [(p["tryNumber"], p["clearNumber"]) for p in made_by] == [(5, 2), (3, 1), (1, 0)]
    # Each commit announced once, by the retry that returned it (the try that made it died first).
    events = asset_event_extras(metadata_env(airflow), (lake / "orders").as_uri())
    assert [event["tableVersion"] for event in events] == [1, 2, 3]


def backfill(airflow: Airflow, *, reprocess: str) -> str:
    """Backfill ``DAY`` as the UI's backfill form does; the run's id once it succeeded.

    Waits for the run, not the backfill: the scheduler marks a backfill complete some seconds later, and
    only one backfill of a DAG may be running, so a new one first waits for the earlier ones. A reprocessing
    backfill clears the finished run when it is created, so the run is no longer a success.
    """
    airflow.wait_for(
        "earlier backfills to complete",
        lambda: all(
            b["completed_at"] for b in airflow.call("GET", f"backfills?dag_id={DAG_ID}")["backfills"]
        ),
        timeout=WAIT_TIMEOUT,
    )
    day = f"{DAY}T00:00:00Z"
    body = {"dag_id": DAG_ID, "from_date": day, "to_date": day, "reprocess_behavior": reprocess}
    airflow.call("POST", "backfills", body)
    query = f"dags/{DAG_ID}/dagRuns?logical_date_gte={day}&logical_date_lte={day}"
    [run] = airflow.wait_for(
        "the backfill's run", lambda: airflow.call("GET", query)["dag_runs"], timeout=WAIT_TIMEOUT
    )
    assert airflow.wait_for_run(DAG_ID, run["dag_run_id"], timeout=RUN_TIMEOUT) == "success"
    return str(run["dag_run_id"])


def wait_until_done_again(airflow: Airflow, run_id: str) -> None:
    airflow.wait_for(
        "the run to be queued again",
        lambda: airflow.run_state(DAG_ID, run_id) != "success",
        timeout=WAIT_TIMEOUT,
    )
    assert airflow.wait_for_run(DAG_ID, run_id, timeout=RUN_TIMEOUT) == "success"


def fix_extract(lake: Path, *, factor: float) -> None:
    pq.write_table(orders(range(900, 1100), DAY, factor), extract_path(lake, "orders", DAY))


def amount_of_order_950(lake: Path, *, version: int) -> float:
    """Order 950's amount, once the table is at ``version`` (and still 1100 orders)."""
    table = DeltaTable(str(lake / "orders"))
    assert table.version() == version
    amounts = {row["order_id"]: row["amount"] for row in table.to_pyarrow_table().to_pylist()}
    assert len(amounts) == 1100
    return float(amounts[950])


def try_number(airflow: Airflow, run_id: str) -> int:
    return int(airflow.call("GET", f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK_ID}")["try_number"])
