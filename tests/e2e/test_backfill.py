"""A backfill: several logical dates of a daily merge run at the same time against one partitioned table.

Each date runs as its own ``airflow dags test`` process, all started together. They use copies of one
migrated metadata database: SQLite takes one writer at a time, and a scheduler-driven backfill on SQLite
fails with "database is locked" before any merge runs; what is under test is the table, shared by all.
test_scheduler_backfill.py runs a backfill under a real scheduler, on PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge.delta.log.merge_commits import provenance_of
from dags_examples.sample_lake import events, extract_path
from tests.e2e.conftest import start_dags_test, xcom_value

pytestmark = pytest.mark.slow

DAG_ID = "deltamerge_daily_events"  # dags_examples/daily_partitioned.py
DATES = [dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)]
EVENTS_PER_DAY = 50


def run_id(home: Path) -> str:
    with sqlite3.connect(home / "airflow.db") as db:
        [(found,)] = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ?", (DAG_ID,)).fetchall()
    return str(found)


def test_concurrent_runs_of_several_dates_all_commit_their_own_day(airflow_env, tmp_path):
    lake = tmp_path / "lake"
    write_deltalake(
        str(lake / "events"),
        pa.concat_tables([events(day, range(EVENTS_PER_DAY), 1.0) for day in DATES]),
        partition_by=["day"],
    )
    for day in DATES:  # each day's extract updates events 40-49 and adds events 50-59
        extract_path(lake, "events", day).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(events(day, range(40, 60), 2.0), extract_path(lake, "events", day))

    homes = [tmp_path / f"airflow-{day}" for day in DATES]
    runs = [
        start_dags_test(airflow_env, home, DAG_ID, str(day), env={"DELTAMERGE_LAKE": str(lake)})
        for day, home in zip(DATES, homes, strict=True)
    ]
    outputs = [run.communicate()[0] for run in runs]

    for run, output in zip(runs, outputs, strict=True):
        assert run.returncode == 0, output[-4000:]
        assert "is not a local sample lake; its data is left alone" in output  # the example's sample_data
    table = DeltaTable(str(lake / "events"))
    assert table.version() == len(DATES)  # one commit per date, none lost
    rows = table.to_pyarrow_table().to_pylist()
    assert len(rows) == len(DATES) * 60
    assert sum(r["value"] == 2.0 for r in rows) == len(DATES) * 20
    committed_by = sorted(provenance_of(entry).get("runId", "") for entry in table.history()[: len(DATES)])
    assert committed_by == sorted(run_id(home) for home in homes)
    for day, home in zip(DATES, homes, strict=True):
        metrics = xcom_value({"AIRFLOW_HOME": str(home)}, DAG_ID, "merge_day")
        assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (10, 10), day
        # Only the run's own day was read: the other days' files were skipped before the join.
        assert (metrics["numTargetFilesAfterSkipping"], metrics["numTargetPartitionsAfterSkipping"]) == (1, 1)
