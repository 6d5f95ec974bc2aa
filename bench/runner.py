"""Run the benchmark: generate the data once, then time every contender on every case, interleaved.

Repetition r runs the cases in order and, within a case, the contenders in an order rotated by case and
repetition, so slow drifts of a shared machine fall on every contender alike. Every run starts from a
fresh copy of the generated target, made outside the timed region, and is checked as soon as it ends.
"""

from __future__ import annotations

import datetime
import multiprocessing
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import ParamSpec, TypeVar

import pyarrow as pa
from deltalake.exceptions import DeltaError
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.exceptions import DeltaMergeError
from bench.cases import Case, CaseData, Counts, prepare_source
from bench.checks import announce, disagreements
from bench.contenders import (
    ContenderName,
    Run,
    fresh_copy,
    run_delta_spark,
    run_deltalake,
    run_engine,
    run_floor,
)
from bench.memory import DriverMemory, driver_memory, python_rss, reset_jvm_peaks
from bench.store_sales import Scale, TargetTables, write_tables

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
# What a failing contender raises; the run is recorded as failed and the benchmark goes on.
CONTENDER_FAILURES = (
    DeltaMergeError,
    PySparkException,
    Py4JJavaError,
    DeltaError,
    pa.ArrowException,
    OSError,
)


@dataclass(frozen=True)
class RunRecord:
    """One run of one contender on one case; ``seconds`` is None when it failed with ``error``."""

    case: str
    contender: ContenderName
    repetition: int
    seconds: float | None
    run: Run | None = None
    memory: DriverMemory | None = None  # around engine runs only
    error: str | None = None


@dataclass
class BenchResult:
    """Everything a report needs: the set-up, the drawn cases, every run and every disagreement."""

    scale: Scale
    started: str
    repetitions: int
    contenders: tuple[ContenderName, ...]
    cases: tuple[Case, ...]
    spark_startup_seconds: float
    data: dict[str, CaseData] = field(default_factory=dict)
    records: list[RunRecord] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    python_rss_at_start: int = 0


class Worker:
    """One separate Python process for pyarrow and ``deltalake`` work, kept warm across runs.

    It keeps ``deltalake``'s memory out of the driver's figures and its threads off the driver's GIL.
    Spawned (not forked) because the driver process holds a JVM gateway.
    """

    def __init__(self) -> None:
        self._pool = self._start()

    @staticmethod
    def _start() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))

    def call(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return self._pool.submit(function, *args, **kwargs).result()
        except BrokenProcessPool:
            # The worker died (out of memory, say): the next call gets a new one.
            self._pool = self._start()
            raise

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown()


def rotated(contenders: Sequence[T], by: int) -> list[T]:
    shift = by % len(contenders)
    return [*contenders[shift:], *contenders[:shift]]


def run_benchmark(
    spark: SparkSession,
    *,
    scale: Scale,
    cases: Sequence[Case],
    contenders: Sequence[ContenderName],
    repetitions: int,
    data_dir: Path,
    spark_startup_seconds: float,
    progress: Callable[[str], None] = print,
    after_case: Callable[[BenchResult], object] = lambda result: None,
) -> BenchResult:
    """Generate (or reuse) ``scale``'s tables under ``data_dir``, draw the sources, run, check each run.

    ``after_case`` sees the result so far after each case of each repetition, so that a long run that is
    stopped still leaves a report of what it finished.
    """
    result = BenchResult(
        scale=scale,
        started=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        repetitions=repetitions,
        contenders=tuple(contenders),
        cases=tuple(cases),
        spark_startup_seconds=spark_startup_seconds,
        python_rss_at_start=python_rss(),
    )
    folder = data_dir / scale.name
    runs = folder / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    with Worker() as worker:
        progress(f"Target tables for scale {scale.name} ({scale.rows:,} rows) under {folder / 'tables'}")
        tables = worker.call(write_tables, scale, folder / "tables")
        for case in cases:
            progress(f"Drawing the source of {case.name}")
            result.data[case.name] = worker.call(prepare_source, case, tables, folder / "sources" / case.name)
        progress("Warm-up: one untimed engine merge")
        _run_once(spark, worker, cases[0], result.data[cases[0].name], tables, ("engine", 0), runs)
        total = repetitions * len(cases) * len(contenders)
        for repetition in range(1, repetitions + 1):
            for index, case in enumerate(cases):
                reported: dict[str, Counts | None] = {}
                for contender in rotated(contenders, repetition + index):
                    data = result.data[case.name]
                    record = _run_once(spark, worker, case, data, tables, (contender, repetition), runs)
                    result.records.append(record)
                    progress(_progress_line(len(result.records), total, record))
                    if contender != "floor":
                        reported[contender] = record.run.counts if record.run is not None else None
                label = f"{case.name} (repetition {repetition})"
                found = disagreements(label, result.data[case.name].expected, reported)
                announce(found)
                result.disagreements.extend(found)
                after_case(result)
    return result


def _progress_line(done: int, total: int, record: RunRecord) -> str:
    took = "FAILED" if record.seconds is None else f"{record.seconds:7.2f} s"
    return f"[{done:>4}/{total}] rep {record.repetition} {record.contender:<22} {took}  {record.case}"


def _run_once(
    spark: SparkSession,
    worker: Worker,
    case: Case,
    data: CaseData,
    tables: TargetTables,
    attempt: tuple[ContenderName, int],
    runs: Path,
) -> RunRecord:
    """Copy the target, run the contender on the copy, delete the copy; failures are recorded, not raised.

    ``attempt`` is (contender, repetition), repetition 0 being the warm-up.
    """
    contender, repetition = attempt
    run_dir = runs / f"{case.name}-{contender}"
    target = fresh_copy(_target_of(case, tables), run_dir / "table")
    memory: DriverMemory | None = None
    try:
        if contender == "engine":
            reset_jvm_peaks(spark)
            run = run_engine(spark, case, data, target)
            memory = driver_memory(spark)
        elif contender in ("delta-spark", "delta-spark-warm"):
            run = run_delta_spark(spark, case, data, target, warm=contender == "delta-spark-warm")
        elif contender == "floor":
            run = run_floor(spark, data, target, run_dir / "floor", changed_rows_only=case.deletion_vectors)
        else:
            run = worker.call(run_deltalake, case, data, target, streamed=contender == "deltalake-streamed")
    except CONTENDER_FAILURES as err:
        message = f"{case.name}: {contender} failed: {type(err).__name__}: {err}"
        announce([message])
        return RunRecord(case.name, contender, repetition, None, error=message)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return RunRecord(case.name, contender, repetition, run.seconds, run, memory)


def _target_of(case: Case, tables: TargetTables) -> str:
    if case.partitioned_target:
        return tables.by_date
    return tables.flat_with_deletion_vectors if case.deletion_vectors else tables.flat
