"""``python -m bench dag-parse``: what the provider adds to every parse of a DAG file that uses it.

Each run is a fresh interpreter that does what a DAG file does, timing each step: import ``airflow.sdk``
(the floor every DAG file pays), then sqlglot with its Spark dialect (which the spec parses SQL with), then
the operator, check operator and sensor modules, then build one of each (a merge as Python clauses, one as
``MERGE INTO`` text, bounds, a sensor), as a parse does. The figure that counts is the modules' import
time over ``airflow.sdk`` (sqlglot included), measured in the same interpreter.

Imports are timed with compiled bytecode, as an installed package has it: the children write theirs under
the work folder (``PYTHONPYCACHEPREFIX``), filled by a warm-up run that is not counted. Each run also
times imports compiled from source, with ``--from-source`` (as in a checkout run with
``PYTHONDONTWRITEBYTECODE``).
``--against REV`` measures the package as it was at git revision ``REV`` in the same runs, alternating with
this tree's, so a shared machine's drifts fall on both alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_deltamerge import __version__
from bench.result_files import write_result

ROOT = Path(__file__).parents[1]
PACKAGE = "airflow_provider_deltamerge"
# Libraries the provider must not import at DAG parse: a run reports any it finds.
RUN_TIME_ONLY = ("pyarrow", "pandas", "numpy", "deltalake", "pyspark")
# Seconds each step took, in the order the child prints them.
STEPS = ("airflow_sdk", "sqlglot", "modules", "build")

CHILD = f"""
import json, sys, time
start = time.perf_counter()
import airflow.sdk
sdk = time.perf_counter()
import sqlglot
import sqlglot.dialects.spark
parser = time.perf_counter()
from {PACKAGE}.operators.delta_merge import DeltaMergeOperator
from {PACKAGE}.operators.delta_merge_check import DeltaMergeCheckOperator
from {PACKAGE}.sensors.delta_table import DeltaTableSensor
from {PACKAGE}.spec import insert_all, update_all
modules = time.perf_counter()
DeltaMergeOperator(task_id="clauses", target="/lake/orders", source="/staging/orders",
                   condition="t.id = s.id", clauses=[update_all(condition="s.ts > t.ts"), insert_all()],
                   bounds={{"numSourceRows": {{"min": 1}}}})
DeltaMergeOperator(task_id="sql", merge_sql="MERGE INTO delta.`/lake/orders` t USING parquet.`/staging/o` s "
                   "ON t.id = s.id WHEN MATCHED AND s.op = 'D' THEN DELETE WHEN MATCHED THEN UPDATE SET * "
                   "WHEN NOT MATCHED THEN INSERT *")
DeltaMergeCheckOperator(task_id="check", merge_task_id="sql", bounds={{"numTargetRowsDeleted": {{"max": 0}}}})
DeltaTableSensor(task_id="wait", table="/lake/orders", operation="MERGE")
built = time.perf_counter()
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({RUN_TIME_ONLY!r}))
print(json.dumps({{"airflow_sdk": sdk - start, "sqlglot": parser - sdk, "modules": modules - parser,
                  "build": built - modules, "run_time_only": heavy}}))
"""


@dataclass(frozen=True)
class ParseRun:
    """One fresh interpreter: seconds per step, and the run-time-only libraries it found imported."""

    code: str  # "this tree" or the revision measured against
    bytecode: bool
    run: int
    airflow_sdk: float
    sqlglot: float
    modules: float
    build: float
    run_time_only: list[str]

    @property
    def over_sdk(self) -> float:
        """The provider's import time over ``airflow.sdk``: sqlglot and the three modules."""
        return self.sqlglot + self.modules


@dataclass
class ParseResult:
    started: str
    runs: int
    codes: list[str]
    records: list[ParseRun] = dataclasses.field(default_factory=list)
    tree: str = ""  # the commit this tree's package is at, and whether it has changes of its own


def measure_dag_parse(
    runs: int, work: Path, *, against: str | None, from_source: bool, progress: Callable[[str], None]
) -> ParseResult:
    """``runs`` fresh interpreters per code and bytecode setting, alternating, after one warm-up each."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sources = {"this tree": ROOT}
    if against:
        sources[against] = _checkout(against, work / "against")
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = ParseResult(started, runs, list(sources), tree=_tree_revision())
    settings = [(code, bytecode) for bytecode in (True, False)[: 2 if from_source else 1] for code in sources]
    for code, bytecode in settings:
        if bytecode:  # the warm-up compiles the bytecode the counted runs read
            _child(sources[code], work / "pycache" / _slug(code), bytecode=True, cwd=work)
    for run in range(runs):
        for code, bytecode in settings if run % 2 == 0 else settings[::-1]:
            found = _child(sources[code], work / "pycache" / _slug(code), bytecode=bytecode, cwd=work)
            record = ParseRun(code, bytecode, run, **found)
            result.records.append(record)
            progress(
                f"{code}, {_read_as(record)}, run {run + 1}/{runs}: airflow.sdk "
                f"{record.airflow_sdk:.2f} s, provider +{record.over_sdk:.2f} s"
            )
    return result


def _checkout(revision: str, folder: Path) -> Path:
    """The package as it was at ``revision``, extracted under ``folder``."""
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, PACKAGE], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def _tree_revision() -> str:
    """This tree's commit, and whether its package differs from it."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", PACKAGE],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return f"{commit} with uncommitted changes to {PACKAGE}" if changed else commit


