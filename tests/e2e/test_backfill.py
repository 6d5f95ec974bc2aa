"""A backfill: several logical dates of a daily merge run at the same time against one partitioned table.

Each date runs as its own ``airflow dags test`` process, all started together. They use copies of one
migrated metadata database: SQLite takes one writer at a time, and a scheduler-driven backfill on SQLite
fails with "database is locked" before any merge runs; what is under test is the table, shared by all.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge.delta.history import provenance_of
from tests.e2e.conftest import xcom_value

pytestmark = pytest.mark.slow

DATES = ["2024-01-01", "2024-01-02", "2024-01-03"]
EVENTS_PER_DAY = 50


def events(day: str, ids: range, value: float) -> pa.Table:
    return pa.table(
        {
            "day": pa.array([dt.date.fromisoformat(day)] * len(ids), pa.date32()),
            "event_id": pa.array(list(ids), pa.int64()),
            "value": pa.array([value] * len(ids), pa.float64()),
        }
    )


def run_id(home: Path) -> str:
    with sqlite3.connect(home / "airflow.db") as db:
        query = "SELECT run_id FROM dag_run WHERE dag_id = 'deltamerge_daily_events'"
        [(found,)] = db.execute(query).fetchall()
    return str(found)


def test_concurrent_runs_of_several_dates_all_commit_their_own_day(airflow_env, tmp_path):
    lake = tmp_path / "lake"
    write_deltalake(
        str(lake / "events"),
        pa.concat_tables([events(day, range(EVENTS_PER_DAY), 1.0) for day in DATES]),
        partition_by=["day"],
    )
    (lake / "staging" / "events").mkdir(parents=True)
    for day in DATES:  # each day's extract updates events 40-49 and adds events 50-59
        pq.write_table(events(day, range(40, 60), 2.0), lake / "staging" / "events" / f"{day}.parquet")

    homes = [tmp_path / f"airflow-{day}" for day in DATES]
    runs = []
    for day, home in zip(DATES, homes, strict=True):
        home.mkdir()
        shutil.copy(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db", home / "airflow.db")
        env = {
            **airflow_env,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).parent / "dags"),
            "DELTAMERGE_LAKE": str(lake),
        }
        runs.append(
            subprocess.Popen(
                ["airflow", "dags", "test", "deltamerge_daily_events", day],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [run.communicate()[0] for run in runs]

    for run, output in zip(runs, outputs, strict=True):
        assert run.returncode == 0, output[-4000:]
    table = DeltaTable(str(lake / "events"))
    assert table.version() == len(DATES)  # one commit per date, none lost
    rows = table.to_pyarrow_table().to_pylist()
    assert len(rows) == len(DATES) * 60
    assert sum(r["value"] == 2.0 for r in rows) == len(DATES) * 20
    committed_by = sorted(provenance_of(entry).get("runId", "") for entry in table.history()[: len(DATES)])
    assert committed_by == sorted(run_id(home) for home in homes)
    for day, home in zip(DATES, homes, strict=True):
        metrics = xcom_value({"AIRFLOW_HOME": str(home)}, "deltamerge_daily_events", "merge_day")
        assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (10, 10), day
        # Only the run's own day was read: the other days' files were skipped before the join.
        assert (metrics["numTargetFilesAfterSkipping"], metrics["numTargetPartitionsAfterSkipping"]) == (1, 1)
