"""A store that refuses the connection's key, has no such bucket or container, or does not answer, on each
store's server: the task fails with a product error naming the connection and the store's answer, never the
key, before any Spark job; only the store that did not answer is retried. In the job, the engine's first
request fails the same way, the table untouched."""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from airflow.exceptions import AirflowFailException
from deltalake import write_deltalake
from deltalake.fs import DeltaStorageHandler

from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import StorageAccessError, is_final
from airflow_provider_deltamerge.hooks.cloud_credentials import GOOGLE_EMULATOR, GOOGLE_KEY
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.spec import insert_all, update_all
from tests.airflow.test_template_injection import run_task
from tests.conftest import make_table, table_state, upsert_from_extract

# Nothing listens on the discard port of 127.0.0.1.
NOWHERE = "http://127.0.0.1:9"


@dataclass(frozen=True)
class Store:
    """How one store's server is reached and how it says no."""

    name: str
    server: Any
    secret_variable: str  # the job's environment variable holding the secret
    wrong_secret: str
    refusal: tuple[str, ...]  # what its answer to a wrong key says
    no_container: str  # its answer's code for a missing bucket or container

    @property
    def secret(self) -> str:
        return str(self.server.environment()[self.secret_variable])

    def connection(self, *, secret: str, endpoint: str | None = None) -> dict[str, Any]:
        """A connection of the type users give for this store, with ``secret`` (and ``endpoint``)."""
        if self.name == "gcs":  # an emulator, which checks no credential
            return {
                **self.server.connection(),
                "extra": {"env": {GOOGLE_EMULATOR: endpoint or self.server.url}},
            }
        if self.name == "s3":
            extra = {"endpoint_url": endpoint or self.server.url, "region_name": "us-east-1"}
            return {"conn_type": "aws", "login": self.server.key_pair[0], "password": secret, "extra": extra}
        connection_string = self.server.connection_string().replace(self.server.key, secret)
        if endpoint:
            connection_string = connection_string.replace(self.server.url, endpoint)
        return {"conn_type": "wasb", "extra": {"connection_string": connection_string}}

    def missing(self, lake: str) -> str:
        """A bucket or container that does not exist, named as ``lake`` is."""
        missing = {"s3": "s3://no-such-bucket", "gcs": "gs://no-such-bucket"}
        return missing.get(self.name) or lake.replace("abfs://lake-", "abfs://gone-")

    def hidden(self) -> tuple[str, ...]:
        """What no message may show: the wrong and the right secret, and an S3 key's id."""
        key_id = (self.server.key_pair[0],) if self.name == "s3" else ()
        return tuple(filter(None, (self.wrong_secret, self.secret, *key_id, "Kernel error", "↳")))


@pytest.fixture(params=["s3", "azure"])
def store(request) -> Store:
    """A store that checks the connection's key."""
    return store_of(request, request.param)


@pytest.fixture(params=["s3", "azure", "gcs"])
def any_store(request) -> Store:
    """A store that checks the connection's key, or an emulator of one that checks none."""
    return store_of(request, request.param)


def store_of(request, name: str) -> Store:
    server = request.getfixturevalue(f"{name}_server_of_session")
    if name == "gcs":
        return Store("gcs", server, GOOGLE_KEY, "", (), "NoSuchBucket")
    if name == "s3":
        return Store(
            "s3",
            server,
            "AWS_SECRET_ACCESS_KEY",
            "WRONG-secret-5d1f0c",
            ("403 Forbidden", "SignatureDoesNotMatch"),
            "NoSuchBucket",
        )
    wrong_key = base64.b64encode(b"wrong-key-" * 6).decode()  # well formed, not the emulator's
    return Store("azure", server, "AZURE_STORAGE_ACCOUNT_KEY", wrong_key, ("403",), "ContainerNotFound")


