"""The results of a run as files under ``bench/results/``: markdown report, raw JSON, PNG chart."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from airflow_provider_deltamerge import __version__
from bench.chart import draw_ratios
from bench.runner import BenchResult
from bench.summary import BASELINES, PHASES, CaseSummary, summarize, summed_ratio

MIB = 1024 * 1024
# The speed issue's targets, checked here on every run and judged at scale M: sums over Delta's 16 cases;
# cases whose floor is small (insert-only, small upserts) by the seconds they add to it, larger ones that
# rewrite files by their ratio to it; bytes read against the bytes of the files holding changed rows.
SUM_TARGETS = {"floor": 1.3, "deltalake-non-streamed": 1.6}
SMALL_FLOOR_S = 2.0
SMALL_GAP_S = 1.5
REWRITE_FLOOR_TARGET = 2.0
FULL_SYNC_FLOOR_TARGET = 3.0
BYTES_TARGET = 1.2
BACKFILL_BYTES_TARGET = 1.1
BACKFILL_CASE = "backfill_one_day_of_100"


def write_results(result: BenchResult, results_dir: Path) -> Path:
    """Write ``<scale>-<timestamp>.md/.json/.png`` and ``latest-<scale>.md/.json``; returns the report."""
    results_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{result.scale.name}-{result.started.replace(':', '').replace('-', '')}"
    summaries = summarize(result)
    chart = results_dir / f"{stem}.png"
    draw_ratios(summaries, chart, title=f"Engine time over each baseline, scale {result.scale.name}")
    previous = {p.stem.removeprefix("latest-"): p for p in results_dir.glob("latest-*.json")}
    report = results_dir / f"{stem}.md"
    report.write_text(markdown(result, summaries, chart.name, _peaks_of(previous.values())))
    raw = results_dir / f"{stem}.json"
    raw.write_text(json.dumps(dataclasses.asdict(result), indent=1, default=str))
    shutil.copyfile(report, results_dir / f"latest-{result.scale.name}.md")
    shutil.copyfile(raw, results_dir / f"latest-{result.scale.name}.json")
    return report


def _peaks_of(raw_files: Iterable[Path]) -> dict[str, int]:
    """Driver Python peak RSS of the latest run of each scale, from their raw JSON files."""
    peaks = {}
    for path in raw_files:
        raw = json.loads(path.read_text())
        memories = [r["memory"]["python_peak_rss"] for r in raw["records"] if r.get("memory")]
        if memories:
            peaks[raw["scale"]["name"]] = max(memories)
    return peaks


def _seconds(summary: CaseSummary, contender: str, contenders: Sequence[str]) -> str:
    timing = summary.timings.get(contender)
    if timing is None:
        return "failed" if contender in contenders else "not run"
    return f"{timing.median:.2f} ({timing.low:.2f}-{timing.high:.2f})"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / MIB:,.1f}"


def markdown(
    result: BenchResult, summaries: Sequence[CaseSummary], chart: str, other_peaks: dict[str, int]
) -> str:
    scale = result.scale
    planned = result.repetitions * len(result.cases) * len(result.contenders)
    lines = [
        f"# Merge benchmark, scale {scale.name} ({scale.rows:,} rows)",
        "",
        f"Started {result.started}; engine {__version__}; {result.repetitions} interleaved repetition(s), "
        f"{len(result.records)} of {planned} runs done; "
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores. "
        f"SparkSession start-up (not in any figure): {result.spark_startup_seconds:.1f} s"
        + (
            "; the session loads Delta's runtime (jars, SQL extension, catalog) for its contender, and its "
            "extension's rules plan every query of the session, the engine's too."
            if any(c.startswith("delta-spark") for c in result.contenders)
            else "; the session has no Delta runtime, as the engine's sessions have."
        ),
        "",
        "Seconds are medians (min-max) over the repetitions, each run on a fresh copy of the target, its "
        "source read inside the timed region by every contender. Ratios are the engine's median over the "
        "baseline's: below 1 the engine is faster.",
        "",
        *_disagreement_lines(result),
        "## Times",
        "",
        "| case | engine s | floor s | deltalake streamed s | deltalake non-streamed s "
        "| Delta (delta-spark) s | Delta, warm snapshot s | ÷ floor | ÷ dl streamed | ÷ dl non-streamed "
        "| ÷ Delta | ÷ Delta warm |",
        "|---|" + "---|" * (1 + 2 * len(BASELINES)),
    ]
    for s in summaries:
        lines.append(
            f"| {s.case} | "
            + " | ".join(_seconds(s, c, result.contenders) for c in ("engine", *BASELINES))
            + " | "
            + " | ".join(_ratio(s.ratios.get(b)) for b in BASELINES)
            + " |"
        )
    sums: dict[str, float | None] = {b: summed_ratio(summaries, b) for b in BASELINES}
    lines += [
        "| **sum of Delta's 16 cases** |"
        + " |" * (1 + len(BASELINES))  # the times' columns: the engine's and each baseline's
        + " "
        + " | ".join(f"**{_ratio(sums[b])}**" for b in BASELINES)
        + " |",
        "",
        f"![ratios]({chart})",
        "",
        "## Engine phases (median seconds)",
        "",
        "`other` is snapshot, planning and pruning; `commit` is the wall time after `executionTimeMs`. "
        "`JVM calls` counts the py4j round trips the driver made to build and run the merge: its own work, "
        "which the machine's load does not change.",
        "",
        "| case | " + " | ".join(PHASES) + " | total | JVM calls |",
        "|---|" + "---|" * (len(PHASES) + 2),
    ]
    for s in summaries:
        if s.phases:
            phases = " | ".join(f"{s.phases[p]:.2f}" for p in PHASES)
            calls = "-" if s.jvm_calls is None else f"{s.jvm_calls:,}"
            lines.append(f"| {s.case} | {phases} | {s.timings['engine'].median:.2f} | {calls} |")
    lines += ["", *_spark_work_lines(result, summaries)]
    lines += [
        "",
        "## Bytes",
        "",
        "Target MiB the engine read after file skipping (`numTargetBytesAfterSkipping`) against the MiB of "
        "the files holding rows the merge changes (for the backfill: of its one partition), and the files "
        "it rewrote against the files holding changed rows.",
        "",
        "| case | MiB read | MiB needed | ratio | files rewritten | files needed |",
        "|---|---|---|---|---|---|",
    ]
    for s in summaries:
        ratio = s.bytes_read / s.bytes_needed if s.bytes_read is not None and s.bytes_needed else None
        lines.append(
            f"| {s.case} | {_mib(s.bytes_read)} | {_mib(s.bytes_needed)} | {_ratio(ratio)} | "
            f"{'-' if s.files_removed is None else s.files_removed} | {s.files_needed} |"
        )
    lines += ["", *_memory_lines(result, other_peaks), "", *_target_lines(result, summaries, sums)]
    return "\n".join(lines) + "\n"


def _spark_work_lines(result: BenchResult, summaries: Sequence[CaseSummary]) -> list[str]:
    """Per case, the Spark jobs and queries (SQL executions) of each contender run in the session, medians:
    what a merge asks of Spark against the floor's one query."""
    contenders = [c for c in ("engine", "floor", "delta-spark", "delta-spark-warm") if c in result.contenders]
    lines = [
        "## Spark jobs and queries",
        "",
        "Per run, medians: the Spark jobs and the queries (SQL executions) each contender in the session "
        "started; the floor's one query reads the changed files and writes them back. Each query and job has "
        "a cost of its own whatever its data, which a small merge's time is mostly made of.",
        "",
        "| case | " + " | ".join(f"{c} jobs | {c} queries" for c in contenders) + " |",
        "|---|" + "---|---|" * len(contenders),
    ]
    for s in summaries:
        cells = [
            f"{work.jobs} | {work.queries}" if (work := s.spark_work.get(c)) else "- | -" for c in contenders
        ]
        lines.append(f"| {s.case} | " + " | ".join(cells) + " |")
    return lines


