"""``python -m bench first-dag``: what the README's first DAG costs, from the task's start to its success.

The README's "Your first DAG" as a user runs it: its table and extract written by its own code block, its
DAG file as printed, a fresh Airflow home on SQLite, and ``airflow dags test my_first_merge 2024-01-02``.
Each run gets a fresh table and a fresh copy of a migrated metadata database (the migration is not timed).
Two ways: with no ``spark_default`` connection, as the README has it (spark-submit on ``local[*]``), and
with ``spark_default`` naming a warm Spark Connect server (``local[*]`` too), started once and reported on
its own. They alternate run by run, so a shared machine's drifts fall on both alike.

Three figures per run: the task instance's start to its end as Airflow's metadata database records them
(what the UI shows as the task's duration), the merge's own time from its XCom value (the headline's
figure), and the whole ``airflow dags test`` command (its start, the DAG's parse and the run).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.job_contract import SPARK_STARTED
from bench.connect_server import connection_of, server_for
from bench.overhead import WAYS, Way, WaysResult, parse_ways
from bench.result_files import write_result

ROOT = Path(__file__).resolve().parent.parent
README_LAKE = "/tmp/my-lake"
DAG_ID = "my_first_merge"
TASK_ID = "merge_orders"
LOGICAL_DATE = "2024-01-02"
AIRFLOW = str(Path(sys.executable).parent / "airflow")


def readme_first_dag_blocks(title: str = "Your first DAG", document: str = "README.md") -> list[str]:
    """The fenced code blocks of section ``title`` of ``document`` (the README, or a page under the
    repository), in order, without their indent: for "Your first DAG" the table and extract, the DAG, the
    commands."""
    readme = (ROOT / document).read_text()
    section = readme.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^( *)```\w+\n(.*?)^\1```$", section, flags=re.MULTILINE | re.DOTALL)
    return [re.sub(rf"^{indent}", "", body, flags=re.MULTILINE) for indent, body in blocks]


def readme_dag_in(work: Path) -> tuple[str, Path]:
    """A fresh ``work`` with the README's DAG file in its ``dags`` folder, its lake moved to ``work/my-lake``:
    the README's code block that writes the table and extract, and that lake."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "dags").mkdir(parents=True)
    lake = work / "my-lake"
    setup, dag, _ = readme_first_dag_blocks()
    (work / "dags" / f"{DAG_ID}.py").write_text(dag.replace(README_LAKE, str(lake)))
    return setup, lake


def median_range(seconds: Sequence[float]) -> str:
    """A report's cell: the median (min-max)."""
    return f"{statistics.median(seconds):.1f} ({min(seconds):.1f}-{max(seconds):.1f})"


def server_sentence(result: WaysResult, ways: Sequence[Way]) -> str:
    """The report's sentence on the Connect server's start, when a way used it."""
    if "connect" not in ways:
        return ""
    return (
        f" The Connect server (`local[*]`) started once in {result.server_startup_seconds:.1f} s, in no "
        "figure below."
    )


