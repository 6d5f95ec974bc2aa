"""Azure's emulator refusing a ``wasb`` connection's key, or having no such container: the task fails with a
product error naming the connection and the store's answer, never the key, before any Spark job, and is not
retried; in the job, the engine's first request fails the same way with the table untouched."""

from __future__ import annotations

import base64
import json
import os

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from airflow.exceptions import AirflowFailException
from deltalake import write_deltalake
from deltalake.fs import DeltaStorageHandler

from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import StorageAccessError, is_final
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.spec import insert_all, update_all
from tests.airflow.test_template_injection import run_task
from tests.conftest import make_table, table_state, upsert_from_extract

# A well-formed account key that is not the emulator's.
WRONG_KEY = base64.b64encode(b"wrong-key-" * 6).decode()


@pytest.fixture
def lake(azure_lake, azure_server_of_session, monkeypatch):
    """A table and the day's extract in a container of the emulator; the task's process has no key of its
    own."""
    write_deltalake(f"{azure_lake}/orders", pa.table({"id": [1], "qty": [1]}))
    staging = pafs.PyFileSystem(DeltaStorageHandler(azure_lake))
    pq.write_table(pa.table({"id": [2], "qty": [2]}), "staging/2024-01-02.parquet", filesystem=staging)
    for name in azure_server_of_session.environment():
        monkeypatch.delenv(name)
    return azure_lake


def merge_with(mocker, monkeypatch, server, lake: str, *, key: str):
    """The task of a DAG whose ``wasb`` connection holds a connection string with ``key``."""
    connection_string = server.connection_string().replace(server.key, key)
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE_AZ",
        json.dumps({"conn_type": "wasb", "extra": {"connection_string": connection_string}}),
    )
    return run_task(
        mocker,
        {},
        target=f"{lake}/orders",
        source=lake + "/staging/{{ ds }}.parquet",
        condition="t.id = s.id",
        clauses=[update_all(), insert_all()],
        preflight=True,
        rerun="skip",
        storage_conn_id="lake_az",
        allowed_paths=[lake],
    )


def assert_clean(message: str, server) -> None:
    assert "'lake_az'" in message
    for leak in (WRONG_KEY, server.key, "Kernel error", "↳"):
        assert leak not in message


def test_a_wrong_account_key_fails_naming_the_connection_not_the_key_and_is_not_retried(
    mocker, monkeypatch, azure_server_of_session, lake
):
    with pytest.raises(AirflowFailException) as failed:  # Airflow's fail-fast: no retry is spent on it
        merge_with(mocker, monkeypatch, azure_server_of_session, lake, key=WRONG_KEY)
    message = str(failed.value)
    assert message.startswith("[DELTAMERGE_STORAGE_ACCESS_DENIED] The store refused connection 'lake_az'")
    assert "403" in message
    assert_clean(message, azure_server_of_session)
    DeltaMergeHook.run_merge.assert_not_called()  # type: ignore[attr-defined]


def test_a_missing_container_fails_the_same_way(mocker, monkeypatch, azure_server_of_session, lake):
    missing = lake.replace("abfs://lake-", "abfs://gone-")
    with pytest.raises(AirflowFailException) as failed:
        merge_with(mocker, monkeypatch, azure_server_of_session, missing, key=azure_server_of_session.key)
    message = str(failed.value)
    assert message.startswith(f"[DELTAMERGE_STORAGE_BUCKET_NOT_FOUND] The bucket or container of {missing}")
    assert "ContainerNotFound" in message
    assert_clean(message, azure_server_of_session)
    DeltaMergeHook.run_merge.assert_not_called()  # type: ignore[attr-defined]


def test_in_the_job_a_wrong_key_fails_at_the_merges_first_request(
    spark_on_azure, azure_lake, tmp_path, monkeypatch
):
    # Given: a table in the emulator, and a job whose environment holds a wrong account key
    target = make_table(f"{azure_lake}/orders")
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 7, "us")])
    before = table_state(target)
    right = os.environ["AZURE_STORAGE_ACCOUNT_KEY"]
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", WRONG_KEY)
    # When / Then: the engine's first request to the store fails with the product's error, before any work
    with pytest.raises(StorageAccessError) as failed:
        run_merge(spark_on_azure, spec)
    message = str(failed.value)
    assert message.startswith("[DELTAMERGE_STORAGE_ACCESS_DENIED] The store refused the credentials in this")
    assert WRONG_KEY not in message and "Kernel error" not in message
    assert is_final(failed.value)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", right)
    assert table_state(target) == before
