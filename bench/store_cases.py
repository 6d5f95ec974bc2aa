"""``python -m bench store --cases delta``: Delta's 16 merge benchmark cases (bench/cases.py) on an object
store, in requests (counted on the server, by kind) and time, against ``deltalake``'s merge of the same
statements into the same store.

The store and the engine's session are bench/object_store.py's. The flat ``store_sales`` table of the scale
(generated once under ``bench/work/<scale>``, as ``python -m bench`` does) and each case's drawn source are
uploaded once; every run merges its own server-side copy of the table, made outside the timing and deleted
after it. Contenders, in an order rotated per case and repetition: ``engine`` (``run_merge`` reading the
source's parquet on the store), ``deltalake-non-streamed`` and ``deltalake-streamed`` (``DeltaTable.merge``
in this process, the source read from the store inside the timing). Every run's counts are checked against
what the draw implies; a disagreement or a failed run fails the command (exit 1, named in the report).
"""

from __future__ import annotations

import datetime
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import obstore
import pyarrow.fs as pafs
from deltalake.fs import DeltaStorageHandler
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.commit.log_store import object_store
from airflow_provider_deltamerge.engine import run_merge
from bench.cases import DELTA_CASES, Case, CaseData, Counts, prepare_source
from bench.checks import announce, disagreements
from bench.contenders import rows_in_table
from bench.object_store import KINDS, STORES, read_on_store, request_kind, store_server, store_session
from bench.runner import CONTENDER_FAILURES, rotated
from bench.store_sales import Scale, write_tables
from tests.oracle import merge_with_deltalake

CONTENDERS = ("engine", "deltalake-non-streamed", "deltalake-streamed")
TABLE = "tables/store_sales"


@dataclass
class CaseRun:
    """One contender's merge of one case: the requests the server served meanwhile by "<kind> <place>",
    its seconds (None when it failed with ``error``) and what it reports it did."""

    case: str
    contender: str
    repetition: int
    requests: dict[str, int]
    seconds: float | None
    counts: Counts | None = None
    error: str | None = None


@dataclass
class StoreCasesResult:
    started: str
    engine_version: str
    store: str
    scale: str
    repetitions: int
    load_average: float
    cases: tuple[str, ...]
    runs: list[CaseRun] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def measure_store_cases(
    store: str,
    scale: Scale,
    repetitions: int,
    work: Path,
    data_dir: Path,
    progress: Callable[[str], None],
    cases: Sequence[Case] = DELTA_CASES,
) -> StoreCasesResult:
    """Run every case ``repetitions`` times per contender on ``store``, each on a fresh copy of the table."""
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = StoreCasesResult(
        started, __version__, store, scale.name, repetitions, os.getloadavg()[0], tuple(c.name for c in cases)
    )
    progress(f"Target table for scale {scale.name} ({scale.rows:,} rows) under {data_dir / scale.name}")
    tables = write_tables(scale, data_dir / scale.name / "tables")
    data = {c.name: prepare_source(c, tables, data_dir / scale.name / "sources" / c.name) for c in cases}
    work.mkdir(parents=True, exist_ok=True)
    with store_server(store, work / f"{store}-cases-{started.replace(':', '')}") as (server, lake):
        os.environ.update(server.environment())
        spark = store_session(server, store)
        files = pafs.PyFileSystem(DeltaStorageHandler(lake))
        try:
            progress(f"Uploading the table and {len(cases)} sources to {lake}")
            _upload(tables.flat, TABLE, files)
            for name, case_data in data.items():
                _upload(case_data.source, f"sources/{name}.parquet", files)
            runner = _Runner(spark, server, lake, files, data)
            progress("Warm-up: one untimed engine merge")
            runner.run(cases[0], "engine", 0)
            total = repetitions * len(cases) * len(CONTENDERS)
            for repetition in range(1, repetitions + 1):
                for index, case in enumerate(cases):
                    for contender in rotated(CONTENDERS, repetition + index):
                        run = runner.run(case, contender, repetition)
                        result.runs.append(run)
                        took = "FAILED" if run.seconds is None else f"{run.seconds:6.2f} s"
                        progress(
                            f"[{len(result.runs):>3}/{total}] {contender:<22} {took} "
                            f"{sum(run.requests.values()):>5} requests  {case.name}"
                        )
        finally:
            spark.stop()
    result.failures = failures(result, {name: d.expected for name, d in data.items()})
    announce(result.failures)
    return result


def _upload(local: str, destination: str, files: pafs.FileSystem) -> None:
    """A file, or a folder's files, from this machine to ``destination`` on the store."""
    pafs.copy_files(local, destination, pafs.LocalFileSystem(), files)


