"""``python -m bench first-dag-scheduled``: the README's first DAG as a deployment runs it, by a scheduler.

``python -m bench first-dag`` times ``airflow dags test``, as the README runs it. There the task's start holds
Airflow's in-process execution API answering its first request, seconds that a deployment's long-lived API
server does not pay for each task. Here the same table, extract and DAG file run as in production
(tests/e2e's harness): API server, scheduler (LocalExecutor) and DAG processor on 127.0.0.1, on PostgreSQL.
Each run is a DAG run triggered through the REST API, as the UI's Trigger button does, on a fresh copy of the
README's table. Both ways alternate run by run: *spark-submit* with no ``spark_default`` connection, as the
README has it, and *connect* with ``spark_default`` set (through the REST API) to a warm Spark Connect server.
Before the clock: the services, the DAG's parse, the Connect server, and one run each way (the services'
first task start and the server's first merge: a deployment runs warm).

Per run, from Airflow's metadata: the task's start to its end (the UI's duration) and the merge's own time
(its XCom value); from the task's log, the task's time split by the first line of each phase.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.job_contract import SPARK_STARTED
from bench.backfill import user_env
from bench.connect_server import ConnectServer, server_for
from bench.first_dag import (
    DAG_ID,
    README_LAKE,
    TASK_ID,
    median_range,
    phase_table,
    readme_dag_in,
    server_sentence,
    split_phases,
)
from bench.overhead import WAYS, Way, WaysResult, parse_ways
from bench.result_files import write_result
from tests.e2e.airflow_services import Airflow, airflow_services
from tests.e2e.postgres import postgres_server

FIRST_DAY = datetime.date(2024, 1, 2)  # the README's extract; each run merges a copy of it for its own day
README_EXTRACT = "staging/2024-01-02.parquet"
# Guards against a run that never ends, not speed checks.
PARSE_TIMEOUT, RUN_TIMEOUT = 300, 600
# The lines of the task's log that open each phase after the task's start, in order (the operator's, the
# job's); the last phase ends at the task's end.
PHASE_OPENINGS = ("Pre-flight checks passed", SPARK_STARTED, "Committed version")
PHASES = ("task start", "spark start", "merge", "finish")
PHASE_MEANINGS = {
    "task start": "the task's process (its DAG file parsed), the operator's rendering and pre-flight checks",
    "spark start": "spark-submit's JVM and the job's session, or on Connect the job's imports and session in "
    "the task's process",
    "merge": "the job's log read, plan, Spark jobs, to the commit",
    "finish": "the job's end (Spark's stop) and the task's: XCom, asset event, state",
}


@dataclass(frozen=True)
class ScheduledRun:
    """One triggered run of the first DAG: seconds from its task's queueing to its start, of the task, of the
    merge; the rows it inserted and updated; seconds per phase (``PHASES``, empty when the task's log lacked a
    line that opens one)."""

    way: Way
    run: int
    queued_to_start: float
    task: float
    merge: float
    inserted: int
    updated: int
    phases: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclass
class ScheduledResult(WaysResult):
    """Every timed run of both ways."""

    records: list[ScheduledRun] = dataclasses.field(default_factory=list)


def measure_scheduled_first_dag(
    runs: int, work: Path, progress: Callable[[str], None], ways: Sequence[Way] = WAYS
) -> ScheduledResult:
    """Run the README's first DAG through a scheduler ``runs`` times each of ``ways`` (after one untimed run
    each), alternating, under ``work``."""
    setup, lake = readme_dag_in(work)
    env = user_env(work / "home")
    with (
        server_for(ways, work, progress) as server,
        postgres_server(work / "postgres.log", env) as postgres,
    ):
        services_env = {
            "AIRFLOW__CORE__DAGS_FOLDER": str(work / "dags"),
            "AIRFLOW__CORE__PARALLELISM": "1",
            # Only the triggered runs: the DAG is @daily, and its scheduled runs would ask for today's extract
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        }
        with airflow_services(env, work / "airflow", services_env, postgres) as airflow:
            airflow.wait_for(
                "the DAG to be parsed", lambda: airflow.call("GET", f"dags/{DAG_ID}"), timeout=PARSE_TIMEOUT
            )
            airflow.call("PATCH", f"dags/{DAG_ID}", {"is_paused": False})
            result = ScheduledResult(
                datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                runs,
                server.startup_seconds if server else 0.0,
                load_average=os.getloadavg()[0],
            )
            day = FIRST_DAY
            for run in range(-1, runs):  # run -1: the warm-up, not timed
                for way in ways if run % 2 == 0 else ways[::-1]:
                    _fresh_lake(setup, lake, day)
                    _use_way(airflow, way, server)
                    record = _one_run(airflow, work / "airflow", way, run, day)
                    day += datetime.timedelta(days=1)
                    if run < 0:
                        progress(f"{way} warm-up: task {record.task:.1f} s (not timed)")
                        continue
                    result.records.append(record)
                    progress(
                        f"{way} run {run + 1}/{runs}: task {record.task:.1f} s (merge {record.merge:.1f} s), "
                        f"waited {record.queued_to_start:.1f} s for it"
                    )
    return result


def _fresh_lake(setup: str, lake: Path, day: datetime.date) -> None:
    """The README's table and extract, the extract also as ``day``'s (the run's ``{{ ds }}``)."""
    shutil.rmtree(lake, ignore_errors=True)
    subprocess.run([sys.executable, "-c", setup.replace(README_LAKE, str(lake))], check=True)
    extract = lake / "staging" / f"{day}.parquet"
    if extract != lake / README_EXTRACT:
        shutil.copy(lake / README_EXTRACT, extract)


def _use_way(airflow: Airflow, way: Way, server: ConnectServer | None) -> None:
    """``spark_default`` as ``way`` needs it: none for spark-submit, the Connect server's for connect."""
    existing = airflow.call("GET", "connections?limit=100")["connections"]
    if any(c["connection_id"] == "spark_default" for c in existing):
        airflow.call("DELETE", "connections/spark_default")
    if way == "connect":
        assert server is not None
        airflow.call(
            "POST",
            "connections",
            {
                "connection_id": "spark_default",
                "conn_type": "spark_connect",
                "host": server.host,
                "port": server.port,
                "password": server.token,
            },
        )


def _one_run(airflow: Airflow, home: Path, way: Way, run: int, day: datetime.date) -> ScheduledRun:
    body = {"logical_date": f"{day}T00:00:00Z", "conf": {}}
    run_id = str(airflow.call("POST", f"dags/{DAG_ID}/dagRuns", body)["dag_run_id"])
    state = airflow.wait_for_run(DAG_ID, run_id, timeout=RUN_TIMEOUT)
    if state != "success":
        raise RuntimeError(f"The run {run_id} of {DAG_ID} ended {state}: see {home / 'logs'}")
    ((queued, start, end, value),) = airflow.query(
        "SELECT t.queued_dttm, t.start_date, t.end_date, x.value FROM task_instance t "
        "JOIN xcom x ON x.dag_id = t.dag_id AND x.run_id = t.run_id AND x.task_id = t.task_id "
        "AND x.key = 'return_value' WHERE t.dag_id = :d AND t.run_id = :r AND t.task_id = :t",
        d=DAG_ID,
        r=run_id,
        t=TASK_ID,
    )
    metrics: dict[str, Any] = json.loads(value) if isinstance(value, str | bytes) else value
    log = next((home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}").glob(f"task_id={TASK_ID}/*.log"))
    return ScheduledRun(
        way,
        run,
        (start - queued).total_seconds(),
        (end - start).total_seconds(),
        metrics[m.EXECUTION_TIME_MS] / 1000,
        metrics[m.NUM_TARGET_ROWS_INSERTED],
        metrics[m.NUM_TARGET_ROWS_UPDATED],
        task_phases(log.read_text(), start.timestamp(), end.timestamp()),
    )


def task_phases(log: str, started: float, ended: float) -> dict[str, float]:
    """Seconds per phase (``PHASES``) of one task, split by the time of the first line of its log (Airflow's
    JSON lines, each with its ``timestamp`` and ``event``) that opens each; empty when one is missing."""
    stamps: list[tuple[float, str]] = []
    for line in log.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and "timestamp" in entry:
            at = datetime.datetime.fromisoformat(str(entry["timestamp"])).timestamp()
            stamps.append((at, str(entry.get("event", ""))))
    return split_phases(stamps, PHASE_OPENINGS, PHASES, started, ended)


def write_scheduled_first_dag(result: ScheduledResult, results_dir: Path) -> Path:
    """Write ``first-dag-scheduled-<timestamp>.md/.json``; returns the report."""
    return write_result("first-dag-scheduled", result, scheduled_markdown(result), results_dir)


def scheduled_markdown(result: ScheduledResult) -> str:
    ways = [way for way in WAYS if any(r.way == way for r in result.records)]

    def cell(way: Way, figure: str) -> str:
        return median_range([getattr(r, figure) for r in result.records if r.way == way])

    server = server_sentence(result, ways)
    return "\n".join(
        [
            "# The README's first DAG through a scheduler: the task's real time",
            "",
            f"Started {result.started}; engine {__version__}; {result.runs} run(s) each way, alternating, "
            f"after one untimed run each; {os.cpu_count()} cores; load average (1 min) at the start "
            f"{result.load_average:.1f}. The README's table, extract and DAG; each run triggered through "
            "Airflow's REST API and run by a scheduler (LocalExecutor) on PostgreSQL, one task at a time; "
            "*spark-submit*: no `spark_default` connection, as the README has it (`local[*]`); *connect*: "
            f"`spark_default` names a warm Spark Connect server.{server}",
            "",
            "Seconds are medians (min-max). *Task*: the task instance's start to its end in Airflow's "
            "metadata database (the UI's duration). *Merge*: the merge's own time (its XCom value's "
            "`executionTimeMs`). *Wait*: the task's queueing to its start (the scheduler's and the "
            "executor's share, in no task figure).",
            "",
            "| way | task s | merge s | wait s |",
            "|---|---|---|---|",
            *(
                f"| {w} | {cell(w, 'task')} | {cell(w, 'merge')} | {cell(w, 'queued_to_start')} |"
                for w in ways
            ),
            "",
            "## Where the task's time goes",
            "",
            "Medians per phase, seconds, split by the first line of each in the task's log (runs whose log "
            "lacked one are left out):",
            "",
            *phase_table(result.records, ways, PHASE_MEANINGS),
            "",
            "## Every run",
            "",
            "| run | way | task s | merge s | wait s | inserted | updated |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {r.run + 1} | {r.way} | {r.task:.1f} | {r.merge:.1f} | {r.queued_to_start:.1f} | "
                f"{r.inserted} | {r.updated} |"
                for r in result.records
            ),
            "",
        ]
    )


def scheduled_first_dag_main(argv: Sequence[str], *, work: Path, results_dir: Path) -> int:
    """``python -m bench first-dag-scheduled [--runs N] [--ways W,...]``: measure, write the report, say
    where."""
    parser = argparse.ArgumentParser(prog="python -m bench first-dag-scheduled", description=__doc__)
    runs, ways = parse_ways(parser, argv, default_runs=3)
    result = measure_scheduled_first_dag(runs, work, progress=lambda line: print(line, flush=True), ways=ways)
    print(f"Report: {write_scheduled_first_dag(result, results_dir)}")
    return 0
