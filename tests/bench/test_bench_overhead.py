"""``python -m bench overhead``'s arguments and report, on hand-made runs: no Spark (the mode's merges are the
hook's, tested end to end in tests/connect/test_connect_dags.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.overhead import OverheadResult, OverheadRun, parse_runs, write_overhead


def test_runs_default_to_five_and_must_be_positive() -> None:
    assert parse_runs([]) == 5
    assert parse_runs(["--runs", "3"]) == 3
    with pytest.raises(SystemExit):
        parse_runs(["--runs", "0"])


def test_report_gives_medians_ranges_and_the_ratio(tmp_path: Path) -> None:
    # Given: three runs each way; spark-submit's merges start after 10, 12 and 20 s, Connect's after 1, 2, 4 s
    result = OverheadResult("2026-11-25T20:00:00Z", 3, 9.5)
    for run, (submit_start, connect_start) in enumerate([(10.0, 1.0), (12.0, 2.0), (20.0, 4.0)]):
        result.records += [
            OverheadRun("spark-submit", run, submit_start, submit_start + 15.0, 10, 50),
            OverheadRun("connect", run, connect_start, connect_start + 3.0, 10, 50),
        ]
    # When
    report = write_overhead(result, tmp_path)
    # Then: the files are named after the start, and the table has each way's median (min-max) and the ratio
    assert report.name == "overhead-20261125T200000Z.md"
    assert json.loads(report.with_suffix(".json").read_text())["server_startup_seconds"] == 9.5
    text = report.read_text()
    assert "| spark-submit | 12.0 (10.0-20.0) | 27.0 (25.0-35.0) |" in text
    assert "| connect | 2.0 (1.0-4.0) | 5.0 (4.0-7.0) |" in text
    assert "| **spark-submit ÷ connect** | **6.0x** | **5.4x** |" in text
    assert "started once in 9.5 s" in text
    # And: every run on a line of its own, in the order they ran
    assert text.index("| 1 | spark-submit | 10.0 | 25.0 | 10 | 50 |") < text.index(
        "| 3 | connect | 4.0 | 7.0 |"
    )