@pytest.fixture
def lake(request, monkeypatch) -> str:
    """A table and the day's extract on the test's store; the task's process has no keys of its own."""
    store = request.getfixturevalue("any_store" if "any_store" in request.fixturenames else "store")
    lake = request.getfixturevalue(f"{store.name}_lake")
    write_deltalake(f"{lake}/orders", pa.table({"id": [1], "qty": [1]}))
    staging = pafs.PyFileSystem(DeltaStorageHandler(lake))
    pq.write_table(pa.table({"id": [2], "qty": [2]}), "staging/2024-01-02.parquet", filesystem=staging)
    for name in store.server.environment():
        monkeypatch.delenv(name)
    return str(lake)


def merge_with(mocker, monkeypatch, store: Store, lake: str, *, secret: str, endpoint: str | None = None):
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(store.connection(secret=secret, endpoint=endpoint)))
    return run_task(
        mocker,
        {},
        target=f"{lake}/orders",
        source=lake + "/staging/{{ ds }}.parquet",
        condition="t.id = s.id",
        clauses=[update_all(), insert_all()],
        preflight=True,
        rerun="skip",
        storage_conn_id="lake",
        allowed_paths=[lake],
    )


def assert_clean(message: str, store: Store) -> None:
    assert "'lake'" in message
    for leak in store.hidden():
        assert leak not in message


def test_a_wrong_key_fails_naming_the_connection_not_the_key_and_is_not_retried(
    mocker, monkeypatch, store, lake
):
    with pytest.raises(AirflowFailException) as failed:  # Airflow's fail-fast: no retry is spent on it
        merge_with(mocker, monkeypatch, store, lake, secret=store.wrong_secret)
    message = str(failed.value)
    assert message.startswith("[DELTAMERGE_STORAGE_ACCESS_DENIED] The store refused connection 'lake'")
    assert all(part in message for part in store.refusal)
    assert_clean(message, store)
    DeltaMergeHook.run_merge.assert_not_called()  # type: ignore[attr-defined]


def test_a_missing_bucket_or_container_fails_the_same_way(mocker, monkeypatch, any_store, lake):
    store = any_store
    missing = store.missing(lake)
    with pytest.raises(AirflowFailException) as failed:
        merge_with(mocker, monkeypatch, store, missing, secret=store.secret)
    message = str(failed.value)
    assert message.startswith(f"[DELTAMERGE_STORAGE_BUCKET_NOT_FOUND] The bucket or container of {missing}")
    assert store.no_container in message
    assert_clean(message, store)
    DeltaMergeHook.run_merge.assert_not_called()  # type: ignore[attr-defined]


def test_a_store_that_is_down_fails_within_seconds_for_airflow_to_retry(mocker, monkeypatch, any_store, lake):
    store = any_store
    started = time.monotonic()
    with pytest.raises(StorageAccessError) as failed:  # raised as it is: Airflow's retries take it
        merge_with(mocker, monkeypatch, store, lake, secret=store.secret, endpoint=NOWHERE)
    # The store client's own retries, not minutes: a guard on a behaviour, sized for a busy machine.
    assert time.monotonic() - started < 60
    message = str(failed.value)
    assert message.startswith(f"[DELTAMERGE_STORAGE_UNAVAILABLE] The store of {lake}/orders did not answer")
    assert "Connection refused" in message
    assert_clean(message, store)
    DeltaMergeHook.run_merge.assert_not_called()  # type: ignore[attr-defined]


def test_in_the_job_a_wrong_key_fails_at_the_merges_first_request(request, store, tmp_path, monkeypatch):
    # Given: a table on the store, and a job whose environment holds a wrong secret
    spark = request.getfixturevalue(f"spark_on_{store.name}")
    lake = request.getfixturevalue(f"{store.name}_lake")
    target = make_table(f"{lake}/orders")
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 7, "us")])
    before = table_state(target)
    right = os.environ[store.secret_variable]
    monkeypatch.setenv(store.secret_variable, store.wrong_secret)
    # When / Then: the engine's first request to the store fails with the product's error, before any work
    with pytest.raises(StorageAccessError) as failed:
        run_merge(spark, spec)
    message = str(failed.value)
    assert message.startswith("[DELTAMERGE_STORAGE_ACCESS_DENIED] The store refused the credentials in this")
    assert store.wrong_secret not in message and "Kernel error" not in message
    assert is_final(failed.value)
    monkeypatch.setenv(store.secret_variable, right)
    assert table_state(target) == before
