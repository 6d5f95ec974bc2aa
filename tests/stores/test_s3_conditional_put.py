"""The commit's put-if-absent on the tests' S3 server: of writers racing to create one commit file, exactly
one wins and its bytes are the file's; the same race against a server that ignores ``If-None-Match`` is
seen (several winners), so the race would catch a server that cannot decide it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from airflow_provider_deltamerge.delta.commit.log_store import LogStore, commit_file, log_store
from tests.s3_store import s3_store

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


def test_racing_creates_of_one_commit_file_have_one_winner(s3_lake):
    store = log_store(f"{s3_lake}/orders")
    assert store is not None
    for version in range(ROUNDS):
        won, payloads = race(store, version)
        assert won.count(True) == 1, f"round {version}: {won.count(True)} writers created the same file"
        stored = bytes(store.store.get(commit_file(version)).bytes())
        assert stored == payloads[won.index(True)]


def test_the_race_sees_a_store_that_ignores_the_condition(tmp_path, monkeypatch):
    # A server that overwrites whatever the header says: every writer "wins", so the check above fails there.
    with s3_store(tmp_path / "lake", bucket="lake", key_pair=("AKID", "secret"), conditional=False) as store:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "AKID",
            "AWS_SECRET_ACCESS_KEY": "secret",
            "AWS_ENDPOINT_URL": store.url,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": "us-east-1",
        }.items():
            monkeypatch.setenv(name, value)
        won, _ = race(log_store("s3://lake/orders"), 0)  # type: ignore[arg-type]
    assert won.count(True) > 1
