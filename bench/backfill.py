"""``python -m bench backfill``: a backfill of 30 small dates through a real scheduler, on a warm Spark
Connect server.

What a user runs when a month of small extracts arrives: the UI's backfill of ``deltamerge_small_dates``
(bench/dags/small_dates.py) over January 1-30 2024, each run one task that upserts its day's 60 rows into
that day of a 30,000-row table partitioned by day. Airflow runs as in production (tests/e2e's harness): API
server, scheduler (LocalExecutor) and DAG processor on 127.0.0.1, a PostgreSQL metadata database, and
``--at-once`` runs at a time (the backfill's ``max_active_runs`` and the executor's task slots). Set up
before the clock starts: the database, the services, the DAG parsed, the Connect server (``local[*]``, its
start reported on its own), and a backfill of January 31 alone, whose merge warms the server and Airflow's
first task start (a deployment's services run warm).

The figure is the whole backfill: from the REST call that creates it to the end of its last run. Per date,
from Airflow's metadata: the wait from the task's queueing to its start (the scheduler's and executor's
share), the task's start to its end (the UI's duration), and the merge's own time (its XCom value).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge import metrics as m
from bench.connect_server import connection_of, server_for
from bench.first_dag import median_range
from bench.result_files import write_result
from tests.e2e.airflow_services import Airflow, airflow_services
from tests.e2e.postgres import postgres_server

DAG_ID = "deltamerge_small_dates"
DAG_FOLDER = Path(__file__).parent / "dags"
DAYS = [datetime.date(2024, 1, day) for day in range(1, 31)]
WARM_UP_DAY = datetime.date(2024, 1, 31)
ROWS_PER_DAY = 1000
CHANGED, NEW = 50, 10  # of each day's extract: rows of the day updated, rows inserted
# Guards against a backfill that never ends, not speed checks.
PARSE_TIMEOUT, BACKFILL_TIMEOUT = 300, 1800


@dataclass(frozen=True)
class DateRun:
    """One date's run: seconds from its task's queueing to its start, the task's start to its end, the merge's
    own time; the rows the merge inserted and updated."""

    day: str
    queued_to_start: float
    task: float
    merge: float
    inserted: int
    updated: int


@dataclass
class BackfillResult:
    """The whole backfill and every date's run; the seconds the Connect server took to start (in no figure)
    and the machine's 1-minute load average as the backfill began."""

    started: str
    at_once: int
    server_startup_seconds: float
    load_average: float
    whole: float = 0.0
    commits: int = 0  # the table's version after the backfill: one commit per date, the warm-up's too
    state: dict[str, str] = dataclasses.field(default_factory=dict)  # each run's final state, by date
    records: list[DateRun] = dataclasses.field(default_factory=list)

    def disagreements(self) -> list[str]:
        """What went wrong: a run that did not succeed, a merge whose counts are not the extract's."""
        failed = [f"{day}: run {state}" for day, state in sorted(self.state.items()) if state != "success"]
        wrong = [
            f"{r.day}: inserted {r.inserted}, updated {r.updated} (expected {NEW}, {CHANGED})"
            for r in self.records
            if (r.inserted, r.updated) != (NEW, CHANGED)
        ]
        missing = [f"{len(self.state)} runs, not {len(DAYS)}"] if len(self.state) != len(DAYS) else []
        if self.commits != len(DAYS) + 1:
            missing.append(f"the table took {self.commits} commits, not {len(DAYS) + 1}")
        return failed + wrong + missing


