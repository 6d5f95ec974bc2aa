"""A store that refuses the connection, has no such bucket or does not answer: the task fails with a product
error naming the connection and the store's answer, never the key, before any Spark job; only the store that
did not answer is retried."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.exceptions import AirflowFailException
from deltalake import write_deltalake

from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import StorageAccessError, is_final
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.spec import insert_all, update_all
from tests.airflow.test_template_injection import run_task
from tests.conftest import make_table, table_state, upsert_from_extract

WRONG_SECRET = "WRONG-secret-5d1f0c"
# Nothing listens on the discard port of 127.0.0.1.
NOWHERE = "http://127.0.0.1:9"


@pytest.fixture
def lake(s3_lake, s3_server_of_session, monkeypatch):
    """A table and the day's extract on the S3 server; the task's process has no keys of its own."""
    write_deltalake(f"{s3_lake}/orders", pa.table({"id": [1], "qty": [1]}))
    pq.write_table(pa.table({"id": [2], "qty": [2]}), f"{s3_lake}/staging/2024-01-02.parquet")
    for name in s3_server_of_session.environment():
        monkeypatch.delenv(name)
    return s3_lake


def merge_with(mocker, monkeypatch, server, lake: str, *, secret: str, endpoint: str | None = None):
    key_id = server.key_pair[0]
    connection = {"endpoint_url": endpoint or server.url, "region_name": "us-east-1"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE_S3",
        json.dumps({"conn_type": "aws", "login": key_id, "password": secret, "extra": connection}),
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
        storage_conn_id="lake_s3",
        allowed_paths=[lake],
    )


def assert_clean(message: str, server) -> None:
    assert "'lake_s3'" in message
    for leak in (WRONG_SECRET, server.key_pair[1], server.key_pair[0], "Kernel error", "↳"):
        assert leak not in message


def test_a_wrong_key_fails_naming_the_connection_not_the_key_and_is_not_retried(
    mocker, monkeypatch, s3_server_of_session, lake
):
    with pytest.raises(AirflowFailException) as failed:  # Airflow's fail-fast: no retry is spent on it
        merge_with(mocker, monkeypatch, s3_server_of_session, lake, secret=WRONG_SECRET)
    message = str(failed.value)
    assert message.startswith("[DELTAMERGE_STORAGE_ACCESS_DENIED] The store refused connection 'lake_s3'")
    assert "403 Forbidden" in message and "SignatureDoesNotMatch" in message
    assert_clean(message, s3_server_of_session)
    DeltaMergeHook.run_merge.assert_not_called()  # type: ignore[attr-defined]


def test_a_missing_bucket_fails_the_same_way(mocker, monkeypatch, s3_server_of_session, lake):
    secret = s3_server_of_session.key_pair[1]
    with pytest.raises(AirflowFailException) as failed:
        merge_with(mocker, monkeypatch, s3_server_of_session, "s3://no-such-bucket", secret=secret)
    message = str(failed.value)
    assert message.startswith("[DELTAMERGE_STORAGE_BUCKET_NOT_FOUND] The bucket or container of s3://no-such")
    assert "NoSuchBucket" in message
    assert_clean(message, s3_server_of_session)
    DeltaMergeHook.run_merge.assert_not_called()  # type: ignore[attr-defined]


def test_a_store_that_is_down_fails_within_seconds_for_airflow_to_retry(
    mocker, monkeypatch, s3_server_of_session, lake
):
    secret = s3_server_of_session.key_pair[1]
    started = time.monotonic()
    with pytest.raises(StorageAccessError) as failed:  # raised as it is: Airflow's retries take it
        merge_with(mocker, monkeypatch, s3_server_of_session, lake, secret=secret, endpoint=NOWHERE)
    # The store client's own retries, not minutes: a guard on a behaviour, sized for a busy machine.
    assert time.monotonic() - started < 60
    message = str(failed.value)
    assert message.startswith(f"[DELTAMERGE_STORAGE_UNAVAILABLE] The store of {lake}/orders did not answer")
    assert "Connection refused" in message
    assert_clean(message, s3_server_of_session)
    DeltaMergeHook.run_merge.assert_not_called()  # type: ignore[attr-defined]


def test_in_the_job_a_wrong_key_fails_at_the_merges_first_request(
    spark_on_s3, s3_lake, tmp_path, monkeypatch
):
    # Given: a table on the S3 server, and a job whose environment holds a wrong secret
    target = make_table(f"{s3_lake}/orders")
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 7, "us")])
    before = table_state(target)
    right = os.environ["AWS_SECRET_ACCESS_KEY"]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", WRONG_SECRET)
    # When / Then: the engine's first request to the store fails with the product's error, before any work
    with pytest.raises(StorageAccessError) as failed:
        run_merge(spark_on_s3, spec)
    message = str(failed.value)
    assert message.startswith("[DELTAMERGE_STORAGE_ACCESS_DENIED] The store refused the credentials in this")
    assert WRONG_SECRET not in message and "Kernel error" not in message
    assert is_final(failed.value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", right)
    assert table_state(target) == before