def _disagreement_lines(result: BenchResult) -> list[str]:
    if not result.disagreements:
        return [
            "**Correctness:** every run's inserted, updated and deleted counts and the table's row count "
            "after it agree with the source draw, across all contenders and repetitions.",
            "",
        ]
    return [
        f"## ⚠ {len(result.disagreements)} DISAGREEMENT(S)",
        "",
        *(f"- {message}" for message in result.disagreements),
        "",
    ]


def _memory_lines(result: BenchResult, other_peaks: dict[str, int]) -> list[str]:
    memories = [r.memory for r in result.records if r.memory is not None]
    workers = [r.run.worker_peak_rss for r in result.records if r.run is not None and r.run.worker_peak_rss]
    lines = ["## Memory (MiB)", ""]
    if not memories:
        return [*lines, "No engine run completed."]
    peak = max(m.python_peak_rss for m in memories)
    lines += [
        "| driver Python RSS at start | driver Python peak RSS | JVM heap peak (driver and executors: "
        "local mode) | deltalake worker peak RSS |",
        "|---|---|---|---|",
        f"| {_mib(result.python_rss_at_start)} | {_mib(peak)} | "
        f"{_mib(max(m.jvm_heap_peak for m in memories))} | {_mib(max(workers, default=None))} |",
    ]
    others = {name: value for name, value in other_peaks.items() if name != result.scale.name}
    if others:
        compared = ", ".join(f"scale {name}: {_mib(value)}" for name, value in sorted(others.items()))
        lines += ["", f"Driver Python peak RSS of the latest other runs: {compared}."]
    return lines