def _slug(code: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in code)


def _child(source: Path, pycache: Path, *, bytecode: bool, cwd: Path) -> dict[str, Any]:
    """Run the DAG-parse steps in a fresh interpreter that finds the package under ``source`` first."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH")]))
    if bytecode:
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = str(cwd / "no-bytecode")  # an empty folder: nothing compiled is found
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"The DAG-parse child failed:\n{done.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def write_dag_parse(result: ParseResult, results_dir: Path) -> Path:
    """Write ``dag-parse-<timestamp>.md/.json``; returns the report."""
    return write_result("dag-parse", result, dag_parse_markdown(result), results_dir)


def dag_parse_markdown(result: ParseResult) -> str:
    settings = list(dict.fromkeys((r.code, r.bytecode) for r in result.records))
    lines = [
        "# DAG parse: what the provider adds to a DAG file's imports",
        "",
        f"Started {result.started}; engine {__version__}; Python {sys.version.split()[0]}; "
        f"{result.runs} fresh interpreter(s) per row, alternating; {os.cpu_count()} cores; this tree at "
        f"{result.tree or 'an unrecorded commit'}. Each imports "
        "`airflow.sdk`, then sqlglot with its Spark dialect, then the operator, check operator and sensor "
        "modules, then builds a merge from Python clauses, one from `MERGE INTO` text, a check and a sensor, "
        "as a DAG parse does.",
        "",
        "Seconds are medians (min-max). *Over airflow.sdk*: sqlglot and the three modules, imported after "
        "`airflow.sdk` in the same interpreter (the target: at most 0.3 s); *÷ airflow.sdk*: the median of "
        "that time divided by the same run's `airflow.sdk` import. *Build*: the four tasks' constructors, "
        "the `MERGE INTO` text and every clause expression parsed. *Bytecode*: modules read compiled, as an "
        "installed package has them; *source*: every module compiled on import (`PYTHONDONTWRITEBYTECODE`).",
        "",
        "| code | modules read as | airflow.sdk s | over airflow.sdk s | of which sqlglot s | ÷ airflow.sdk "
        "| build s | run-time libraries imported |",
        "|---|---|---|---|---|---|---|---|",
        *(
            _summary_row([r for r in result.records if (r.code, r.bytecode) == setting])
            for setting in settings
        ),
        "",
        "## Every run",
        "",
        "| run | code | modules read as | airflow.sdk s | sqlglot s | modules s | build s |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {r.run + 1} | {r.code} | {_read_as(r)} | {r.airflow_sdk:.3f} | {r.sqlglot:.3f} "
            f"| {r.modules:.3f} | {r.build:.3f} |"
            for r in result.records
        ),
        "",
    ]
    return "\n".join(lines)


def _summary_row(records: list[ParseRun]) -> str:
    """One code and bytecode setting: each figure's median (min-max), the ratio, what was imported."""

    def cell(seconds: list[float]) -> str:
        return f"{statistics.median(seconds):.3f} ({min(seconds):.3f}-{max(seconds):.3f})"

    ratio = statistics.median(r.over_sdk / r.airflow_sdk for r in records)
    found = sorted({m for r in records for m in r.run_time_only})
    figures = [
        cell([r.airflow_sdk for r in records]),
        f"**{cell([r.over_sdk for r in records])}**",
        cell([r.sqlglot for r in records]),
        f"{ratio:.2f}x",
        cell([r.build for r in records]),
        ", ".join(found) or "none",
    ]
    return f"| {records[0].code} | {_read_as(records[0])} | {' | '.join(figures)} |"


def _read_as(record: ParseRun) -> str:
    return "bytecode" if record.bytecode else "source"


def dag_parse_main(argv: Sequence[str], *, work: Path, results_dir: Path) -> int:
    """``python -m bench dag-parse [--runs N] [--against REV] [--from-source]``: measure, write, say where."""
    args = parse_dag_parse_args(argv)
    result = measure_dag_parse(
        args.runs,
        work,
        against=args.against,
        from_source=args.from_source,
        progress=lambda line: print(line, flush=True),
    )
    print(f"Report: {write_dag_parse(result, results_dir)}")
    found = {m for r in result.records if r.code == "this tree" for m in r.run_time_only}
    if found:
        print(f"This tree imports {', '.join(sorted(found))} at DAG parse", file=sys.stderr)
        return 1
    return 0


def parse_dag_parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench dag-parse", description=__doc__)
    parser.add_argument("--runs", type=int, default=9, help="fresh interpreters per row (default 9)")
    parser.add_argument("--against", help="also measure the package at this git revision, e.g. HEAD~3")
    parser.add_argument("--from-source", action="store_true", help="also time imports compiled from source")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args