@dataclass
class _Runner:
    spark: SparkSession
    server: Any
    lake: str
    files: pafs.FileSystem
    data: dict[str, CaseData]

    def run(self, case: Case, contender: str, repetition: int) -> CaseRun:
        """Copy the table on the store, merge ``case`` into the copy, delete it; a failure is recorded."""
        folder = f"runs/{case.name}-{contender}-{repetition}"
        self._copy_table(folder)
        target, source = f"{self.lake}/{folder}", f"{self.lake}/sources/{case.name}.parquet"
        before = len(self.server.requests())
        start = time.monotonic()
        try:
            reported = self._merge(case, contender, target, source)
            seconds: float | None = time.monotonic() - start
            error = None
        except CONTENDER_FAILURES as err:
            reported, seconds = None, None
            error = f"{case.name}: {contender} failed: {type(err).__name__}: {str(err)[:300]}"
        served = self.server.requests()[before:]
        counts = None if reported is None else Counts(*reported, rows_after=rows_in_table(target))
        self.files.delete_dir(folder)
        requests = dict(Counter(request_kind(method, url) for method, url in served))
        return CaseRun(case.name, contender, repetition, requests, seconds, counts, error)

    def _copy_table(self, folder: str) -> None:
        """A server-side copy of every file of the uploaded table (the store's copy request)."""
        store = object_store(self.lake)
        for batch in obstore.list(store, TABLE):
            for entry in batch:
                obstore.copy(store, entry["path"], folder + entry["path"][len(TABLE) :])

    def _merge(self, case: Case, contender: str, target: str, source: str) -> tuple[int, int, int]:
        """(inserted, updated, deleted) as the contender reports them."""
        spec = case.spec(target, source)
        if contender == "engine":
            metrics = run_merge(self.spark, spec).metrics
            return (
                int(metrics[m.NUM_TARGET_ROWS_INSERTED] or 0),
                int(metrics[m.NUM_TARGET_ROWS_UPDATED] or 0),
                int(metrics[m.NUM_TARGET_ROWS_DELETED] or 0),
            )
        streamed = contender == "deltalake-streamed"
        outcome = merge_with_deltalake(target, spec, read_on_store(source), streamed_exec=streamed)
        return (
            outcome["num_target_rows_inserted"],
            outcome["num_target_rows_updated"],
            outcome["num_target_rows_deleted"],
        )


def failures(result: StoreCasesResult, expected: dict[str, Counts]) -> list[str]:
    """Failed runs, and runs whose counts differ from what their case's draw implies."""
    found = [run.error for run in result.runs if run.error]
    for run in result.runs:
        if run.counts is not None:
            label = f"{run.case} (repetition {run.repetition})"
            found += disagreements(label, expected[run.case], {run.contender: run.counts})
    return found


def _median_requests(runs: list[CaseRun], kind: str | None = None) -> float:
    return statistics.median(
        sum(n for name, n in run.requests.items() if kind is None or name.startswith(f"{kind} "))
        for run in runs
    )


def store_cases_markdown(result: StoreCasesResult) -> str:
    lines = [
        f"# Object store: Delta's merge benchmark cases at {result.scale} ({result.started})",
        "",
        f"Engine {result.engine_version}; {STORES[result.store]}; Delta's {len(result.cases)} merge "
        f"benchmark cases at scale {result.scale} (bench/cases.py), each run on its own server-side copy of "
        f"the table; {result.repetitions} repetition(s), contenders rotated; load average at the start "
        f"{result.load_average:.2f}.",
        "Requests are counted on the server by kind, as in the store report of the small upsert (`log`: "
        "the Delta log's share of them). Medians per merge; `÷`: the engine's seconds over the contender's.",
        "",
        "| case | contender | " + " | ".join(KINDS) + " | all | log | seconds | engine ÷ |",
        "|---|---|" + "---|" * (len(KINDS) + 4),
    ]
    sums: dict[str, list[float]] = {c: [0.0, 0.0] for c in CONTENDERS}  # seconds, requests
    for case in result.cases:
        # Each contender's finished runs of the case: the engine's seconds are needed on every row.
        finished = {
            c: [r for r in result.runs if (r.case, r.contender) == (case, c) and r.seconds]
            for c in CONTENDERS
        }
        seconds = {
            c: statistics.median(r.seconds or 0.0 for r in runs) for c, runs in finished.items() if runs
        }
        for contender, runs in finished.items():
            if not runs:
                lines.append(f"| {case} | {contender} | failed |" + " |" * (len(KINDS) + 3))
                continue
            sums[contender][0] += seconds[contender]
            sums[contender][1] += _median_requests(runs)
            log = sum(statistics.median(r.requests.get(f"{k} log", 0) for r in runs) for k in KINDS)
            ratio = _ratio(seconds.get("engine"), seconds[contender]) if contender != "engine" else ""
            cells = [f"{_median_requests(runs, k):g}" for k in KINDS]
            lines.append(
                f"| {case} | {contender} | "
                + " | ".join(cells)
                + f" | {_median_requests(runs):g} | {log:g} | {seconds[contender]:.2f} | {ratio} |"
            )
    lines += [
        "",
        f"## Summed over the {len(result.cases)} cases",
        "",
        "| contender | requests | seconds | engine ÷ |",
    ]
    lines.append("|---|---|---|---|")
    for contender in CONTENDERS:
        spent, requests = sums[contender]
        ratio = _ratio(sums["engine"][0], spent) if contender != "engine" else ""
        lines.append(f"| {contender} | {requests:g} | {spent:.1f} | {ratio} |")
    lines += ["", "## Checks", ""]
    lines += [f"- FAILED: {f}" for f in result.failures] or [
        "- every run's inserted, updated and deleted counts and rows after it as the draw implies"
    ]
    return "\n".join(lines) + "\n"


def _ratio(engine: float | None, other: float) -> str:
    return "" if engine is None or not other else f"{engine / other:.2f}x"