def _target_lines(
    result: BenchResult, summaries: Sequence[CaseSummary], sums: dict[str, float | None]
) -> list[str]:
    """Each of the speed issue's targets, met or missed, with the cases that miss one."""
    lines = [f"## Targets (judged at scale M; this is scale {result.scale.name})", ""]
    for baseline, target in SUM_TARGETS.items():
        lines.append(
            f"- Summed over Delta's 16 cases, engine ≤ {target}x {baseline}: "
            f"{_ratio(sums[baseline])}, {_verdict(sums[baseline], target)}."
        )
    full_sync = {c.name for c in result.cases if c.shape.kind == "full_sync"}
    timed = [s for s in summaries if "floor" in s.timings and "engine" in s.timings]
    # The full sync is judged by its own ratio whatever its floor (its floor rewrites a few files only).
    small = [s for s in timed if s.timings["floor"].median <= SMALL_FLOOR_S and s.case not in full_sync]
    missed = [s for s in small if s.timings["engine"].median - s.timings["floor"].median > SMALL_GAP_S]
    lines.append(
        f"- Cases whose floor is at most {SMALL_FLOOR_S:g} s within {SMALL_GAP_S:g} s of it: "
        + ("met." if not missed else f"missed on {len(missed)} of {len(small)}:")
    )
    lines += [_miss_line(s) for s in missed]
    rewriting = [s for s in timed if s not in small and s.files_needed]
    missed = [
        s
        for s in rewriting
        if s.ratios["floor"] > (FULL_SYNC_FLOOR_TARGET if s.case in full_sync else REWRITE_FLOOR_TARGET)
    ]
    lines.append(
        f"- Larger cases that rewrite files ≤ {REWRITE_FLOOR_TARGET}x the floor (the full sync "
        f"≤ {FULL_SYNC_FLOOR_TARGET}x): "
        + ("met." if not missed else f"missed on {len(missed)} of {len(rewriting)}:")
    )
    lines += [_miss_line(s) for s in missed]
    # A full sync must read every file (any may hold rows the source lost): its keys cannot prune.
    pruned = [s for s in summaries if s.bytes_read is not None and s.bytes_needed and s.case not in full_sync]
    missed = [s for s in pruned if (s.bytes_read or 0) / s.bytes_needed > BYTES_TARGET]
    lines.append(
        f"- Bytes read ≤ {BYTES_TARGET}x the bytes of the files holding changed rows where keys prune "
        "(the backfill: its partition's): "
        + ("met." if not missed else f"missed on {len(missed)} of {len(pruned)}:")
    )
    lines += [f"  - {s.case}: {(s.bytes_read or 0) / s.bytes_needed:.2f}x" for s in missed]
    backfill = next((s for s in summaries if s.case == BACKFILL_CASE), None)
    if backfill is not None and backfill.bytes_read is not None:
        ratio = backfill.bytes_read / backfill.bytes_needed
        lines.append(
            f"- Backfill reads ≤ {BACKFILL_BYTES_TARGET}x its partition's bytes: {ratio:.2f}x, "
            f"{_verdict(ratio, BACKFILL_BYTES_TARGET)}."
        )
    lines.append(
        "- The driver's memory stays flat from S to M: compare the driver Python peak RSS above with the "
        "other scale's."
    )
    return lines


def _verdict(value: float | None, target: float) -> str:
    return "not measured" if value is None else ("met" if value <= target else "missed")


def _miss_line(s: CaseSummary) -> str:
    split = " + ".join(f"{p} {s.phases[p]:.2f}" for p in PHASES) if s.phases else "no phases"
    floor = s.timings["floor"].median
    added = s.timings["engine"].median - floor
    return f"  - {s.case}: {s.ratios['floor']:.2f}x, {added:+.2f} s ({split} s, floor {floor:.2f} s)"
