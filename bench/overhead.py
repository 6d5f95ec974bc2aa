"""``python -m bench overhead``: the fixed cost of a small merge, spark-submit against a Spark Connect server.

The same 60-row upsert into a 1,000-row table runs through ``DeltaMergeHook.run_merge``, as a task runs it:
by spark-submit on ``local[*]``, and against one Spark Connect server (``local[*]`` too) that this mode starts
once and reports on its own. Two figures per run: seconds from the hook's call to the job's "Spark started"
line (the merge's own work starts there; the hook notes when it came) and to the hook's return. The ways
alternate run by run, so a shared machine's drifts fall on both alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import statistics
import time
import uuid
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
from bench.connect_server import connect_server

Way = Literal["spark-submit", "connect"]
WAYS: tuple[Way, ...] = ("spark-submit", "connect")
TARGET_ROWS = 1000
# Ids 950-1009: 50 rows update the target's last ones, 10 are new.
SOURCE_IDS = range(950, 1010)
# Connections as the hook reads them, from the environment (AIRFLOW_CONN_<ID>).
CONN_IDS: dict[Way, str] = {"spark-submit": "bench_spark_submit", "connect": "bench_spark_connect"}


@dataclass(frozen=True)
class OverheadRun:
    """One merge: seconds from the hook's call to the merge's start, and to the hook's return."""

    way: Way
    run: int
    to_merge_start: float
    whole: float
    inserted: int
    updated: int


@dataclass
class OverheadResult:
    """Every run of both ways, and the seconds the Connect server took to start (in no run's figures)."""

    started: str
    runs: int
    server_startup_seconds: float
    records: list[OverheadRun] = dataclasses.field(default_factory=list)


def measure_overhead(runs: int, work: Path, progress: Callable[[str], None]) -> OverheadResult:
    """Run the small merge ``runs`` times each way, alternating, each on a fresh table under ``work``."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = work / "source.parquet"
    pq.write_table(_orders(SOURCE_IDS, 2.0), source)
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    token = f"bench-{uuid.uuid4().hex}"
    with connect_server(work / "connect-server.log", token=token, master="local[*]") as server:
        progress(f"Spark Connect server started in {server.startup_seconds:.1f} s")
        result = OverheadResult(started, runs, server.startup_seconds)
        connections: dict[Way, dict[str, object]] = {
            "spark-submit": {"conn_type": "spark", "host": "local[*]"},
            "connect": {
                "conn_type": "spark_connect",
                "host": server.host,
                "port": server.port,
                "password": token,
            },
        }
        for way, conn in connections.items():
            os.environ[f"AIRFLOW_CONN_{CONN_IDS[way].upper()}"] = json.dumps(conn)
        for run in range(runs):
            for way in WAYS if run % 2 == 0 else WAYS[::-1]:
                record = _one_merge(way, run, work / f"{way}-{run}", source)
                result.records.append(record)
                progress(
                    f"{way} run {run + 1}/{runs}: merge started after {record.to_merge_start:.1f} s, "
                    f"done after {record.whole:.1f} s"
                )
    return result


def _one_merge(way: Way, run: int, table: Path, source: Path) -> OverheadRun:
    write_deltalake(str(table), _orders(range(TARGET_ROWS), 1.0))
    spec = MergeSpec(
        target=str(table),
        source=PathSource(str(source)),
        condition="t.order_id = s.order_id",
        clauses=(update_all(), insert_all()),
    )
    hook = DeltaMergeHook(CONN_IDS[way])
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
    )


def _orders(ids: range, amount_factor: float) -> pa.Table:
    return pa.table(
        {
            "order_id": pa.array(list(ids), pa.int64()),
            "amount": pa.array([i * amount_factor for i in ids], pa.float64()),
        }
    )


def write_overhead(result: OverheadResult, results_dir: Path) -> Path:
    """Write ``overhead-<timestamp>.md/.json``; returns the report."""
    results_dir.mkdir(parents=True, exist_ok=True)
    stem = f"overhead-{result.started.replace(':', '').replace('-', '')}"
    (results_dir / f"{stem}.json").write_text(json.dumps(dataclasses.asdict(result), indent=1))
    report = results_dir / f"{stem}.md"
    report.write_text(overhead_markdown(result))
    return report


def overhead_markdown(result: OverheadResult) -> str:
    medians = {
        (way, figure): statistics.median(getattr(r, figure) for r in result.records if r.way == way)
        for way in WAYS
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
        "through `DeltaMergeHook.run_merge`, as a task runs it; spark-submit on `local[*]`, and one Connect "
        f"server on `local[*]`, started once in {result.server_startup_seconds:.1f} s (in no figure below).",
        "",
        "Seconds are medians (min-max). *To merge start*: from the hook's call to the job's "
        "\"Spark started\" line, where the merge's own work begins. *Whole*: to the hook's return.",
        "",
        "| way | to merge start s | whole s |",
        "|---|---|---|",
        *(f"| {way} | {cell(way, 'to_merge_start')} | {cell(way, 'whole')} |" for way in WAYS),
        "| **spark-submit ÷ connect** | "
        + " | ".join(
            f"**{medians['spark-submit', f] / medians['connect', f]:.1f}x**"
            for f in ("to_merge_start", "whole")
        )
        + " |",
        "",
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


def overhead_main(argv: Sequence[str], *, work: Path, results_dir: Path) -> int:
    """``python -m bench overhead [--runs N]``: measure, write the report, print where it is."""
    runs = parse_runs(argv)
    result = measure_overhead(runs, work, progress=lambda line: print(line, flush=True))
    print(f"Report: {write_overhead(result, results_dir)}")
    return 0


def parse_runs(argv: Sequence[str]) -> int:
    """``--runs N``; N at least 1 (default 5)."""
    parser = argparse.ArgumentParser(prog="python -m bench overhead", description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="merges each way (default 5)")
    runs = int(parser.parse_args(argv).runs)
    if runs < 1:
        parser.error("--runs must be at least 1")
    return runs
