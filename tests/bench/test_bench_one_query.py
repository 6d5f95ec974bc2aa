"""``python -m bench one-query``: its arguments, its runs on a real SparkSession, and its report."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.one_query import WAYS, Size, measure, parse_args, write_report


def test_sizes_and_runs_are_checked() -> None:
    assert parse_args(["--rows", "100,2000", "--runs", "3"]) == ((100, 2000), 3)
    with pytest.raises(SystemExit):
        parse_args(["--runs", "1"])
    with pytest.raises(SystemExit):
        parse_args(["--rows", "50"])  # fewer rows than the upsert updates


def test_both_ways_merge_the_same_rows_on_fresh_copies(spark, tmp_path: Path) -> None:
    # When: two runs each way on a table of 200 rows
    size = measure(spark, tmp_path, 200, 2)
    # Then: each way ran twice (every run updated 50 and inserted 10, or measure raised), on a file it removed
    assert {way: len(runs) for way, runs in size.seconds.items()} == dict.fromkeys(WAYS, 2)
    assert size.file_bytes > 0
    assert not list(tmp_path.glob("table-*"))  # every copy is gone


def test_report_gives_the_medians_without_first_runs_and_their_ratio(tmp_path: Path) -> None:
    # Given: a size whose first run each way was slow
    size = Size(1_000, 30_000, {"one query": [9.0, 1.0, 1.2], "two phases": [9.0, 2.0, 2.4]})
    # When
    report = write_report("2026-11-29T06:00:00Z", [size], 3, tmp_path)
    # Then
    assert report.name == "one-query-20261129T060000Z.md"
    assert "| 1,000 | 30,000 | 1.100 | 2.200 | 0.50 |" in report.read_text()