def measure_backfill(at_once: int, work: Path, progress: Callable[[str], None]) -> BackfillResult:
    """Set up under ``work``, run the backfill ``at_once`` runs at a time, and read its figures."""
    shutil.rmtree(work, ignore_errors=True)
    lake = work / "lake"
    _write_lake(lake)
    env = user_env(work / "home")
    with (
        server_for(("connect",), work, progress) as server,
        postgres_server(work / "postgres.log", env) as postgres,
    ):
        assert server is not None
        services_env = {
            "DELTAMERGE_BENCH_LAKE": str(lake),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAG_FOLDER),
            "AIRFLOW__CORE__PARALLELISM": str(at_once),
            "AIRFLOW_CONN_SPARK_CONNECT": json.dumps(connection_of(server)),
        }
        with airflow_services(env, work / "airflow", services_env, postgres) as airflow:
            airflow.wait_for(
                "the DAG to be parsed", lambda: airflow.call("GET", f"dags/{DAG_ID}"), timeout=PARSE_TIMEOUT
            )
            airflow.call("PATCH", f"dags/{DAG_ID}", {"is_paused": False})
            progress(f"Warm-up: a backfill of {WARM_UP_DAY} alone (not timed) ...")
            warm_up = _backfill(airflow, WARM_UP_DAY, WARM_UP_DAY, 1)
            # A DAG takes one backfill at a time: the next waits until the scheduler has closed this one.
            airflow.wait_for(
                "the warm-up backfill to complete",
                lambda: airflow.call("GET", f"backfills/{warm_up}")["completed_at"],
                timeout=BACKFILL_TIMEOUT,
            )
            started = datetime.datetime.now(datetime.UTC)
            result = BackfillResult(
                started.strftime("%Y-%m-%dT%H:%M:%SZ"), at_once, server.startup_seconds, os.getloadavg()[0]
            )
            progress(f"Backfill of {len(DAYS)} dates, {at_once} at a time ...")
            _backfill(airflow, DAYS[0], DAYS[-1], at_once)
            airflow.wait_for(
                "every run of the backfill to finish",
                lambda: _finished(airflow, len(DAYS) + 1),
                timeout=BACKFILL_TIMEOUT,
            )
            _read_figures(airflow, result, started)
    result.commits = DeltaTable(str(lake / "sales")).version()
    return result


def _write_lake(lake: Path) -> None:
    """The table (``ROWS_PER_DAY`` rows of each day, the warm-up's too, a file per day) and each day's
    extract."""
    days = [*DAYS, WARM_UP_DAY]
    write_deltalake(
        str(lake / "sales"),
        pa.concat_tables(_rows(day, range(ROWS_PER_DAY), 1.0) for day in days),
        partition_by=["day"],
    )
    (lake / "extracts").mkdir(parents=True)
    for day in days:
        changed = range(ROWS_PER_DAY - CHANGED, ROWS_PER_DAY + NEW)
        pq.write_table(_rows(day, changed, 2.0), lake / "extracts" / f"{day}.parquet")


def _rows(day: datetime.date, ids: range, factor: float) -> pa.Table:
    return pa.table(
        {
            "day": pa.array([str(day)] * len(ids), pa.string()),
            "id": pa.array(list(ids), pa.int64()),
            "amount": pa.array([i * factor for i in ids], pa.float64()),
        }
    )


def user_env(home: Path) -> dict[str, str]:
    """A user's shell with only this Airflow home set (the services get their own on top), and this
    environment's ``airflow`` first on its path."""
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SPARK_SUBMIT_OPTS"))}
    path = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False", PATH=path)
    return env


def _backfill(airflow: Airflow, first: datetime.date, last: datetime.date, at_once: int) -> int:
    """Create a backfill as the UI's form does; its id."""
    body = {
        "dag_id": DAG_ID,
        "from_date": f"{first}T00:00:00Z",
        "to_date": f"{last}T00:00:00Z",
        "max_active_runs": at_once,
        "reprocess_behavior": "none",
    }
    return int(airflow.call("POST", "backfills", body)["id"])


def _finished(airflow: Airflow, runs: int) -> bool:
    """Whether the DAG has ``runs`` runs, each finished."""
    found = airflow.call("GET", f"dags/{DAG_ID}/dagRuns?limit=100")["dag_runs"]
    return len(found) == runs and all(r["state"] in ("success", "failed") for r in found)


