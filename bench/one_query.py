"""``python -m bench one-query``: where a small merge's one query stops paying (engine/execute/one_query.py).

One query reads the candidate files whole and shuffles their rows twice (the join, then the window over
each file); the two phases read the ON-condition columns in one query and rewrite the touched files,
unshuffled, in another. So one query wins by a query's fixed cost on small files and loses by its shuffles
on large ones.
For each table size (one file of ``rows`` rows: a key, a long, a 25-character string), a 60-row upsert
(50 updates, 10 inserts) runs both ways in one SparkSession, alternating, each on a fresh copy of the table;
the report gives the median of each, without each way's first run, and their ratio. ``MAX_BYTES`` belongs
where the ratio crosses 1.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.execute import one_query
from airflow_provider_deltamerge.job_contract import ENGINE_SESSION_CONF
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all

WAYS = ("one query", "two phases")
DEFAULT_ROWS = (1_000, 10_000, 30_000, 60_000, 100_000, 400_000)
_UPDATED, _INSERTED = 50, 10


@dataclass
class Size:
    """One table size's runs: the file's bytes and each way's seconds, in run order."""

    rows: int
    file_bytes: int = 0
    seconds: dict[str, list[float]] = field(default_factory=lambda: {way: [] for way in WAYS})

    def median(self, way: str) -> float:
        runs = self.seconds[way]
        return statistics.median(runs[1:] or runs)


def parse_args(argv: Sequence[str]) -> tuple[tuple[int, ...], int]:
    parser = argparse.ArgumentParser(prog="python -m bench one-query", description=__doc__)
    parser.add_argument("--rows", default=",".join(map(str, DEFAULT_ROWS)), help="table sizes, in rows")
    parser.add_argument("--runs", type=int, default=4, help="runs of each way per size (at least 2)")
    args = parser.parse_args(argv)
    rows = tuple(int(n) for n in args.rows.split(",") if n)
    if args.runs < 2 or not rows or min(rows) <= _UPDATED:
        parser.error(f"--runs must be at least 2 and every size above {_UPDATED} rows")
    return rows, args.runs


def measure(spark: SparkSession, work: Path, rows: int, runs: int) -> Size:
    """Both ways on fresh copies of a one-file table of ``rows`` rows, alternating."""
    random = np.random.default_rng(rows)
    table = pa.table(
        {
            "id": pa.array(np.arange(rows), pa.int64()),
            "value": pa.array(random.integers(0, 1 << 40, rows), pa.int64()),
            "note": pa.array([f"note-{n:020x}" for n in random.integers(0, 1 << 60, rows)]),
        }
    )
    keys = np.arange(rows - _UPDATED, rows + _INSERTED)
    source = work / f"source-{rows}.parquet"
    pq.write_table(
        pa.table({"id": keys, "value": np.ones(len(keys), np.int64), "note": ["new"] * len(keys)}), source
    )
    size = Size(rows)
    for run in range(2 * runs):
        way = WAYS[run % 2]
        target = work / f"table-{rows}-{run}"
        write_deltalake(str(target), table)
        spec = MergeSpec(str(target), PathSource(str(source)), "t.id = s.id", (update_all(), insert_all()))
        with mock.patch.object(one_query, "MAX_BYTES", 0 if way == "two phases" else 1 << 40):
            start = time.perf_counter()
            result = run_merge(spark, spec)
            size.seconds[way].append(time.perf_counter() - start)
        updated, inserted = (
            result.metrics[m.NUM_TARGET_ROWS_UPDATED],
            result.metrics[m.NUM_TARGET_ROWS_INSERTED],
        )
        if (updated, inserted) != (_UPDATED, _INSERTED):
            raise RuntimeError(f"{way} at {rows} rows: {updated} updated, {inserted} inserted")
        size.file_bytes = result.metrics[m.NUM_TARGET_BYTES_REMOVED]
        shutil.rmtree(target)
    return size


def write_report(started: str, sizes: Sequence[Size], runs: int, results_dir: Path) -> Path:
    lines = [
        "# One query against two phases, by the size of the candidate files",
        "",
        f"Started {started}; {runs} runs of each way per size, alternating, in one local SparkSession on "
        f"2 cores; a 60-row upsert ({_UPDATED} updated, {_INSERTED} inserted) into a one-file table. Seconds "
        "from `run_merge`'s call to its return, medians without each way's first run.",
        "",
        "| rows | file bytes | one query s | two phases s | one ÷ two |",
        "|---|---|---|---|---|",
    ]
    for size in sizes:
        one, two = size.median("one query"), size.median("two phases")
        lines.append(f"| {size.rows:,} | {size.file_bytes:,} | {one:.3f} | {two:.3f} | {one / two:.2f} |")
    results_dir.mkdir(parents=True, exist_ok=True)
    report = results_dir / f"one-query-{started.replace('-', '').replace(':', '')}.md"
    report.write_text("\n".join(lines) + "\n")
    return report


def one_query_main(argv: Sequence[str], *, work: Path, results_dir: Path) -> int:
    rows, runs = parse_args(argv)
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    logging.basicConfig(level=logging.WARNING)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    builder = SparkSession.builder.master("local[*]").appName("deltamerge-bench-one-query")
    spark = builder.config(
        map={**ENGINE_SESSION_CONF, "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    ).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    sizes = []
    try:
        for n in rows:
            sizes.append(measure(spark, work, n, runs))
            print(
                f"{n:,} rows: one query {sizes[-1].median('one query'):.3f} s, two phases "
                f"{sizes[-1].median('two phases'):.3f} s",
                flush=True,
            )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"Report: {write_report(started, sizes, runs, results_dir)}")
    return 0
