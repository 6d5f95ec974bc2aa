"""``python -m bench first-dag``'s arguments and report, on hand-made runs (no Airflow run is timed here;
tests/airflow/test_first_dag.py reads a real run's figures as the benchmark does)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.first_dag import FirstDagResult, FirstDagRun, readme_first_dag_blocks, write_first_dag
from bench.overhead import parse_ways


def test_runs_default_to_three_both_ways_and_must_be_positive() -> None:
    assert parse_ways(argparse.ArgumentParser(), [], default_runs=3) == (3, ("spark-submit", "connect"))
    assert parse_ways(argparse.ArgumentParser(), ["--runs", "1", "--ways", "connect"], default_runs=3) == (
        1,
        ("connect",),
    )
    with pytest.raises(SystemExit):
        parse_ways(argparse.ArgumentParser(), ["--runs", "0"], default_runs=3)
    with pytest.raises(SystemExit):
        parse_ways(argparse.ArgumentParser(), ["--ways", "yarn"], default_runs=3)


def test_the_readme_gives_the_table_the_dag_and_the_command() -> None:
    setup, dag, commands = readme_first_dag_blocks()
    assert "write_deltalake" in setup and "DeltaMergeOperator(" in dag
    assert "airflow dags test my_first_merge 2024-01-02" in commands


def test_report_gives_medians_and_ranges_per_way_and_every_run(tmp_path: Path) -> None:
    # Given: three runs each way (spark-submit's task 20, 22, 30 s; connect's 5, 6, 9 s)
    result = FirstDagResult("2026-11-27T12:00:00Z", 3, 14.5, load_average=1.5)
    for run, (submit, connect) in enumerate([(20.0, 5.0), (22.0, 6.0), (30.0, 9.0)]):
        result.records += [
            FirstDagRun("spark-submit", run, submit, submit / 4, submit + 10, 1, 1),
            FirstDagRun("connect", run, connect, connect / 2, connect + 10, 1, 1),
        ]
    # When
    report = write_first_dag(result, tmp_path)
    # Then: named after the start, every figure in the JSON, medians (min-max) per way in the report
    assert report.name == "first-dag-20261127T120000Z.md"
    assert len(json.loads(report.with_suffix(".json").read_text())["records"]) == 6
    text = report.read_text()
    assert "| spark-submit | 22.0 (20.0-30.0) | 5.5 (5.0-7.5) | 32.0 (30.0-40.0) |" in text
    assert "| connect | 6.0 (5.0-9.0) | 3.0 (2.5-4.5) | 16.0 (15.0-19.0) |" in text
    assert "started once in 14.5 s" in text
    assert "| 3 | connect | 9.0 | 4.5 | 19.0 | 1 | 1 |" in text
