"""``python -m bench overhead``: the fixed cost of a small merge, spark-submit against a Spark Connect server.

The same 60-row upsert into a 1,000-row table runs through ``DeltaMergeHook.run_merge``, as a task runs it:
by spark-submit on ``local[*]``, and against one Spark Connect server (``local[*]`` too) that this mode starts
once and reports on its own. Two figures per run: seconds from the hook's call to the job's "Spark started"
line (the merge's own work starts there; the hook notes when it came) and to the hook's return. The ways
alternate run by run, so a shared machine's drifts fall on both alike.

Each run is also split into phases by when the job's own lines reached the hook (``SubmitOutputLog``):
the job's start line says how long its session took, and the snapshot, plan, scan and commit lines close
the phases after it (``PHASES``). On Connect each run also times the queries and analyses the merge sent to
the server, by the package's call site that sent them (bench/connect_calls.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all
from bench.connect_calls import timing_connect_calls
from bench.connect_server import connection_of, server_for
from bench.result_files import write_result

Way = Literal["spark-submit", "connect"]
WAYS: tuple[Way, ...] = ("spark-submit", "connect")
TARGET_ROWS = 1000
# Ids 950-1009: 50 rows update the target's last ones, 10 are new.
SOURCE_IDS = range(950, 1010)
# Connections as the hook reads them, from the environment (AIRFLOW_CONN_<ID>).
CONN_IDS: dict[Way, str] = {"spark-submit": "bench_spark_submit", "connect": "bench_spark_connect"}
# The job's start line, "Spark started in 3.2 s: ..." (job/main.py): its session's seconds.
SESSION_SECONDS = re.compile(r"^Spark started in ([0-9.]+) s")
# A merge's phases, each closed by the first job line that starts with its text (engine/merge.py's lines);
# "launch" and "session" come from the start line, "stop" runs to the hook's return.
PHASE_ENDS: tuple[tuple[str, str], ...] = (
    ("log read", "Snapshot:"),
    ("plan", "Plan:"),
    ("Spark jobs", "Scan:"),
    ("commit", "Committed version"),
)
PHASES: tuple[str, ...] = ("launch", "session", *(name for name, _ in PHASE_ENDS), "stop")
PHASE_MEANINGS = {
    "launch": "from the hook's call to the job's start: spark-submit's JVM and the job's imports (on Connect "
    "the job's imports in this process, once)",
    "session": "the job's SparkSession, as its start line times it",
    "log read": "to the snapshot's line: the conf checks, the table's log",
    "plan": "to the plan's line: the source loaded, resolution, the materialization decision, pruning",
    "Spark jobs": "to the scan's line: finding the touched files, the rewrite and inserts",
    "commit": "to the commit's line: the record counts checked, the log entry written",
    "stop": "to the hook's return: the session stopped, the answer read",
}


@dataclass(frozen=True)
class OverheadRun:
    """One merge: seconds from the hook's call to the merge's start, and to the hook's return."""

    way: Way
    run: int
    to_merge_start: float
    whole: float
    inserted: int
    updated: int
    # Seconds per phase (``PHASES``); empty when the job's lines did not say them all.
    phases: dict[str, float] = dataclasses.field(default_factory=dict)
    # On Connect, per "kind call site" (bench/connect_calls.py): [calls, seconds].
    connect_calls: dict[str, list[float]] = dataclasses.field(default_factory=dict)


@dataclass
class WaysResult:
    """A measurement of both ways: when it started, runs per way, the seconds the Connect server took to
    start (in no run's figures), and the machine's 1-minute load average as the runs began (what else was
    running on a shared machine)."""

    started: str
    runs: int
    server_startup_seconds: float
    load_average: float = 0.0


@dataclass
class OverheadResult(WaysResult):
    """Every run of both ways."""

    records: list[OverheadRun] = dataclasses.field(default_factory=list)


