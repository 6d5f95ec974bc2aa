"""Per-case figures from the raw runs: medians with min-max, ratios, the engine's phases and bytes."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_provider_deltamerge import metrics as m
from bench.contenders import ContenderName
from bench.runner import BenchResult, RunRecord
from bench.spark_work import SparkWork

# Ratios the report and the chart show: the engine's median over each baseline's.
BASELINES: tuple[ContenderName, ...] = (
    "floor",
    "deltalake-streamed",
    "deltalake-non-streamed",
    "delta-spark",
    "delta-spark-warm",
)
PHASES = ("materialize", "scan", "rewrite", "other", "commit")


@dataclass(frozen=True)
class Timing:
    """Median, minimum and maximum seconds of a contender's successful runs of one case."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Timing | None:
        return cls(statistics.median(seconds), min(seconds), max(seconds)) if seconds else None


@dataclass(frozen=True)
class CaseSummary:
    """One case's figures: timings per contender, the engine's ratio to each baseline, its phase split
    (median seconds) and JVM round trips, the Spark jobs and queries of each contender in the session
    (medians), bytes it read after skipping against the bytes it needed, and files it rewrote."""

    case: str
    from_delta_benchmark: bool
    timings: dict[str, Timing]
    ratios: dict[str, float]
    phases: dict[str, float]
    jvm_calls: int | None
    spark_work: dict[str, SparkWork]
    bytes_read: int | None
    bytes_needed: int
    files_removed: int | None
    files_needed: int


def summarize(result: BenchResult) -> list[CaseSummary]:
    summaries = []
    for case in result.cases:
        if not any(r.case == case.name for r in result.records):
            continue  # not run yet: a report of a run still going
        runs = [r for r in result.records if r.case == case.name and r.seconds is not None]
        timings: dict[str, Timing] = {
            contender: timing
            for contender in result.contenders
            if (timing := Timing.of([r.seconds for r in runs if r.contender == contender and r.seconds]))
        }
        engine_runs = [r for r in runs if r.contender == "engine" and r.run is not None]
        engine = timings.get("engine")
        data = result.data[case.name]
        summaries.append(
            CaseSummary(
                case=case.name,
                from_delta_benchmark=case.from_delta_benchmark,
                timings=timings,
                ratios={
                    baseline: engine.median / timings[baseline].median
                    for baseline in BASELINES
                    if engine is not None and baseline in timings and timings[baseline].median > 0
                },
                phases=_phases(engine_runs),
                jvm_calls=_median_of([r.run.jvm_calls for r in engine_runs if r.run is not None]),
                spark_work=_spark_work(runs),
                bytes_read=_median_metric(engine_runs, m.NUM_TARGET_BYTES_AFTER_SKIPPING),
                bytes_needed=data.needed_bytes,
                files_removed=_median_metric(engine_runs, m.NUM_TARGET_FILES_REMOVED),
                files_needed=len(data.touched_files),
            )
        )
    return summaries


def _spark_work(runs: Sequence[RunRecord]) -> dict[str, SparkWork]:
    """Median Spark jobs and queries per contender that counted them."""
    by_contender: dict[str, list[SparkWork]] = {}
    for record in runs:
        if record.run is not None and record.run.spark_work is not None:
            by_contender.setdefault(record.contender, []).append(record.run.spark_work)
    return {
        contender: SparkWork(
            int(statistics.median(w.jobs for w in works)), int(statistics.median(w.queries for w in works))
        )
        for contender, works in by_contender.items()
    }


def _median_metric(runs: Sequence[RunRecord], name: str) -> int | None:
    return _median_of([r.run.metrics.get(name) for r in runs if r.run is not None])


def _median_of(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return int(statistics.median(known)) if known else None


def _phases(runs: Sequence[RunRecord]) -> dict[str, float]:
    """Median seconds per phase. ``other`` is snapshot, planning and pruning; ``commit`` is what the wall
    time adds to ``executionTimeMs``, which ends before the commit."""
    per_run: list[dict[str, float]] = []
    for record in runs:
        if record.run is None:
            continue
        metrics = record.run.metrics
        execution = metrics[m.EXECUTION_TIME_MS] / 1000
        timed = {
            "materialize": metrics.get(m.MATERIALIZE_SOURCE_TIME_MS, 0) / 1000,
            "scan": metrics.get(m.SCAN_TIME_MS, 0) / 1000,
            "rewrite": metrics.get(m.REWRITE_TIME_MS, 0) / 1000,
        }
        timed["other"] = max(0.0, execution - sum(timed.values()))
        timed["commit"] = max(0.0, record.run.seconds - execution)
        per_run.append(timed)
    return {phase: statistics.median(p[phase] for p in per_run) for phase in PHASES} if per_run else {}


def summed_ratio(summaries: Sequence[CaseSummary], baseline: ContenderName) -> float | None:
    """The engine's summed median seconds over the baseline's, over Delta's cases both completed."""
    both = [
        s for s in summaries if s.from_delta_benchmark and "engine" in s.timings and baseline in s.timings
    ]
    baseline_total = sum(s.timings[baseline].median for s in both)
    if not both or baseline_total == 0:
        return None
    return sum(s.timings["engine"].median for s in both) / baseline_total