def _read_figures(airflow: Airflow, result: BackfillResult, started: datetime.datetime) -> None:
    rows = airflow.query(
        "SELECT r.logical_date, r.state, r.end_date, t.queued_dttm, t.start_date, t.end_date, x.value "
        "FROM dag_run r JOIN task_instance t ON t.dag_id = r.dag_id AND t.run_id = r.run_id "
        "LEFT JOIN xcom x ON x.dag_id = r.dag_id AND x.run_id = r.run_id AND x.key = 'return_value' "
        "WHERE r.dag_id = :d ORDER BY r.logical_date",
        d=DAG_ID,
    )
    for logical_date, state, run_end, queued, task_start, task_end, value in rows:
        if logical_date.date() == WARM_UP_DAY:
            continue
        day = str(logical_date.date())
        result.state[day] = state
        if state != "success":
            continue
        result.whole = max(result.whole, (run_end - started).total_seconds())
        metrics = json.loads(value) if isinstance(value, str | bytes) else value
        result.records.append(
            DateRun(
                day,
                (task_start - queued).total_seconds(),
                (task_end - task_start).total_seconds(),
                metrics[m.EXECUTION_TIME_MS] / 1000,
                metrics[m.NUM_TARGET_ROWS_INSERTED],
                metrics[m.NUM_TARGET_ROWS_UPDATED],
            )
        )


def write_backfill(result: BackfillResult, results_dir: Path) -> Path:
    """Write ``backfill-<timestamp>.md/.json``; returns the report."""
    return write_result("backfill", result, backfill_markdown(result), results_dir)


def backfill_markdown(result: BackfillResult) -> str:
    def cell(figure: str) -> str:
        seconds = [getattr(r, figure) for r in result.records]
        if not seconds:
            return "-"
        return median_range(seconds)

    problems = result.disagreements()
    lines = [
        f"# A backfill of {len(DAYS)} small dates on a warm Spark Connect server",
        "",
        f"Started {result.started}; engine {__version__}; {os.cpu_count()} cores; load average (1 min) at "
        f"the start {result.load_average:.1f}. `{DAG_ID}` (bench/dags/small_dates.py) backfilled over "
        f"January 1-30 2024 through Airflow's REST API, {result.at_once} run(s) at a time, by a scheduler "
        f"(LocalExecutor) on PostgreSQL; each run upserts its day's {CHANGED + NEW} rows into that day of a "
        f"{ROWS_PER_DAY * (len(DAYS) + 1):,}-row table partitioned by day. One Connect server on "
        f"`local[*]`, started once in {result.server_startup_seconds:.1f} s; it "
        f"and Airflow's first task start were warmed by a backfill of {WARM_UP_DAY} alone (in no figure "
        "below).",
        "",
        "**Correctness:** "
        + (
            "every run succeeded and every merge inserted and updated the rows of its extract."
            if not problems
            else "; ".join(problems)
        ),
        "",
        f"**The whole backfill: {result.whole:.1f} s**, from the REST call that created it to its last run's "
        "end.",
        "",
        "Per date, medians (min-max) in seconds: *wait*, from the task's queueing to its start (the "
        "scheduler's and the executor's share); *task*, its start to its end (the UI's duration); *merge*, "
        "the merge's own time (its XCom value's `executionTimeMs`).",
        "",
        "| wait s | task s | merge s | tasks' time summed s |",
        "|---|---|---|---|",
        f"| {cell('queued_to_start')} | {cell('task')} | {cell('merge')} | "
        f"{sum(r.task for r in result.records):.1f} |",
        "",
        "## Every date",
        "",
        "| day | wait s | task s | merge s | inserted | updated |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r.day} | {r.queued_to_start:.1f} | {r.task:.1f} | {r.merge:.1f} | {r.inserted} | "
            f"{r.updated} |"
            for r in result.records
        ),
        "",
    ]
    return "\n".join(lines)


def backfill_main(argv: Sequence[str], *, work: Path, results_dir: Path) -> int:
    """``python -m bench backfill [--at-once N]``: measure, write the report, say where; exit status 1 when a
    run failed or a merge's counts were wrong."""
    parser = argparse.ArgumentParser(prog="python -m bench backfill", description=__doc__)
    parser.add_argument("--at-once", type=int, default=4, help="runs at a time (default 4)")
    args = parser.parse_args(argv)
    if args.at_once < 1:
        parser.error("--at-once must be at least 1")
    result = measure_backfill(args.at_once, work, progress=lambda line: print(line, flush=True))
    print(f"Report: {write_backfill(result, results_dir)}")
    problems = result.disagreements()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0