def measure_overhead(
    runs: int, work: Path, progress: Callable[[str], None], ways: Sequence[Way] = WAYS
) -> OverheadResult:
    """Run the small merge ``runs`` times each of ``ways``, alternating, each on a fresh table under
    ``work``."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = work / "source.parquet"
    pq.write_table(orders(SOURCE_IDS, 2.0), source)
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    os.environ[f"AIRFLOW_CONN_{CONN_IDS['spark-submit'].upper()}"] = json.dumps(
        {"conn_type": "spark", "host": "local[*]"}
    )
    with server_for(ways, work, progress) as server:
        result = OverheadResult(
            started, runs, server.startup_seconds if server else 0.0, load_average=os.getloadavg()[0]
        )
        if server:
            os.environ[f"AIRFLOW_CONN_{CONN_IDS['connect'].upper()}"] = json.dumps(connection_of(server))
        for run in range(runs):
            for way in ways if run % 2 == 0 else ways[::-1]:
                record = _one_merge(way, run, work / f"{way}-{run}", source)
                result.records.append(record)
                progress(
                    f"{way} run {run + 1}/{runs}: merge started after {record.to_merge_start:.1f} s, "
                    f"done after {record.whole:.1f} s"
                )
    return result


def _one_merge(way: Way, run: int, table: Path, source: Path) -> OverheadRun:
    write_deltalake(str(table), orders(range(TARGET_ROWS), 1.0))
    spec = MergeSpec(
        target=str(table),
        source=PathSource(str(source)),
        condition="t.order_id = s.order_id",
        clauses=(update_all(), insert_all()),
    )
    hook = DeltaMergeHook(CONN_IDS[way])
    with timing_connect_calls() as calls:
        start = time.monotonic()
        metrics = hook.run_merge(spec)
        end = time.monotonic()
    ready = hook.session_ready_at()
    if ready is None:
        raise RuntimeError(f"The {way} job never said its Spark session was up")
    return OverheadRun(
        way,
        run,
        ready - start,
        end - start,
        metrics["numTargetRowsInserted"],
        metrics["numTargetRowsUpdated"],
        phase_seconds(hook.job_lines(), start, end),
        {f"{kind} {site}": [len(seconds), sum(seconds)] for (kind, site), seconds in calls.calls.items()},
    )


def phase_seconds(lines: Sequence[tuple[float, str]], start: float, end: float) -> dict[str, float]:
    """Seconds per phase (``PHASES``) of a merge called at ``start`` and returned at ``end``, from the job's
    lines as they came (``time.monotonic()``, text); empty when a line that closes a phase is missing."""
    session = next((SESSION_SECONDS.match(text) for _, text in lines if SESSION_SECONDS.match(text)), None)
    ready = next((at for at, text in lines if SESSION_SECONDS.match(text)), None)
    if session is None or ready is None:
        return {}
    phases = {"launch": ready - start - float(session.group(1)), "session": float(session.group(1))}
    since = ready
    for name, opening in PHASE_ENDS:
        at = next((at for at, text in lines if at >= since and text.startswith(opening)), None)
        if at is None:
            return {}
        phases[name], since = at - since, at
    phases["stop"] = end - since
    return phases


def orders(ids: range, amount_factor: float) -> pa.Table:
    """Orders ``ids``, each amount its id times ``amount_factor``."""
    return pa.table(
        {
            "order_id": pa.array(list(ids), pa.int64()),
            "amount": pa.array([i * amount_factor for i in ids], pa.float64()),
        }
    )


def write_overhead(result: OverheadResult, results_dir: Path) -> Path:
    """Write ``overhead-<timestamp>.md/.json``; returns the report."""
    return write_result("overhead", result, overhead_markdown(result), results_dir)


def overhead_markdown(result: OverheadResult) -> str:
    ways = [way for way in WAYS if any(r.way == way for r in result.records)]
    medians = {
        (way, figure): statistics.median(getattr(r, figure) for r in result.records if r.way == way)
        for way in ways
        for figure in ("to_merge_start", "whole")
    }

    def cell(way: Way, figure: str) -> str:
        seconds = [getattr(r, figure) for r in result.records if r.way == way]
        return f"{medians[way, figure]:.1f} ({min(seconds):.1f}-{max(seconds):.1f})"

    lines = [
        "# Fixed cost per merge: spark-submit against a Spark Connect server",
        "",
        f"Started {result.started}; engine {__version__}; {result.runs} run(s) each way, alternating; "
        f"{os.cpu_count()} cores. {len(SOURCE_IDS)} source rows upserted into a {TARGET_ROWS:,}-row table "
        "through `DeltaMergeHook.run_merge`, as a task runs it; spark-submit on `local[*]`"
        + (
            f", and one Connect server on `local[*]`, started once in {result.server_startup_seconds:.1f} s "
            "(in no figure below)."
            if "connect" in ways
            else " only."
        ),
        f"Load average (1 min) at the start: {result.load_average:.1f}.",
        "",
        "Seconds are medians (min-max). *To merge start*: from the hook's call to the job's "
        "\"Spark started\" line, where the merge's own work begins. *Whole*: to the hook's return.",
        "",
        "| way | to merge start s | whole s |",
        "|---|---|---|",
        *(f"| {way} | {cell(way, 'to_merge_start')} | {cell(way, 'whole')} |" for way in ways),
        *(
            [
                "| **spark-submit ÷ connect** | "
                + " | ".join(
                    f"**{medians['spark-submit', f] / medians['connect', f]:.1f}x**"
                    for f in ("to_merge_start", "whole")
                )
                + " |"
            ]
            if len(ways) == len(WAYS)
            else []
        ),
        "",
        "## Where the time goes",
        "",
        "Medians per phase, seconds (runs whose lines lacked a phase are left out):",
        "",
        *phase_table(result),
        "",
        *connect_calls_table(result),
        "## Every run",
        "",
        "Connect's run 1 is its server's first merge, which warms the server's JVM up.",
        "",
        "| run | way | to merge start s | whole s | inserted | updated |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r.run + 1} | {r.way} | {r.to_merge_start:.1f} | {r.whole:.1f} | {r.inserted} | {r.updated} |"
            for r in result.records
        ),
        "",
    ]
    return "\n".join(lines)


def phase_table(result: OverheadResult) -> list[str]:
    """The median seconds of each phase, a row per phase and a column per way, with what each phase is."""
    ways = [way for way in WAYS if any(r.way == way and r.phases for r in result.records)]

    def median(way: Way, phase: str) -> str:
        return (
            f"{statistics.median(r.phases[phase] for r in result.records if r.way == way and r.phases):.2f}"
        )

    return [
        f"| phase | {' | '.join(ways)} | what |",
        f"|---|{'---|' * len(ways)}---|",
        *(f"| {p} | {' | '.join(median(w, p) for w in ways)} | {PHASE_MEANINGS[p]} |" for p in PHASES),
    ]


def connect_calls_table(result: OverheadResult) -> list[str]:
    """On Connect, the queries and analyses a merge sent to the server by call site, heaviest first: calls
    and median seconds per merge, over the runs after the server's first (which warms its JVM up)."""
    runs = [r for r in result.records if r.way == "connect" and r.run > 0]
    if not runs:
        return []
    sites = sorted({site for r in runs for site in r.connect_calls})

    def median(site: str, figure: int) -> float:
        return statistics.median(r.connect_calls.get(site, [0, 0.0])[figure] for r in runs)

    rows = sorted(((median(site, 1), median(site, 0), site) for site in sites), reverse=True)
    total = statistics.median(sum(c[1] for c in r.connect_calls.values()) for r in runs)
    return [
        "## Calls to the Connect server",
        "",
        f"Per merge, medians over Connect's runs 2-{result.runs}: each query (the server plans and runs it, "
        "its rows fetched) and each analysis (a schema read) the merge sent, by the package's function that "
        f"sent it (bench/connect_calls.py); {total:.2f} s in all.",
        "",
        "| kind and call site | calls | s |",
        "|---|---|---|",
        *(f"| {site} | {calls:g} | {seconds:.3f} |" for seconds, calls, site in rows),
        "",
    ]


