"""A merge commit on S3: one conditional put, against a local endpoint that keeps S3's rules (signatures
checked, ``If-None-Match: *`` refused with 412 on an existing key), read back by deltalake (no Spark: Spark's
S3 client is not on this machine)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.delta.commit.conflicts import ReadSet
from airflow_provider_deltamerge.delta.commit.transaction import Committed, commit_merge
from airflow_provider_deltamerge.delta.format.provenance import COMMIT_INFO_KEY
from airflow_provider_deltamerge.delta.log.merge_commits import SUBMISSION_ID
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from tests.conftest import make_table
from tests.s3_store import s3_store

KEY_PAIR = ("AKIDLAKEWRITER", "lake-writer-secret")
INFO = {SUBMISSION_ID: "s3-run"}


@pytest.fixture
def lake(tmp_path, monkeypatch):
    """s3://lake/orders behind the local endpoint, its credentials in the environment as the job has them."""
    make_table(tmp_path / "lake" / "orders")
    with s3_store(tmp_path / "lake", bucket="lake", key_pair=KEY_PAIR) as store:
        for name, value in {
            "AWS_ACCESS_KEY_ID": KEY_PAIR[0],
            "AWS_SECRET_ACCESS_KEY": KEY_PAIR[1],
            "AWS_ENDPOINT_URL": store.url,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": "us-east-1",
        }.items():
            monkeypatch.setenv(name, value)
        yield store


def test_a_merge_commit_lands_on_s3_as_one_put(lake):
    snapshot = read_snapshot("s3://lake/orders")
    outcome = commit_merge(
        snapshot,
        removed=snapshot.files[:1],
        added=(),
        operation_parameters={"predicate": "[]"},
        operation_metrics={"numTargetRowsDeleted": 5},
        info=INFO,
        read=ReadSet(snapshot.version, frozenset(), lambda s, f: f),
        same_run=lambda info: False,
        engine_info="test",
    )
    assert outcome == Committed(snapshot.version + 1)
    entry = DeltaTable("s3://lake/orders").history(1)[0]
    assert entry["operation"] == "MERGE" and entry[COMMIT_INFO_KEY] == INFO
    assert len(DeltaTable("s3://lake/orders").file_uris()) == len(snapshot.files) - 1
    assert KEY_PAIR[0] in lake.admitted
