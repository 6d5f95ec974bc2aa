"""The sensor and its trigger authenticate through an Airflow connection, never through credentials in the
DAG or in the trigger's stored arguments: a Delta table on a local S3 endpoint that checks every signature."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from airflow.providers.common.compat.sdk import AirflowException
from airflow.providers_manager import ProvidersManager

from airflow_provider_deltamerge.delta.log.commit_match import CommitCriteria
from airflow_provider_deltamerge.exceptions import StorageCredentialsError
from airflow_provider_deltamerge.hooks.storage_connection import CONNECTION_TYPE, DeltaStorageHook
from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options
from airflow_provider_deltamerge.sensors.delta_table import DeltaTableSensor
from airflow_provider_deltamerge.triggers.delta_table import DeltaTableTrigger
from tests.airflow.conftest import DAGS, make_table, merge_commit, task_states, xcom_value
from tests.e2e.conftest import dags_test_with_deferral
from tests.s3_store import ROLE_KEY, s3_store

KEY_PAIR = ("AKIDLAKEREADER", "lake-reader-secret")
ROLE_ARN = "arn:aws:iam::123456789012:role/lake-reader"
PROVENANCE = {"dagId": "upsert", "taskId": "merge_orders", "runId": "r1", "mapIndex": -1, "tryNumber": 1}


@pytest.fixture
def store(tmp_path):
    """s3://lake/orders, whose version 1 is a merge of run r1, behind an endpoint that checks signatures."""
    table = make_table(tmp_path / "lake" / "orders")
    merge_commit(table, metrics={"numTargetRowsInserted": 3}, provenance=PROVENANCE)
    with s3_store(tmp_path / "lake", bucket="lake", key_pair=KEY_PAIR) as store:
        yield store


def connection_variable(store, *, password: str = KEY_PAIR[1], **extra: object) -> str:
    """Connection ``lake_s3`` the way a deployment defines it: the value of ``AIRFLOW_CONN_LAKE_S3``."""
    connection = {
        "conn_type": "aws",
        "login": KEY_PAIR[0],
        "password": password,
        "extra": {"endpoint_url": store.url, "region_name": "us-east-1", **extra},
    }
    return json.dumps(connection)


def aws_connection(monkeypatch, store, *, password: str = KEY_PAIR[1], **extra: object) -> str:
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_S3", connection_variable(store, password=password, **extra))
    return "lake_s3"


def role_connection(monkeypatch, store) -> str:
    """``lake_s3`` with a role to assume, its STS endpoint the local store."""
    return aws_connection(
        monkeypatch, store, role_arn=ROLE_ARN, service_config={"sts": {"endpoint_url": store.url}}
    )


def sensor(**kwargs: object) -> DeltaTableSensor:
    return DeltaTableSensor(
        task_id="wait", table="s3://lake/orders", operation="MERGE", merge_run_id="r1", **kwargs
    )


def test_sensor_reads_the_table_with_the_connections_key(monkeypatch, store):
    found = sensor(storage_conn_id=aws_connection(monkeypatch, store)).poke(context={})

    assert found.is_done
    assert (found.xcom_value["version"], found.xcom_value["metrics"]) == (1, {"numTargetRowsInserted": 3})
    assert set(store.admitted) == {KEY_PAIR[0]}


def test_sensor_is_refused_with_a_wrong_secret(monkeypatch, store):
    with pytest.raises(
        AirflowException, match=r"Cannot read s3://lake/orders with connection lake_s3: .*privileges"
    ):
        sensor(storage_conn_id=aws_connection(monkeypatch, store, password="not-the-secret")).poke({})
    assert store.admitted == []


def test_sensor_reads_with_the_role_the_connection_assumes(monkeypatch, store):
    # The Amazon provider's AwsBaseHook assumes the role at STS (here the local endpoint) with the
    # connection's keys; the table is then read with the temporary keys and their session token.
    conn_id = role_connection(monkeypatch, store)

    assert sensor(storage_conn_id=conn_id).poke(context={}).is_done
    assert store.assumed_roles == [ROLE_ARN]
    assert set(store.admitted) == {ROLE_KEY[0]}


def test_trigger_resolves_the_connection_in_the_triggerer(monkeypatch, store):
    conn_id = aws_connection(monkeypatch, store)
    criteria = CommitCriteria.from_values(operation="MERGE", run_id="r1").to_json()
    trigger = DeltaTableTrigger(
        table="s3://lake/orders", criteria=criteria, poke_interval=0.05, storage_conn_id=conn_id
    )
    stored = json.dumps(trigger.serialize())  # what Airflow keeps in its database while the task waits

    async def first_event() -> dict:
        return (await asyncio.wait_for(anext(trigger.run()), timeout=30)).payload

    event = asyncio.run(first_event())

    assert event["status"] == "success" and event["commit"]["version"] == 1
    assert KEY_PAIR[1] not in stored and "lake_s3" in stored
    assert set(store.admitted) == {KEY_PAIR[0]}


