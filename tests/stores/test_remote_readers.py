"""The readers of a merge's log besides the task, on each store's server: the sensor's poke, the trigger's
poll and the history page read the remote log with the storage connection's credentials only (the test's
process holds none of its own)."""

from __future__ import annotations

import asyncio
import json

import pytest

from airflow_provider_deltamerge.delta.log.commit_match import CommitCriteria
from airflow_provider_deltamerge.history.log_pages import DeltaLog
from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options
from airflow_provider_deltamerge.sensors.delta_table import DeltaTableSensor
from airflow_provider_deltamerge.triggers.delta_table import DeltaTableTrigger
from tests.airflow.conftest import make_table, merge_commit

PROVENANCE = {"dagId": "upsert", "taskId": "merge_orders", "runId": "r1", "mapIndex": -1, "tryNumber": 1}
METRICS = {"numTargetRowsInserted": 3}


@pytest.fixture(params=["s3", "azure", "gcs"])
def remote_table(request, monkeypatch) -> tuple[str, str]:
    """A table on a store's server with one merge commit (version 1), and the id of a connection (``aws``
    with the server's endpoint, ``wasb`` with the emulator's connection string, ``google_cloud_platform``
    naming the emulator) that reaches it; the process's own credentials are gone."""
    lake = request.getfixturevalue(f"{request.param}_lake")
    server = request.getfixturevalue(f"{request.param}_server_of_session")
    table = make_table(f"{lake}/orders")  # type: ignore[arg-type]
    merge_commit(table, metrics=METRICS, provenance=PROVENANCE)
    for name in server.environment():
        monkeypatch.delenv(name)
    if request.param == "s3":
        key_id, secret = server.key_pair
        connection = {
            "conn_type": "aws",
            "login": key_id,
            "password": secret,
            "extra": {"endpoint_url": server.url, "region_name": "us-east-1"},
        }
    elif request.param == "azure":
        connection = {"conn_type": "wasb", "extra": {"connection_string": server.connection_string()}}
    else:
        connection = server.connection()
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(connection))
    return table, "lake"


def test_the_sensor_finds_the_merge_with_the_connections_credentials(remote_table):
    table, conn_id = remote_table
    sensor = DeltaTableSensor(
        task_id="wait",
        table=table,
        merge_dag_id="upsert",
        metrics={"numTargetRowsInserted": {"min": 1}},
        storage_conn_id=conn_id,
    )
    found = sensor.poke({})  # type: ignore[arg-type]
    assert found.is_done and found.xcom_value["version"] == 1


def test_the_trigger_fires_on_the_merge_with_the_connections_credentials(remote_table):
    table, conn_id = remote_table
    criteria = CommitCriteria.from_values(operation="MERGE", dag_id="upsert", metrics={})
    trigger = DeltaTableTrigger(
        table=table, criteria=criteria.to_json(), poke_interval=0.05, storage_conn_id=conn_id
    )

    async def first_event() -> dict:
        return (await asyncio.wait_for(anext(trigger.run()), timeout=60)).payload

    payload = asyncio.run(first_event())
    assert payload["status"] == "success" and payload["commit"]["version"] == 1


def test_the_history_page_reads_the_log_with_the_connections_credentials(remote_table):
    table, conn_id = remote_table
    page = DeltaLog(table, connection_storage_options(conn_id)).page(1)
    assert [(e.version, e.ours) for e in page.entries] == [(1, True), (0, False)]
    assert page.entries[0].provenance["runId"] == "r1"
