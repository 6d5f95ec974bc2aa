"""The history's reader on a table behind an S3 endpoint, with the storage connection a merge task names:
the same client and credentials as the operator's, resolved where the page is served."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.history.log_pages import DeltaLog
from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options
from tests.airflow.test_storage_connections import KEY_PAIR, aws_connection, store

__all__ = ["store"]  # the fixture: s3://lake/orders, version 1 a merge of run r1


def test_a_page_of_a_remote_table_is_read_with_the_connections_key(monkeypatch, store):
    options = connection_storage_options(aws_connection(monkeypatch, store))
    page = DeltaLog("s3://lake/orders", options).page(1)
    assert [(e.version, e.ours) for e in page.entries] == [(1, True), (0, False)]
    assert page.entries[0].provenance["runId"] == "r1"
    assert set(store.admitted) == {KEY_PAIR[0]}  # every request signed with the connection's key


def test_a_remote_table_refuses_a_wrong_key(monkeypatch, store):
    options = connection_storage_options(aws_connection(monkeypatch, store, password="wrong"))
    with pytest.raises(OSError):
        DeltaLog("s3://lake/orders", options).page(1)
