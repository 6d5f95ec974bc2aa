"""``python -m bench first-dag``'s arguments and report, on hand-made runs (no Airflow run is timed here;
tests/airflow/test_first_dag.py reads a real run's figures as the benchmark does)."""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import pytest

from bench.first_dag import (
    PHASES,
    FirstDagResult,
    FirstDagRun,
    readme_first_dag_blocks,
    run_phases,
    write_first_dag,
)
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
            FirstDagRun(
                "spark-submit", run, submit, submit / 4, submit + 10, 1, 1, dict.fromkeys(PHASES, submit)
            ),
            FirstDagRun("connect", run, connect, connect / 2, connect + 10, 1, 1, {}),
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
    # Phases: spark-submit's medians; connect's runs had no phase lines
    assert "| merge | 22.0 | - | the job's log read, plan, Spark jobs, to the commit |" in text


def test_phases_are_split_by_the_first_line_of_each() -> None:
    # Given: a log of `airflow dags test` whose lines open the phases at 2, 3.5, 6, 9.25 and 9.5 s
    line = "2026-11-27T12:00:{:06.3f}000Z [info     ] {}"
    output = "\n".join(
        [
            line.format(1.0, "DAG bundles loaded"),
            line.format(2.0, "[DAG TEST] running task task_id=merge_orders"),
            "  a continuation line without a time",
            line.format(3.5, "Pre-flight checks passed for the merge into /lake/orders"),
            line.format(6.0, "Spark started in 1.2 s: Spark 4.2.0"),
            line.format(7.0, "Plan: classic executor"),
            line.format(9.25, "Committed version 1: 1 files removed, 1 added"),
            line.format(9.5, "[DAG TEST] end task task_id=merge_orders"),
        ]
    )
    started = datetime.datetime(2026, 11, 27, 12, 0, 0, tzinfo=datetime.UTC).timestamp()
    # When/Then: each phase runs from its line to the next one's, the last to the command's end
    assert run_phases(output, started, started + 10.0) == {
        "airflow": 2.0,
        "task start": 1.5,
        "spark start": 2.5,
        "merge": 3.25,
        "finish": 0.25,
        "airflow end": 0.5,
    }
    # And: a log without the job's start line has no phases
    assert run_phases(output.replace("Spark started", "Spark ran"), started, started + 10.0) == {}
