"""A ``wasb`` connection's credentials, resolved by the Azure provider's hook, as the merge job gets them:
the account, its key and an emulator's endpoint for ``deltalake``; the key for ABFS in the private properties
file, redacted in Spark's event log and on no command line."""

from __future__ import annotations

import json

import pytest

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options
from tests.conftest import make_table, upsert_from_extract
from tests.job.conftest import local_spark_connection
from tests.secret_leaks import event_log_conf, event_log_text, run_watching_command_lines

__all__ = ["local_spark_connection"]  # a fixture, used by name

ABFS_KEY = "spark.hadoop.fs.azure.account.key.devstoreaccount1.dfs.core.windows.net"


def wasb_connection(monkeypatch, extra=None, **fields) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE_AZ", json.dumps({"conn_type": "wasb", **fields, "extra": extra or {}})
    )
    return "lake_az"


def test_a_connection_string_gives_the_account_key_and_the_emulators_endpoint(monkeypatch):
    connection_string = (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5LW9mLXRoZS1lbXVsYXRvcg==;"
        "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
    )
    conn_id = wasb_connection(monkeypatch, {"connection_string": connection_string})
    assert connection_storage_options(conn_id) == {
        "AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
        "AZURE_STORAGE_ACCOUNT_KEY": "a2V5LW9mLXRoZS1lbXVsYXRvcg==",
        "AZURE_STORAGE_ENDPOINT": "http://127.0.0.1:10000/devstoreaccount1",
        "AZURE_ALLOW_HTTP": "true",
    }


def test_azures_own_account_needs_no_endpoint(monkeypatch):
    conn_id = wasb_connection(monkeypatch, login="acct", password="a2V5LW9mLWFjY3Q=")
    assert connection_storage_options(conn_id) == {
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
        "AZURE_STORAGE_ACCOUNT_KEY": "a2V5LW9mLWFjY3Q=",
    }


@pytest.mark.slow
def test_the_spark_job_gets_the_key_for_abfs_never_on_its_command_line_or_in_the_event_log(
    tmp_path, monkeypatch, local_spark_connection, azure_lake, azure_server_of_session, caplog
):
    # A local merge into a table in the emulator, with a wasb connection: ABFS reads and writes the data
    # with the key, which stays out of every command line, the event log and the task log.
    server = azure_server_of_session
    target = make_table(f"{azure_lake}/orders")
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(2, 5, "eu")])
    for name in server.environment():
        monkeypatch.delenv(name)
    conn_id = wasb_connection(monkeypatch, {"connection_string": server.connection_string()})
    events = tmp_path / "events"
    events.mkdir()
    hook = DeltaMergeHook(local_spark_connection, storage_conn_id=conn_id, conf=event_log_conf(events))
    with caplog.at_level("DEBUG"):
        metrics, command_lines = run_watching_command_lines(lambda: hook.run_merge(spec))

    assert metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert any("deltamerge" in line and "--request-file" in line for line in command_lines)
    event_log = event_log_text(events)
    properties = json.loads(next(line for line in event_log.splitlines() if "EnvironmentUpdate" in line))
    assert dict(properties["Spark Properties"])[ABFS_KEY] == "*********(redacted)"
    hadoop_key = ABFS_KEY.removeprefix("spark.hadoop.")
    assert dict(properties["Hadoop Properties"])[hadoop_key] == "*********(redacted)"
    assert not any(server.key in line for line in command_lines)
    assert server.key not in event_log
    assert server.key not in caplog.text
    assert server.key not in json.dumps(metrics)
