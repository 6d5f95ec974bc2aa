"""The commit's put-if-absent on the tests' S3 server, Azure emulator and GCS emulator: of writers racing to
create one commit file, exactly one wins and its bytes are the file's; the same race against a server that
ignores ``If-None-Match`` is seen (several winners), so the race would catch a server that cannot decide
it."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import obstore
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge.delta.commit.log_store import (
    LogStore,
    check_conditional_puts,
    commit_file,
    log_store,
    object_store,
)
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, update
from airflow_provider_deltamerge.spec.json_form import spec_to_json
from tests.conftest import ORDERS
from tests.delta import workers
from tests.oracle import sorted_rows
from tests.s3_store import s3_store

CTX = multiprocessing.get_context("spawn")

ROUNDS = 25
WRITERS = 8


def race(store: LogStore, version: int) -> tuple[list[bool], list[bytes]]:
    """``WRITERS`` threads put ``version``'s commit file at once (a barrier lines them up); who won, and what
    each wrote."""
    payloads = [f'{{"commitInfo": {{"writer": {i}, "version": {version}}}}}'.encode() for i in range(WRITERS)]
    start = threading.Barrier(WRITERS)

    def put(data: bytes) -> bool:
        start.wait()
        return store.put_if_absent(commit_file(version), data)

    with ThreadPoolExecutor(WRITERS) as pool:
        return list(pool.map(put, payloads)), payloads


STORES = pytest.mark.parametrize("lake_root", ["s3", "azure", "gcs"], indirect=True)


@STORES
def test_racing_creates_of_one_commit_file_have_one_winner(lake_root):
    store = log_store(f"{lake_root}/orders")
    assert store is not None
    for version in range(ROUNDS):
        won, payloads = race(store, version)
        assert won.count(True) == 1, f"round {version}: {won.count(True)} writers created the same file"
        stored = bytes(store.store.get(commit_file(version)).bytes())
        assert stored == payloads[won.index(True)]


@contextmanager
def store_ignoring_the_condition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Bucket ``lake`` on a server that overwrites whatever ``If-None-Match`` says, this process (and the
    processes it starts) reaching it with its keys."""
    with s3_store(tmp_path / "lake", bucket="lake", key_pair=("AKID", "secret"), conditional=False) as store:
        environment = {
            "AWS_ACCESS_KEY_ID": "AKID",
            "AWS_SECRET_ACCESS_KEY": "secret",
            "AWS_REGION": "us-east-1",
        }
        for name, value in {**environment, "AWS_ENDPOINT_URL": store.url, "AWS_ALLOW_HTTP": "true"}.items():
            monkeypatch.setenv(name, value)
        yield


def test_the_race_sees_a_store_that_ignores_the_condition(tmp_path, monkeypatch):
    # A server that overwrites whatever the header says: every writer "wins", so the check above fails there.
    with store_ignoring_the_condition(tmp_path, monkeypatch):
        won, _ = race(log_store("s3://lake/orders"), 0)  # type: ignore[arg-type]
    assert won.count(True) > 1


@STORES
def test_the_store_check_passes_on_a_store_that_refuses_and_leaves_no_key(lake_root):
    write_deltalake(f"{lake_root}/orders", ORDERS)
    before = log_keys(f"{lake_root}/orders")
    check_conditional_puts(f"{lake_root}/orders")
    assert log_keys(f"{lake_root}/orders") == before


def test_racing_merges_on_a_store_that_ignores_the_condition_both_fail_before_any_work(tmp_path, monkeypatch):
    # Given: a table on a store that overwrites whatever If-None-Match says, and two merges of it in two
    # processes (each with its own Spark, as two tasks' jobs)
    with store_ignoring_the_condition(tmp_path, monkeypatch):
        write_deltalake("s3://lake/orders", ORDERS)
        before = sorted_rows("s3://lake/orders")
        extract = tmp_path / "extract.parquet"
        pq.write_table(ORDERS.slice(0, 3), extract)
        spec = MergeSpec(
            target="s3://lake/orders",
            source=PathSource(str(extract)),
            condition="t.id = s.id",
            clauses=(update({"qty": "t.qty + 1"}),),
        )
        results = CTX.Queue()
        processes = [
            CTX.Process(target=workers.merge_job, args=(spec_to_json(spec), {"taskId": name}, results))
            for name in ("a", "b")
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(600)
        # Then: both fail with the reason, and the table is as it was (no commit lost: none was made)
        outcomes = dict(results.get(timeout=60) for _ in processes)
        assert all(
            o.get("error", "").startswith(
                "[DELTAMERGE_STORE_IGNORES_CONDITIONAL_PUT] The store of s3://lake/orders"
            )
            for o in outcomes.values()
        ), outcomes
        assert DeltaTable("s3://lake/orders").version() == 0
        assert sorted_rows("s3://lake/orders") == before
        assert log_keys("s3://lake/orders") == ["00000000000000000000.json"]


def log_keys(table: str) -> list[str]:
    store = object_store(f"{table}/_delta_log")
    return sorted(entry["path"] for batch in obstore.list(store) for entry in batch)
