"""``python -m bench overhead``'s arguments and report, on hand-made runs: no Spark (the mode's merges are the
hook's, tested end to end in tests/connect/test_connect_dags.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.overhead import OverheadResult, OverheadRun, parse_args, phase_seconds, write_overhead


def test_runs_default_to_five_both_ways_and_must_be_positive() -> None:
    assert parse_args([]) == (5, ("spark-submit", "connect"))
    assert parse_args(["--runs", "3", "--ways", "spark-submit"]) == (3, ("spark-submit",))
    with pytest.raises(SystemExit):
        parse_args(["--runs", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--ways", "spark-shell"])


def test_phases_are_split_by_when_the_job_s_lines_came() -> None:
    # Given: a merge called at 100.0 whose job said its session took 3.0 s, then its lines, returning at 115
    lines = [
        (106.0, "Spark started in 3.0 s: Spark 4.2.0, master local[*]"),
        (106.5, "Snapshot: /t at version 0, 1 files"),
        (108.5, "Progress: loading the source and planning, 10 s"),
        (109.0, "Plan: classic executor; pruning kept 1 of 1 files (0 skipped)"),
        (113.0, "Scan: 60 source rows, 1 files touched, 900 ms"),
        (113.5, "Committed version 1: 1 files removed, 1 added"),
    ]
    # When
    phases = phase_seconds(lines, 100.0, 115.0)
    # Then: launch is what came before the job's session; each later phase ends at its line
    assert phases == {
        "launch": 3.0,
        "session": 3.0,
        "log read": 0.5,
        "plan": 2.5,
        "Spark jobs": 4.0,
        "commit": 0.5,
        "stop": 1.5,
    }
    # And: a merge whose lines lack one (it committed nothing) has no phases
    assert phase_seconds(lines[:-1], 100.0, 115.0) == {}


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


def test_connect_calls_are_tabled_heaviest_first_without_the_server_s_first_run(tmp_path: Path) -> None:
    # Given: three Connect runs; the first (the server's warm-up) wrote slowly
    result = OverheadResult("2026-11-27T21:40:00Z", 3, 5.0)
    for run, write in enumerate([9.0, 0.5, 0.7]):
        calls = {
            "query delta/files/writer.py:write_files": [1, write],
            "analysis engine/observed.py:observe": [5, 0.1],
        }
        result.records.append(OverheadRun("connect", run, 0.0, 2.0, 10, 50, connect_calls=calls))
    # When
    text = write_overhead(result, tmp_path).read_text()
    # Then: medians over runs 2-3, the write first
    assert "runs 2-3" in text and "0.70 s in all" in text
    assert text.index("| query delta/files/writer.py:write_files | 1 | 0.600 |") < text.index(
        "| analysis engine/observed.py:observe | 5 | 0.100 |"
    )
