"""``python -m bench first-dag-scheduled``'s report and its split of a task's log into phases, on hand-made
runs and logs (no Airflow run is timed here: the operator under a real scheduler is tested end to end in
tests/e2e)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from bench.first_dag_scheduled import (
    PHASES,
    ScheduledResult,
    ScheduledRun,
    task_phases,
    write_scheduled_first_dag,
)


def test_report_gives_medians_and_ranges_per_way_phases_and_every_run(tmp_path: Path) -> None:
    # Given: three runs each way (spark-submit's task 8, 7, 12 s; connect's 3, 2, 5 s); connect's logs lacked
    # a phase's line
    result = ScheduledResult("2026-11-30T21:00:00Z", 3, 4.5, load_average=0.8)
    for run, (submit, connect) in enumerate([(8.0, 3.0), (7.0, 2.0), (12.0, 5.0)]):
        result.records += [
            ScheduledRun(
                "spark-submit", run, 0.5, submit, submit / 2, 1, 1, dict.fromkeys(PHASES, submit / 4)
            ),
            ScheduledRun("connect", run, 0.25, connect, connect / 2, 1, 1, {}),
        ]
    # When
    report = write_scheduled_first_dag(result, tmp_path)
    # Then: named after the start, every figure in the JSON, medians (min-max) per way
    assert report.name == "first-dag-scheduled-20261130T210000Z.md"
    assert len(json.loads(report.with_suffix(".json").read_text())["records"]) == 6
    text = report.read_text()
    assert "| spark-submit | 8.0 (7.0-12.0) | 4.0 (3.5-6.0) | 0.5 (0.5-0.5) |" in text
    assert "| connect | 3.0 (2.0-5.0) | 1.5 (1.0-2.5) | 0.2 (0.2-0.2) |" in text
    assert "started once in 4.5 s" in text
    # And: spark-submit's phases by their medians, connect's none; each run on its line
    assert "| merge | 2.0 | - | the job's log read, plan, Spark jobs, to the commit |" in text
    assert "| 3 | connect | 5.0 | 2.5 | 0.2 | 1 | 1 |" in text


def test_a_task_s_log_is_split_by_the_first_line_of_each_phase() -> None:
    # Given: a task's JSON-lines log whose lines open the phases at 0.5, 3.0 and 6.25 s after its start
    start = datetime.datetime(2026, 11, 30, 21, 0, 0, tzinfo=datetime.UTC)

    def line(seconds: float, event: str) -> str:
        at = (start + datetime.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
        return json.dumps({"timestamp": at, "level": "info", "event": event, "logger": "task"})

    log = "\n".join(
        [
            line(0.1, "::group::Pre Execute"),
            line(0.5, "Pre-flight checks passed for the merge into /lake/orders"),
            "not a JSON line: a child's raw output",
            line(3.0, "Spark started in 2.1 s: Spark 4.2.0, master local[*]"),
            line(4.0, "Plan: classic executor"),
            line(6.25, "Committed version 1: 1 files removed, 1 added"),
            line(6.5, "Pre-flight checks passed: a later line of an opening already passed"),
        ]
    )
    # When/Then: each phase runs from its line to the next one's, the last to the task's end
    assert task_phases(log, start.timestamp(), start.timestamp() + 7.0) == {
        "task start": 0.5,
        "spark start": 2.5,
        "merge": 3.25,
        "finish": 0.75,
    }
    # And: a log without the job's start line has no phases
    assert (
        task_phases(log.replace("Spark started", "Spark ran"), start.timestamp(), start.timestamp() + 7) == {}
    )
