"""The deferrable path (the trigger run with asyncio) and the checks a DAG gets at parse time."""

from __future__ import annotations

import asyncio

import pytest
from airflow.sdk.exceptions import TaskDeferred

from airflow_provider_deltamerge.delta.log.commit_match import CommitCriteria
from airflow_provider_deltamerge.exceptions import MetricBoundsError
from airflow_provider_deltamerge.operators.delta_merge_check import DeltaMergeCheckOperator
from airflow_provider_deltamerge.sensors.delta_table import DeltaTableSensor
from airflow_provider_deltamerge.triggers.delta_table import DeltaTableTrigger
from tests.airflow.conftest import make_table, merge_commit

PROVENANCE = {"dagId": "upsert", "taskId": "merge_orders", "runId": "r1", "mapIndex": -1, "tryNumber": 1}


def trigger_for(table: str) -> DeltaTableTrigger:
    criteria = CommitCriteria.from_values(
        operation="MERGE", dag_id="upsert", metrics={"numTargetRowsInserted": {"min": 1}}
    )
    return DeltaTableTrigger(table=table, criteria=criteria.to_json(), poke_interval=0.05)


def test_trigger_waits_for_the_matching_commit_then_fires(tmp_path):
    table = make_table(tmp_path / "orders")
    trigger = trigger_for(table)

    async def scenario() -> tuple[dict, int]:
        events = trigger.run()
        first = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.3)
        assert not first.done()  # nothing matches yet: still polling
        # A merge with no inserted rows does not match; the one after it does.
        await asyncio.to_thread(
            merge_commit, table, metrics={"numTargetRowsInserted": 0}, provenance=PROVENANCE
        )
        version = await asyncio.to_thread(
            merge_commit, table, metrics={"numTargetRowsInserted": 3}, provenance=PROVENANCE
        )
        event = await asyncio.wait_for(first, timeout=10)
        return event.payload, version

    payload, version = asyncio.run(scenario())

    assert payload["status"] == "success"
    assert payload["commit"]["version"] == version == 2
    assert payload["commit"]["metrics"] == {"numTargetRowsInserted": 3}
    assert payload["commit"]["provenance"] == PROVENANCE


def test_trigger_serializes_to_an_equal_trigger(tmp_path):
    trigger = trigger_for(str(tmp_path / "orders"))
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_deltamerge.triggers.delta_table.DeltaTableTrigger"
    module, name = classpath.rsplit(".", 1)
    rebuilt = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)


def test_sensor_defers_with_its_rendered_criteria(tmp_path):
    sensor = DeltaTableSensor(
        task_id="wait",
        table=str(tmp_path / "orders"),
        operation="MERGE",
        after_version="4",
        merge_run_id="r1",
        metrics={"numTargetRowsDeleted": {"max": 10}},
        deferrable=True,
        poke_interval=7,
    )
    with pytest.raises(TaskDeferred) as deferred:  # no commit yet, so it hands over to the triggerer
        sensor.execute(context={})
    trigger = deferred.value.trigger
    assert isinstance(trigger, DeltaTableTrigger) and trigger.poke_interval == 7
    assert trigger.criteria["after_version"] == 4 and trigger.criteria["run_id"] == "r1"
    assert sensor.execute_complete({}, {"status": "success", "commit": {"version": 5}}) == {"version": 5}


def test_unknown_metric_fails_the_dag_at_parse_time():
    with pytest.raises(
        MetricBoundsError, match=r"(?s)unknown metric 'numTargetRowDeleted'.*Known metrics: numSourceRows"
    ):
        DeltaMergeCheckOperator(
            task_id="check", merge_task_id="merge", bounds={"numTargetRowDeleted": {"max": 1}}
        )
    with pytest.raises(MetricBoundsError, match="unknown metric 'rows'"):
        DeltaTableSensor(task_id="wait", table="/t", metrics={"rows": {"min": 1}})


def test_check_needs_metrics_or_the_merge_task():
    with pytest.raises(ValueError, match="give merge_task_id"):
        DeltaMergeCheckOperator(task_id="check", bounds={"numSourceRows": {"min": 1}})
    with pytest.raises(ValueError, match="on_failure must be one of fail, skip"):
        DeltaMergeCheckOperator(
            task_id="check", merge_task_id="m", bounds={"numSourceRows": {"min": 1}}, on_failure="warn"
        )