def test_trigger_reports_an_undefined_connection(store):
    criteria = CommitCriteria.from_values(operation="MERGE").to_json()
    trigger = DeltaTableTrigger(table="s3://lake/orders", criteria=criteria, storage_conn_id="no_such_conn")

    async def first_event() -> dict:
        return (await asyncio.wait_for(anext(trigger.run()), timeout=30)).payload

    event = asyncio.run(first_event())

    assert event["status"] == "error" and "no_such_conn" in event["message"]


@pytest.mark.slow
def test_deferred_sensor_authenticates_through_the_connection_under_airflow(airflow_env, tmp_path, store):
    env = {
        **airflow_env,
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW_CONN_LAKE_S3": connection_variable(store),
    }

    def run_r2_merges() -> None:
        # The DAG waits for run r2's merge: committed once the sensor has deferred, so the trigger reads it.
        table = str(tmp_path / "lake" / "orders")
        merge_commit(table, metrics={"numTargetRowsInserted": 7}, provenance={**PROVENANCE, "runId": "r2"})

    returncode, text = dags_test_with_deferral(env, "deltamerge_sensor_s3", "2024-01-02", run_r2_merges)

    assert returncode == 0, text[-3000:]
    assert task_states(airflow_env, "deltamerge_sensor_s3") == {"wait_for_merge": "success"}
    assert xcom_value(airflow_env, "deltamerge_sensor_s3", "wait_for_merge")["version"] == 2
    assert set(store.admitted) == {KEY_PAIR[0]}
    assert KEY_PAIR[1] not in text


def test_without_the_amazon_provider_the_connections_key_pair_is_used(monkeypatch, store):
    # A deployment without the Amazon provider: its hook cannot be imported, so nothing assumes the role.
    monkeypatch.setitem(sys.modules, "airflow.providers.amazon.aws.hooks.base_aws", None)
    conn_id = role_connection(monkeypatch, store)

    assert sensor(storage_conn_id=conn_id).poke(context={}).is_done
    assert store.assumed_roles == []
    assert set(store.admitted) == {KEY_PAIR[0]}


def storage_connection(monkeypatch, store, env: str) -> str:
    """Connection ``lake`` of the provider's own type, its env field as the connection form keeps it."""
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": CONNECTION_TYPE, "extra": {"env": env}}))
    return "lake"


def test_sensor_reads_the_table_through_the_providers_own_connection_type(monkeypatch, store):
    env = {
        "AWS_ACCESS_KEY_ID": KEY_PAIR[0],
        "AWS_SECRET_ACCESS_KEY": KEY_PAIR[1],
        "AWS_ENDPOINT_URL": store.url,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    conn_id = storage_connection(monkeypatch, store, json.dumps(env))

    assert sensor(storage_conn_id=conn_id).poke(context={}).is_done
    assert set(store.admitted) == {KEY_PAIR[0]}
    assert DeltaStorageHook(conn_id).test_connection() == (True, f"Sets {', '.join(sorted(env))}.")


def test_an_env_field_that_is_not_an_object_is_refused_without_its_text(monkeypatch, store):
    conn_id = storage_connection(monkeypatch, store, '{"AWS_SECRET_ACCESS_KEY": "lake-reader-secret",')
    ok, message = DeltaStorageHook(conn_id).test_connection()
    assert not ok and "not JSON (line 1, column" in message and "lake-reader-secret" not in message
    with pytest.raises(StorageCredentialsError, match="must be a JSON object"):
        connection_storage_options(storage_connection(monkeypatch, store, '["AWS_REGION"]'))


def test_airflow_offers_the_connection_type_with_its_one_secret_field():
    providers = ProvidersManager()
    hook = providers.hooks[CONNECTION_TYPE]
    assert hook is not None and hook.hook_class_name.endswith("storage_connection.DeltaStorageHook")
    widget = providers.connection_form_widgets[f"extra__{CONNECTION_TYPE}__env"]
    assert widget.is_sensitive and widget.field["schema"]["title"] == "Environment variables"
    hidden = providers.field_behaviours[CONNECTION_TYPE]["hidden_fields"]
    assert set(hidden) == {"host", "schema", "login", "password", "port", "extra"}
