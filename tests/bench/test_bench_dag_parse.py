"""``python -m bench dag-parse``'s arguments and report, on hand-made runs: no interpreter is timed (what a
DAG parse imports is tested in tests/test_provider.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.dag_parse import ParseResult, ParseRun, parse_dag_parse_args, write_dag_parse


def test_runs_default_to_nine_and_must_be_positive() -> None:
    assert parse_dag_parse_args([]).runs == 9
    args = parse_dag_parse_args(["--runs", "3", "--against", "HEAD~1", "--from-source"])
    assert (args.runs, args.against, args.from_source) == (3, "HEAD~1", True)
    with pytest.raises(SystemExit):
        parse_dag_parse_args(["--runs", "0"])


def test_report_gives_medians_ranges_the_ratio_and_what_was_imported(tmp_path: Path) -> None:
    # Given: three runs of this tree (airflow.sdk 1, 2, 4 s; sqlglot 0.1 s, the modules 0.1 s) and of an
    # older revision that imported pyarrow (the modules 1.9 s)
    result = ParseResult("2026-11-27T01:00:00Z", 3, ["this tree", "abc123"], tree="def456")
    for run, sdk in enumerate([1.0, 2.0, 4.0]):
        result.records += [
            ParseRun("this tree", True, run, sdk, 0.1, 0.1, 0.01, []),
            ParseRun("abc123", True, run, sdk, 0.1, 1.9, 0.01, ["numpy", "pyarrow"]),
        ]
    # When
    report = write_dag_parse(result, tmp_path)
    # Then: the files are named after the start; each code's row has its medians (min-max) and its ratio
    assert report.name == "dag-parse-20261127T010000Z.md"
    assert json.loads(report.with_suffix(".json").read_text())["codes"] == ["this tree", "abc123"]
    text = report.read_text()
    assert "this tree at def456." in text
    assert (
        "| this tree | bytecode | 2.000 (1.000-4.000) | **0.200 (0.200-0.200)** | 0.100 (0.100-0.100) |"
        in text
    )
    assert "| 0.10x | 0.010 (0.010-0.010) | none |" in text
    assert "| abc123 | bytecode | 2.000 (1.000-4.000) | **2.000 (2.000-2.000)** |" in text
    assert "| 1.00x | 0.010 (0.010-0.010) | numpy, pyarrow |" in text
    # And: every run on a line of its own, in the order they ran
    assert text.index("| 1 | this tree | bytecode | 1.000 |") < text.index(
        "| 3 | abc123 | bytecode | 4.000 |"
    )
