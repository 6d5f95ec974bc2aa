"""The consumer example under a real scheduler: a run triggered by an asset event uses that event's metrics.

``deltamerge_upsert`` is backfilled for two days, one after the other; each merge's asset event triggers a run
of ``deltamerge_consumer`` (``dags_examples/consumer.py``), which must take the metrics from the event that
triggered it (``triggering_asset_events``), not poll the table: each run's metrics are its own merge's.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from dags_examples.sample_lake import MARKER, extract_path, orders, prepare
from tests.e2e.airflow_services import WAIT_TIMEOUT, Airflow, airflow_services
from tests.e2e.conftest import ROOT, json_value

pytestmark = pytest.mark.slow

PRODUCER, CONSUMER = "deltamerge_upsert", "deltamerge_consumer"
DAYS = (dt.date(2024, 1, 2), dt.date(2024, 1, 3))
RUN_TIMEOUT = 600  # a guard against a run that never ends on a loaded 2-core machine, not a speed check


def test_each_asset_triggered_consumer_run_uses_the_metrics_of_its_event(airflow_env, postgres, tmp_path):
    lake, home = tmp_path / "lake", tmp_path / "airflow"
    prepare(lake, DAYS[0])  # day 1: 100 orders updated, 100 new
    # day 2: orders 1050-1099 updated, 1100-1149 new
    pq.write_table(orders(range(1050, 1150), DAYS[1], 2.0), extract_path(lake, "orders", DAYS[1]))
    # A real lake from now on: the producer's own scheduled run (for yesterday) finds no extract and fails
    # before merging, instead of merging a sample extract of its own and triggering a third consumer run.
    (lake / MARKER).unlink()
    env = {"DELTAMERGE_LAKE": str(lake), "AIRFLOW__CORE__DAGS_FOLDER": str(example_dags(tmp_path / "dags"))}
    with airflow_services(airflow_env, home, env, postgres) as airflow:
        for dag_id in (PRODUCER, CONSUMER):
            airflow.wait_for(
                f"{dag_id} to be parsed",
                lambda d=dag_id: airflow.call("GET", f"dags/{d}"),
                timeout=WAIT_TIMEOUT,
            )
        for dag_id in (PRODUCER, CONSUMER):
            airflow.call("PATCH", f"dags/{dag_id}", {"is_paused": False})
        for count, day in enumerate(DAYS, start=1):
            backfill_day(airflow, day)
            airflow.wait_for(
                f"consumer run {count}",
                lambda c=count: len(finished_runs(airflow, CONSUMER)) >= c,
                timeout=RUN_TIMEOUT,
            )
        runs = finished_runs(airflow, CONSUMER)
        triggered_by = {run: upstream_events(airflow, run) for run in runs}

    assert list(runs.values()) == ["success", "success"], runs
    used = consumer_metrics(airflow)
    for run, events in triggered_by.items():
        assert [e["source_dag_id"] for e in events] == [PRODUCER], (run, events)
        assert used[run] == events[-1]["extra"], run
    versions = sorted(used[run]["tableVersion"] for run in runs)
    inserted = sorted(used[run]["numTargetRowsInserted"] for run in runs)
    assert (versions, inserted) == ([1, 2], [50, 100])
    assert all(used[run]["partitions"] == [] for run in runs)  # the orders table is not partitioned


def example_dags(folder: Path) -> Path:
    """A DAG folder holding the two examples as they ship (links), and nothing else to parse."""
    folder.mkdir()
    for name in ("upsert.py", "consumer.py", "sample_lake.py"):
        (folder / name).symlink_to(ROOT / "dags_examples" / name)
    return folder


def backfill_day(airflow: Airflow, day: dt.date) -> None:
    """A backfill of the producer for ``day``, as the UI's backfill form makes it, run to success."""
    moment = f"{day}T00:00:00Z"
    airflow.wait_for(
        "earlier backfills to complete",
        lambda: all(
            b["completed_at"] for b in airflow.call("GET", f"backfills?dag_id={PRODUCER}")["backfills"]
        ),
        timeout=WAIT_TIMEOUT,
    )
    airflow.call("POST", "backfills", {"dag_id": PRODUCER, "from_date": moment, "to_date": moment})
    query = f"dags/{PRODUCER}/dagRuns?logical_date_gte={moment}&logical_date_lte={moment}"
    [run] = airflow.wait_for(
        "the backfill's run", lambda: airflow.call("GET", query)["dag_runs"], timeout=WAIT_TIMEOUT
    )
    assert airflow.wait_for_run(PRODUCER, run["dag_run_id"], timeout=RUN_TIMEOUT) == "success"


def finished_runs(airflow: Airflow, dag_id: str) -> dict[str, str]:
    runs = airflow.call("GET", f"dags/{dag_id}/dagRuns?order_by=run_after")["dag_runs"]
    return {r["dag_run_id"]: r["state"] for r in runs if r["state"] in ("success", "failed")}


def upstream_events(airflow: Airflow, run_id: str) -> list[dict[str, Any]]:
    """The asset events that triggered the consumer's run ``run_id``, oldest first."""
    events = airflow.call("GET", f"dags/{CONSUMER}/dagRuns/{run_id}/upstreamAssetEvents")["asset_events"]
    return sorted(events, key=lambda e: e["timestamp"])


def consumer_metrics(airflow: Airflow) -> dict[str, Any]:
    """The metrics the consumer's ``merge_metrics`` task returned in each run, from the metadata database."""
    rows = airflow.query(
        "SELECT run_id, value FROM xcom "
        "WHERE dag_id = :dag_id AND task_id = :task_id AND key = 'return_value'",
        dag_id=CONSUMER,
        task_id="merge_metrics",
    )
    return {run_id: json_value(value) for run_id, value in rows}
