"""Which merge a consumer's sensor reads: the one whose asset event triggered its run, else the newest."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from airflow.sdk.api.datamodels._generated import AssetReferenceAssetEventDagRun
from airflow.sdk.execution_time.comms import AssetEventDagRunReferenceResult
from airflow.sdk.execution_time.context import TriggeringAssetEventsAccessor

from airflow_provider_deltamerge.sensors.delta_table import DeltaTableSensor
from tests.airflow.conftest import make_table, merge_commit

UPSERT = {"dagId": "upsert", "taskId": "merge_orders", "mapIndex": -1, "tryNumber": 1}


@pytest.fixture
def table(tmp_path) -> str:
    """v1: run r1's merge (3 inserted), v2: run r2's (5 inserted), v3: another DAG's."""
    table = make_table(tmp_path / "orders")
    merge_commit(table, metrics={"numTargetRowsInserted": 3}, provenance={**UPSERT, "runId": "r1"})
    merge_commit(table, metrics={"numTargetRowsInserted": 5}, provenance={**UPSERT, "runId": "r2"})
    merge_commit(table, metrics={"numTargetRowsInserted": 9}, provenance={**UPSERT, "dagId": "other"})
    return table


def triggered_by(table: str, *sources: tuple[str, str]) -> dict[str, object]:
    """A context as Airflow gives it to a run triggered by events of ``table``'s Asset from ``sources``."""
    asset = AssetReferenceAssetEventDagRun(name=Path(table).as_uri(), uri=Path(table).as_uri(), extra={})
    start = datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)
    events = [
        AssetEventDagRunReferenceResult(
            asset=asset,
            extra={},
            source_dag_id=dag_id,
            source_task_id="merge_orders",
            source_run_id=run_id,
            source_map_index=-1,
            source_aliases=[],
            timestamp=start + datetime.timedelta(minutes=minute),
        )
        for minute, (dag_id, run_id) in enumerate(sources)
    ]
    return {"triggering_asset_events": TriggeringAssetEventsAccessor.build(events)}


def found_version(table: str, context: dict[str, object], **criteria: object) -> int:
    sensor = DeltaTableSensor(task_id="wait", table=table, operation="MERGE", **criteria)  # type: ignore[arg-type]
    return int(sensor.poke(context).xcom_value["version"])  # type: ignore[index]


def test_without_a_triggering_event_the_newest_merge_is_found(table):
    assert found_version(table, {}, merge_dag_id="upsert") == 2


def test_the_merge_whose_event_triggered_the_run_is_found(table):
    # Given: the run that merged as version 1 triggered this consumer, though version 2 is newer
    assert found_version(table, triggered_by(table, ("upsert", "r1")), merge_dag_id="upsert") == 1


def test_of_several_triggering_events_the_newest_counts(table):
    context = triggered_by(table, ("upsert", "r2"), ("upsert", "r1"))
    assert found_version(table, context, merge_dag_id="upsert") == 1


def test_events_of_another_dag_do_not_pin_the_run(table):
    assert found_version(table, triggered_by(table, ("other", "r9")), merge_dag_id="upsert") == 2


def test_an_explicit_run_id_wins_over_the_triggering_event(table):
    assert found_version(table, triggered_by(table, ("upsert", "r1")), merge_run_id="r2") == 2
