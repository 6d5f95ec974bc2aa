"""``python -m bench backfill``'s report and its checks, on hand-made runs: no Airflow or Spark (the DAG's
merges are the operator's, tested end to end under a real scheduler in tests/e2e)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.backfill import CHANGED, DAYS, NEW, BackfillResult, DateRun, write_backfill


def a_backfill(task_seconds: list[float]) -> BackfillResult:
    result = BackfillResult("2026-11-27T21:00:00Z", 4, 9.5, 0.3, whole=40.0, commits=len(DAYS) + 1)
    for day, task in zip(DAYS, task_seconds, strict=False):
        result.state[str(day)] = "success"
        result.records.append(DateRun(str(day), 1.0, task, task - 2.0, NEW, CHANGED))
    return result


def test_report_gives_the_whole_backfill_and_each_date_s_medians(tmp_path: Path) -> None:
    # Given: 30 dates whose tasks took 3 s, but for one of 9 s
    result = a_backfill([3.0] * 29 + [9.0])
    # When
    report = write_backfill(result, tmp_path)
    # Then
    assert report.name == "backfill-20261127T210000Z.md"
    assert json.loads(report.with_suffix(".json").read_text())["whole"] == 40.0
    text = report.read_text()
    assert "**The whole backfill: 40.0 s**" in text
    assert "| 1.0 (1.0-1.0) | 3.0 (3.0-9.0) | 1.0 (1.0-7.0) | 96.0 |" in text
    assert "every run succeeded" in text
    assert "| 2024-01-30 | 1.0 | 9.0 | 7.0 | 10 | 50 |" in text


def test_a_failed_run_wrong_counts_or_a_missing_commit_are_reported(tmp_path: Path) -> None:
    # Given: a clean backfill; then one whose 2nd date failed, 3rd merged wrong rows, a commit short
    assert a_backfill([3.0] * 30).disagreements() == []
    result = a_backfill([3.0] * 30)
    result.state["2024-01-02"] = "failed"
    result.records[2] = DateRun("2024-01-03", 1.0, 3.0, 1.0, 0, CHANGED)
    result.commits -= 1
    # When
    problems = result.disagreements()
    # Then: each is named
    assert problems == [
        "2024-01-02: run failed",
        "2024-01-03: inserted 0, updated 50 (expected 10, 50)",
        "the table took 30 commits, not 31",
    ]
    assert (
        "**Correctness:** 2024-01-02: run failed; 2024-01-03: inserted 0"
        in write_backfill(result, tmp_path).read_text()
    )
