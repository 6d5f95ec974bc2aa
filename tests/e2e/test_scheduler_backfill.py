"""A backfill of eight days, four runs at a time, under a real scheduler on PostgreSQL, with Clears and
retries while it runs.

``deltamerge_backfill`` (tests/e2e/dags/backfill_merges.py) merges each day's extract into one unpartitioned
table, whose one file every run rewrites, and into a table of 4 partitions, where the runs of days 4 apart
rewrite the same partition. Everything is driven through the REST API the UI uses, against the API server,
scheduler (LocalExecutor, 4 task slots) and DAG processor of a production-like Airflow (its metadata on
PostgreSQL), and the merges run through the session's Spark Connect server:

* the backfill of January 1-8 with ``max_active_runs`` 4;
* on January 3 and 6 the try of each merge that commits is killed right after its commit; the automatic retry
  returns it;
* as soon as January 1 succeeded, its extract is fixed and both its merges cleared, while later days run;
* as soon as January 3 succeeded, its extract is fixed and its partitioned merge cleared;
* January 8's merges wait until both Clears are made, so that the Clears come while the backfill runs however
  fast the machine is.

Then every row is right (a merge that committed over a concurrent one without its changes, a lost update,
leaves some day's rows as they were), and each table has one commit per day plus one per Clear of its merge,
each by its own run and Clear (a retry that merged again would add one).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge.delta.log.merge_commits import provenance_of
from tests.e2e.airflow_services import WAIT_TIMEOUT, Airflow, airflow_services
from tests.e2e.conftest import json_value

pytestmark = pytest.mark.slow

DAG_ID = "deltamerge_backfill"
ONE_TABLE, PARTITIONS = "merge_one_table", "merge_partitions"
TABLES = {ONE_TABLE: "accounts", PARTITIONS: "accounts_by_shard"}
DAYS = [dt.date(2024, 1, day) for day in range(1, 9)]
SHARDS = 4
IDS_PER_SHARD_BLOCK, CHANGED_PER_DAY = 100, 50
CRASH_DAYS = (DAYS[2], DAYS[5])
GATED_DAY = DAYS[-1]
# What is cleared, in order, each as soon as its day's run has succeeded: the day, the tasks, the extract's
# new factor.
CLEARS = ((DAYS[0], (ONE_TABLE, PARTITIONS), 2.0), (DAYS[2], (PARTITIONS,), 3.0))
# Guards against a run that never ends on a loaded 2-core machine, not speed checks.
BACKFILL_TIMEOUT = 900


def test_a_backfill_of_eight_days_four_at_a_time_with_clears_and_retries_loses_no_update(
    airflow_env, postgres, spark_connect_server, tmp_path
):
    lake, gate = tmp_path / "lake", tmp_path / "clears-made"
    for table in TABLES.values():
        write_deltalake(
            str(lake / table),
            base_accounts(),
            partition_by=["shard"] if table == "accounts_by_shard" else None,
        )
    factors = {task: dict.fromkeys(DAYS, 1.0) for task in TABLES}
    for day in DAYS:
        write_extract(lake, day, 1.0)
    server = spark_connect_server
    connection = {"conn_type": "spark_connect", "host": server.host, "port": server.port}
    env = {
        "DELTAMERGE_LAKE": str(lake),
        "AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).parent / "dags"),
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW_CONN_SPARK_CONNECT": json.dumps({**connection, "password": server.token}),
        "DELTAMERGE_TEST_CRASH_DAYS": ",".join(map(str, CRASH_DAYS)),
        "DELTAMERGE_TEST_GATED_DAY": str(GATED_DAY),
        "DELTAMERGE_TEST_GATE": str(gate),
    }
    with airflow_services(airflow_env, tmp_path / "airflow", env, postgres) as airflow:
        airflow.wait_for(
            "the DAG to be parsed", lambda: airflow.call("GET", f"dags/{DAG_ID}"), timeout=WAIT_TIMEOUT
        )
        airflow.call("PATCH", f"dags/{DAG_ID}", {"is_paused": False})
        body = {
            "dag_id": DAG_ID,
            "from_date": f"{DAYS[0]}T00:00:00Z",
            "to_date": f"{DAYS[-1]}T00:00:00Z",
            "max_active_runs": 4,
            "reprocess_behavior": "none",
        }
        airflow.call("POST", "backfills", body)
        run_ids = airflow.wait_for(
            "the backfill's 8 runs", lambda: backfill_runs(airflow), timeout=WAIT_TIMEOUT
        )

        unfinished_at_clears = []
        for day, tasks, factor in CLEARS:
            assert airflow.wait_for_run(DAG_ID, run_ids[day], timeout=BACKFILL_TIMEOUT) == "success", day
            unfinished_at_clears.append(sum(state not in FINISHED for state in run_states(airflow).values()))
            write_extract(lake, day, factor)
            for task in tasks:
                factors[task][day] = factor
            clear(airflow, run_ids[day], tasks)
        gate.touch()
        states = airflow.wait_for(
            "every run of the backfill to finish",
            lambda: (found := run_states(airflow)) and all(s in FINISHED for s in found.values()) and found,
            timeout=BACKFILL_TIMEOUT,
        )
        tries = task_tries(airflow)
        merges_at_once = most_merges_at_once(airflow, besides=run_ids[GATED_DAY])

    assert states == dict.fromkeys(run_ids.values(), "success"), states
    # The Clears came while the backfill was going on, and merges overlapped (else nothing was concurrent),
    # the gated day's waiting ones aside.
    assert all(unfinished > 0 for unfinished in unfinished_at_clears), unfinished_at_clears
    assert merges_at_once >= 2, merges_at_once
    cleared = Counter((day, task) for day, tasks, _ in CLEARS for task in tasks)
    for task, table in TABLES.items():
        dt_table = DeltaTable(str(lake / table))
        assert rows_of(dt_table.to_pyarrow_table()) == expected_rows(factors[task]), (
            f"{table}: rows lost or stale"
        )
        # One commit per day plus one per Clear: none lost, none twice.
        made = [provenance_of(entry) for entry in dt_table.history() if entry["operation"] == "MERGE"]
        by_day = {day: run_ids[day] for day in DAYS}
        expected = sorted(
            (by_day[day], clear_number) for day in DAYS for clear_number in range(cleared[(day, task)] + 1)
        )
        assert sorted((p["runId"], p["clearNumber"]) for p in made) == expected, table
        assert dt_table.version() == len(expected), table
        # The try that made the day's first commit was killed; a later try returned it instead of merging
        # again (the first try, unless it met concurrent commits until it gave up).
        for day in CRASH_DAYS:
            [first] = [p for p in made if p["runId"] == run_ids[day] and p["clearNumber"] == 0]
            assert first["tryNumber"] < tries[(run_ids[day], task)], (table, day, first)
    # Each partitioned merge read only its own day's shard.
    for day in DAYS:
        metrics = xcom(airflow, run_ids[day], PARTITIONS)
        assert metrics["numTargetPartitionsAfterSkipping"] == 1, (day, metrics)


FINISHED = ("success", "failed")


def base_accounts() -> pa.Table:
    """Accounts 0-799 at amount 0; account ``i`` is in shard ``(i // 100) % 4``."""
    ids = range(2 * SHARDS * IDS_PER_SHARD_BLOCK)
    return accounts(ids, [(i // IDS_PER_SHARD_BLOCK) % SHARDS for i in ids], 0.0, "base")


def accounts(ids: range | list[int], shards: list[int], amount: float, day: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "shard": pa.array(shards, pa.int32()),
            "amount": pa.array([amount] * len(shards), pa.float64()),
            "day": pa.array([day] * len(shards)),
        }
    )


def changed_ids(day: dt.date) -> list[int]:
    """The day's accounts: 50 of the table's, all in shard ``index % 4``, and 50 new ones in that shard."""
    index = DAYS.index(day)
    start = index * IDS_PER_SHARD_BLOCK
    return [*range(start, start + CHANGED_PER_DAY), *range(1000 + start, 1000 + start + CHANGED_PER_DAY)]


def day_amount(day: dt.date, factor: float) -> float:
    return (DAYS.index(day) + 1) * factor


def write_extract(lake: Path, day: dt.date, factor: float) -> None:
    ids = changed_ids(day)
    extract = accounts(ids, [DAYS.index(day) % SHARDS] * len(ids), day_amount(day, factor), str(day))
    path = lake / "staging" / "accounts" / f"{day}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(extract, path)


def expected_rows(factors: dict[dt.date, float]) -> dict[int, tuple[int, float, str]]:
    expected = rows_of(base_accounts())
    for day, factor in factors.items():
        for account in changed_ids(day):
            expected[account] = (DAYS.index(day) % SHARDS, day_amount(day, factor), str(day))
    return expected


def rows_of(table: pa.Table) -> dict[int, tuple[int, float, str]]:
    """Each account's row; an account twice (a merge's rewrite of a file kept beside another's) fails."""
    found = {r["id"]: (r["shard"], r["amount"], r["day"]) for r in table.to_pylist()}
    duplicates = table.num_rows - len(found)
    assert duplicates == 0, "accounts twice: a merge's rewrite of a file kept beside another's"
    return found


def backfill_runs(airflow: Airflow) -> dict[dt.date, str]:
    """The backfill's run of each day, once all 8 exist."""
    runs = airflow.call("GET", f"dags/{DAG_ID}/dagRuns?limit=100")["dag_runs"]
    found = {dt.date.fromisoformat(r["logical_date"][:10]): r["dag_run_id"] for r in runs}
    return found if set(found) == set(DAYS) else {}


def run_states(airflow: Airflow) -> dict[str, str]:
    runs = airflow.call("GET", f"dags/{DAG_ID}/dagRuns?limit=100")["dag_runs"]
    return {r["dag_run_id"]: r["state"] for r in runs}


def clear(airflow: Airflow, run_id: str, tasks: tuple[str, ...]) -> None:
    """Clear the run's ``tasks`` as the UI's Clear does, and wait until the run is queued again."""
    body = {"dag_run_id": run_id, "task_ids": list(tasks), "dry_run": False, "only_failed": False}
    airflow.call("POST", f"dags/{DAG_ID}/clearTaskInstances", body)
    airflow.wait_for(
        f"run {run_id} to be queued again",
        lambda: airflow.run_state(DAG_ID, run_id) != "success",
        timeout=WAIT_TIMEOUT,
    )


def task_tries(airflow: Airflow) -> dict[tuple[str, str], int]:
    found = airflow.query("SELECT run_id, task_id, try_number FROM task_instance WHERE dag_id = :d", d=DAG_ID)
    return {(run_id, task_id): int(number) for run_id, task_id, number in found}


def most_merges_at_once(airflow: Airflow, *, besides: str) -> int:
    """The most tries of the merges that ran at the same time, from every try's start and end, the run
    ``besides`` left out."""
    spans = airflow.query(
        "SELECT start_date, end_date FROM task_instance WHERE dag_id = :d AND run_id != :r "
        "AND start_date IS NOT NULL UNION ALL SELECT start_date, end_date FROM task_instance_history "
        "WHERE dag_id = :d AND run_id != :r AND start_date IS NOT NULL",
        d=DAG_ID,
        r=besides,
    )
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans if end is not None])
    running = most = 0
    for _, change in edges:
        running += change
        most = max(most, running)
    return most


def xcom(airflow: Airflow, run_id: str, task_id: str) -> Any:
    [(value,)] = airflow.query(
        "SELECT value FROM xcom WHERE dag_id = :d AND run_id = :r AND task_id = :t AND key = 'return_value'",
        d=DAG_ID,
        r=run_id,
        t=task_id,
    )
    return json_value(value)
