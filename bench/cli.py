"""``python -m bench``: start a SparkSession, run the benchmark at one scale, write the report;
``python -m bench overhead``: the fixed cost per merge (bench/overhead.py);
``python -m bench dag-parse``: what the provider adds to a DAG file's parse (bench/dag_parse.py);
``python -m bench first-dag``: the README's first DAG, the task's real time (bench/first_dag.py);
``python -m bench first-dag-scheduled``: the same through a scheduler (bench/first_dag_scheduled.py);
``python -m bench backfill``: a backfill of 30 small dates through a scheduler (bench/backfill.py);
``python -m bench store``: a small merge's requests and time on an S3 server (bench/object_store.py);
``python -m bench one-query``: a small merge's one query against its two phases (bench/one_query.py)."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from pyspark.sql import SparkSession

from airflow_provider_deltamerge.job_contract import ENGINE_SESSION_CONF
from bench.cases import select_cases
from bench.contenders import CONTENDERS, ContenderName
from bench.report import write_results
from bench.runner import run_benchmark
from bench.store_sales import SCALES
from tests.delta_runtime import with_delta

HERE = Path(__file__).parent


# In local mode the JVM is driver and executors at once: it gets half the machine's memory. Shuffles are
# few and small next to the files read and written; adaptive execution coalesces them further. The engine
# runs under the job's own session confs, as it does when the operator submits it.
SESSION_CONF: dict[str, bool | float | int | str | None] = {
    **ENGINE_SESSION_CONF,
    "spark.driver.memory": "12g",
    "spark.sql.shuffle.partitions": "16",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",  # the benchmark prints its own progress lines
}


def bench_session(delta: bool) -> tuple[SparkSession, float]:
    """A local SparkSession on every core, with Delta's runtime when ``delta`` (its contender runs), and the
    seconds it took to start (reported on its own).

    Without Delta's contender the session is the engine's as users run it: Delta's SQL extension adds its
    rules to the planning of every query in the session, the engine's too.
    """
    start = time.perf_counter()
    spark = SparkSession.builder.master("local[*]").appName("deltamerge-bench").config(map=SESSION_CONF)
    session = (with_delta(spark) if delta else spark).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.range(1).collect()
    return session, time.perf_counter() - start


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="S", help="S: 1M rows, M: 10M, L: 100M")
    parser.add_argument("--repetitions", type=int, default=3, help="interleaved repetitions of every run")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all 23)")
    parser.add_argument(
        "--contenders", default=",".join(CONTENDERS), help=f"comma-separated, of {', '.join(CONTENDERS)}"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=HERE / "work",
        help="where generated tables are cached and runs are copied (default: bench/work)",
    )
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, as ``overhead``, bench/overhead.py; as ``dag-parse``, bench/dag_parse.py; as
    ``first-dag``, bench/first_dag.py; as ``first-dag-scheduled``, bench/first_dag_scheduled.py; as
    ``backfill``, bench/backfill.py; as ``store``, bench/object_store.py; as ``one-query``,
    bench/one_query.py); exit status 1 when any run disagreed or failed."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["overhead"]:
        # Imported here: it loads Airflow (the hook), whose logging set-up would put the engine's INFO lines
        # among the benchmark's progress lines.
        from bench.overhead import overhead_main

        return overhead_main(argv[1:], work=HERE / "work" / "overhead", results_dir=HERE / "results")
    if argv[:1] == ["first-dag"]:
        from bench.first_dag import first_dag_main

        return first_dag_main(argv[1:], work=HERE / "work" / "first-dag", results_dir=HERE / "results")
    if argv[:1] == ["first-dag-scheduled"]:
        from bench.first_dag_scheduled import scheduled_first_dag_main

        return scheduled_first_dag_main(
            argv[1:], work=HERE / "work" / "first-dag-scheduled", results_dir=HERE / "results"
        )
    if argv[:1] == ["backfill"]:
        from bench.backfill import backfill_main

        return backfill_main(argv[1:], work=HERE / "work" / "backfill", results_dir=HERE / "results")
    if argv[:1] == ["store"]:
        from bench.object_store import store_main

        return store_main(
            argv[1:], work=HERE / "work" / "store", data_dir=HERE / "work", results_dir=HERE / "results"
        )
    if argv[:1] == ["one-query"]:
        from bench.one_query import one_query_main

        return one_query_main(argv[1:], work=HERE / "work" / "one-query", results_dir=HERE / "results")
    if argv[:1] == ["dag-parse"]:
        from bench.dag_parse import dag_parse_main

        return dag_parse_main(argv[1:], work=HERE / "work" / "dag-parse", results_dir=HERE / "results")
    args = parse_args(argv)
    contenders = [c for c in args.contenders.split(",") if c]
    unknown = sorted(set(contenders) - set(CONTENDERS))
    if unknown:
        sys.exit(f"Unknown contenders {unknown}; known: {list(CONTENDERS)}")
    try:
        cases = select_cases([c for c in args.cases.split(",") if c])
    except ValueError as err:
        sys.exit(str(err))
    # The engine logs a line per phase; the progress lines are what a benchmark run should show.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    print("Starting Spark ...", flush=True)
    spark, startup = bench_session(delta=any(c.startswith("delta-spark") for c in contenders))
    print(f"SparkSession started in {startup:.1f} s", flush=True)
    try:
        result = run_benchmark(
            spark,
            scale=SCALES[args.scale],
            cases=cases,
            contenders=cast(list[ContenderName], contenders),
            repetitions=args.repetitions,
            data_dir=args.data_dir,
            spark_startup_seconds=startup,
            progress=lambda line: print(line, flush=True),
            after_case=lambda so_far: write_results(so_far, args.results_dir),
        )
    finally:
        spark.stop()
    print(f"Report: {write_results(result, args.results_dir)}")
    if result.disagreements:
        print(f"{len(result.disagreements)} disagreement(s): see the report", file=sys.stderr)
        return 1
    return 0