def overhead_main(argv: Sequence[str], *, work: Path, results_dir: Path) -> int:
    """``python -m bench overhead [--runs N] [--ways W,...]``: measure, write the report, say where."""
    runs, ways = parse_args(argv)
    result = measure_overhead(runs, work, progress=lambda line: print(line, flush=True), ways=ways)
    print(f"Report: {write_overhead(result, results_dir)}")
    return 0


def parse_args(argv: Sequence[str]) -> tuple[int, tuple[Way, ...]]:
    """``--runs N`` (at least 1, default 5) and ``--ways`` (comma-separated, default both)."""
    parser = argparse.ArgumentParser(prog="python -m bench overhead", description=__doc__)
    return parse_ways(parser, argv, default_runs=5)


def parse_ways(
    parser: argparse.ArgumentParser, argv: Sequence[str], *, default_runs: int
) -> tuple[int, tuple[Way, ...]]:
    """``--runs N`` (at least 1) and ``--ways`` (comma-separated, default both), added to ``parser``."""
    parser.add_argument(
        "--runs", type=int, default=default_runs, help=f"runs each way (default {default_runs})"
    )
    parser.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of {', '.join(WAYS)}")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    ways = tuple(way for way in WAYS if way in args.ways.split(","))
    if not ways or len(ways) != len(set(args.ways.split(","))):
        parser.error(f"--ways takes {', '.join(WAYS)}")
    return int(args.runs), ways