# A log line's time, as Airflow's console log starts it: "2026-11-27T12:04:37.385385Z [info ...".
LOG_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z) \[")
# The lines that open each phase after the first, in order (Airflow's, the operator's, the job's).
PHASE_OPENINGS = (
    "[DAG TEST] running task",
    "Pre-flight checks passed",
    SPARK_STARTED,
    "Committed version",
    "[DAG TEST] end task",
)
PHASES = ("airflow", "task start", "spark start", "merge", "finish", "airflow end")
PHASE_MEANINGS = {
    "airflow": "the command's start to its task's: Airflow's CLI, the DAG's parse, the run's creation",
    "task start": "the task's process, the operator's rendering and pre-flight checks",
    "spark start": "spark-submit's JVM and the job's session, or on Connect the job's imports and session in "
    "the task's process",
    "merge": "the job's log read, plan, Spark jobs, to the commit",
    "finish": "the job's end (Spark's stop) and the task's: XCom, asset event",
    "airflow end": "the run marked done, the command's exit",
}


class PhasedRun(Protocol):
    """A run whose time a report splits into phases: its way, and its seconds per phase (empty if none)."""

    @property
    def way(self) -> Way: ...

    @property
    def phases(self) -> dict[str, float]: ...


@dataclass(frozen=True)
class FirstDagRun:
    """One ``airflow dags test`` of the first DAG: seconds of the task, of the merge, of the command."""

    way: Way
    run: int
    task: float
    merge: float
    command: float
    inserted: int
    updated: int
    # Seconds per phase (``PHASES``); empty when the command's log lacked a line that opens one.
    phases: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclass
class FirstDagResult(WaysResult):
    """Every run of both ways."""

    records: list[FirstDagRun] = dataclasses.field(default_factory=list)


def measure_first_dag(
    runs: int, work: Path, progress: Callable[[str], None], ways: Sequence[Way] = WAYS
) -> FirstDagResult:
    """Run the README's first DAG ``runs`` times each of ``ways``, alternating, under ``work``."""
    setup, lake = readme_dag_in(work)
    template = work / "airflow.db"
    progress("Migrating a fresh metadata database (not timed) ...")
    _airflow(["db", "migrate"], _env(work / "template-home", work, connection=None), template.parent)
    shutil.move(work / "template-home" / "airflow.db", template)
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with server_for(ways, work, progress) as server:
        result = FirstDagResult(
            started, runs, server.startup_seconds if server else 0.0, load_average=os.getloadavg()[0]
        )
        for run in range(runs):
            for way in ways if run % 2 == 0 else ways[::-1]:
                shutil.rmtree(lake, ignore_errors=True)
                subprocess.run([sys.executable, "-c", setup.replace(README_LAKE, str(lake))], check=True)
                home = work / f"home-{way}-{run}"
                home.mkdir()
                shutil.copy(template, home / "airflow.db")
                connection = connection_of(server) if server and way == "connect" else None
                record = _one_run(way, run, _env(home, work, connection), home)
                result.records.append(record)
                progress(
                    f"{way} run {run + 1}/{runs}: task {record.task:.1f} s (merge {record.merge:.1f} s), "
                    f"command {record.command:.1f} s"
                )
    return result


def _env(home: Path, work: Path, connection: dict[str, object] | None) -> dict[str, str]:
    """The environment of a user's shell with only this Airflow home, DAG folder and connection set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SPARK_SUBMIT_OPTS"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(work / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
    )
    if connection is not None:
        env["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps(connection)
    return env


def _airflow(arguments: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Run ``airflow <arguments>``: when it started (epoch seconds), its seconds, its output. A failure stops
    the benchmark with the command's output."""
    cwd.mkdir(parents=True, exist_ok=True)
    started, start = time.time(), time.monotonic()
    done = subprocess.run(
        [AIRFLOW, *arguments], env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"airflow {' '.join(arguments)} failed:\n{(done.stdout + done.stderr)[-4000:]}")
    return started, seconds, done.stdout + done.stderr


def _one_run(way: Way, run: int, env: dict[str, str], home: Path) -> FirstDagRun:
    started, command, output = _airflow(["dags", "test", DAG_ID, LOGICAL_DATE], env, home)
    task, metrics = task_figures(home / "airflow.db")
    return FirstDagRun(
        way,
        run,
        task,
        metrics[m.EXECUTION_TIME_MS] / 1000,
        command,
        metrics[m.NUM_TARGET_ROWS_INSERTED],
        metrics[m.NUM_TARGET_ROWS_UPDATED],
        run_phases(output, started, started + command),
    )


def run_phases(output: str, started: float, ended: float) -> dict[str, float]:
    """Seconds per phase (``PHASES``) of one ``airflow dags test``, split by the times of the first log line
    that opens each phase; empty when a line is missing (a failed or changed log)."""
    stamps: list[tuple[float, str]] = []
    for line in output.splitlines():
        stamp = LOG_STAMP.match(line)
        if stamp:
            stamps.append((datetime.datetime.fromisoformat(stamp[1]).timestamp(), line))
    return split_phases(stamps, PHASE_OPENINGS, PHASES, started, ended)


def split_phases(
    stamps: Sequence[tuple[float, str]],
    openings: Sequence[str],
    phases: Sequence[str],
    started: float,
    ended: float,
) -> dict[str, float]:
    """Seconds per phase of ``phases``: the first from ``started`` to the first of the timed lines
    (``stamps``) that holds ``openings[0]``, each next one from there to the first later line that holds the
    next opening, the last to ``ended``; empty when a line is missing."""
    bounds = [started]
    for marker in openings:
        at = next((t for t, line in stamps if marker in line and t >= bounds[-1]), None)
        if at is None:
            return {}
        bounds.append(at)
    bounds.append(ended)
    edges = zip(phases, bounds[:-1], bounds[1:], strict=True)
    return {name: round(end - start, 3) for name, start, end in edges}


def task_figures(database: Path) -> tuple[float, dict[str, Any]]:
    """The merge task's seconds from its start to its end, and its XCom value, from a SQLite metadata
    database that holds one run of the first DAG.

    Raises:
        RuntimeError: the task did not succeed.
    """
    with sqlite3.connect(database) as db:
        start, end, state = db.execute(
            "SELECT start_date, end_date, state FROM task_instance WHERE dag_id = ? AND task_id = ?",
            (DAG_ID, TASK_ID),
        ).fetchone()
        (value,) = db.execute(
            "SELECT value FROM xcom WHERE dag_id = ? AND task_id = ? AND key = 'return_value'",
            (DAG_ID, TASK_ID),
        ).fetchone()
    if state != "success":
        raise RuntimeError(f"The task {DAG_ID}.{TASK_ID} ended {state}")
    seconds = (datetime.datetime.fromisoformat(end) - datetime.datetime.fromisoformat(start)).total_seconds()
    return seconds, dict(json.loads(value if isinstance(value, str) else value.decode()))


def write_first_dag(result: FirstDagResult, results_dir: Path) -> Path:
    """Write ``first-dag-<timestamp>.md/.json``; returns the report."""
    return write_result("first-dag", result, first_dag_markdown(result), results_dir)


def first_dag_markdown(result: FirstDagResult) -> str:
    ways = [way for way in WAYS if any(r.way == way for r in result.records)]

    def cell(way: Way, figure: str) -> str:
        return median_range([getattr(r, figure) for r in result.records if r.way == way])

    server = server_sentence(result, ways)
    return "\n".join(
        [
            "# The README's first DAG: the task's real time",
            "",
            f"Started {result.started}; engine {__version__}; {result.runs} run(s) each way, alternating; "
            f"{os.cpu_count()} cores; load average (1 min) at the start {result.load_average:.1f}. "
            f"`airflow dags test {DAG_ID} {LOGICAL_DATE}` on a fresh SQLite home, the README's table and "
            "DAG; *spark-submit*: no `spark_default` connection, as the README has it (`local[*]`); "
            f"*connect*: `spark_default` names a warm Spark Connect server.{server}",
            "",
            "Seconds are medians (min-max). *Task*: the task instance's start to its end in Airflow's "
            "metadata database (the UI's duration). *Merge*: the merge's own time (its XCom value's "
            "`executionTimeMs`, the headline's figure). *Command*: the whole `airflow dags test`, its start "
            "and the DAG's parse included.",
            "",
            "| way | task s | merge s | command s |",
            "|---|---|---|---|",
            *(f"| {w} | {cell(w, 'task')} | {cell(w, 'merge')} | {cell(w, 'command')} |" for w in ways),
            "",
            "## Where the time goes",
            "",
            "Medians per phase, seconds, split by the first log line of each (runs whose log lacked one are "
            "left out):",
            "",
            *phase_table(result.records, ways, PHASE_MEANINGS),
            "",
            "## Every run",
            "",
            "| run | way | task s | merge s | command s | inserted | updated |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {r.run + 1} | {r.way} | {r.task:.1f} | {r.merge:.1f} | {r.command:.1f} | {r.inserted} | "
                f"{r.updated} |"
                for r in result.records
            ),
            "",
        ]
    )


def phase_table(records: Sequence[PhasedRun], ways: Sequence[Way], meanings: dict[str, str]) -> list[str]:
    """A report's table of each phase's median seconds per way (``-`` where no run had phases), in the order
    of ``meanings``, with what each phase holds."""

    def median(way: Way, phase: str) -> str:
        seconds = [r.phases[phase] for r in records if r.way == way and r.phases]
        return f"{statistics.median(seconds):.1f}" if seconds else "-"

    return [
        f"| phase | {' | '.join(ways)} | what |",
        f"|---|{'---|' * len(ways)}---|",
        *(f"| {p} | {' | '.join(median(w, p) for w in ways)} | {what} |" for p, what in meanings.items()),
    ]


def first_dag_main(argv: Sequence[str], *, work: Path, results_dir: Path) -> int:
    """``python -m bench first-dag [--runs N] [--ways W,...]``: measure, write the report, say where."""
    parser = argparse.ArgumentParser(prog="python -m bench first-dag", description=__doc__)
    runs, ways = parse_ways(parser, argv, default_runs=3)
    result = measure_first_dag(runs, work, progress=lambda line: print(line, flush=True), ways=ways)
    print(f"Report: {write_first_dag(result, results_dir)}")
    return 0
