"""A real Spark standalone cluster (a master and two workers started here) receiving merges in client mode."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark
import pytest
from airflow.providers.common.compat.sdk import AirflowFailException
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.exceptions import StorageConnectorError
from airflow_provider_deltamerge.hooks.delta_merge import STANDALONE_CLUSTER_MODE_REFUSAL, DeltaMergeHook
from airflow_provider_deltamerge.hooks.store_setup import local_connector_jars
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all
from airflow_provider_deltamerge.storage_connectors import S3_CONNECTOR
from tests.conftest import ORDERS, make_table, table_state, upsert_from_extract
from tests.oracle import sorted_rows
from tests.secret_leaks import event_log_conf, event_log_text, run_watching_command_lines

pytestmark = pytest.mark.slow
START_TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise RuntimeError(f"{log.name} exited early:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)
    raise TimeoutError(f"'{text}' not in {log} after {START_TIMEOUT_S} s")


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """spark://127.0.0.1:<port> with two workers of one core each, all on loopback, stopped after the
    module."""
    logs = tmp_path_factory.mktemp("spark_cluster")
    spark_class = str(Path(sys.executable).parent / "spark-class")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    commands = {
        "master": [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(free_port()),
        ],
        # Two workers, each with a work folder of its own: a job's executors share nothing on local disk.
        **{
            f"worker-{n}": [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                master_url,
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(logs / f"work-{n}"),
            ]
            for n in (1, 2)
        },
    }
    processes = []
    try:
        for name in commands:
            ready = "I have been elected leader" if name == "master" else "Successfully registered"
            log = logs / f"{name}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(commands[name], env=env, stdout=out, stderr=subprocess.STDOUT)
            processes.append(process)
            wait_for(log, ready, process)
        yield master_url
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(timeout=30)
        # Each executor copied the jobs' jars (the S3 connector's 700 MB) into its worker's work folder.
        for n in (1, 2):
            shutil.rmtree(logs / f"work-{n}", ignore_errors=True)


def test_a_merge_in_client_mode_keeps_a_canary_secret_off_every_command_line_event_log_metric_and_commit(
    tmp_path, monkeypatch, standalone_master
):
    # An upsert into a partitioned table, submitted to the cluster in client mode, merges. A storage key
    # from a connection whose variable name Spark's default redaction misses, and a secret in the source's
    # reader options (inside the spec): neither may show in any process's command line, Spark's event log
    # (what its UI shows), the metrics or the commit. The big option once made the spec argument too long
    # for one command line.
    storage_key, option_secret = "CANARY-storage-5f1e2d", "CANARY-option-9a8b7c"
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER",
        json.dumps({"conn_type": "spark", "host": standalone_master, "extra": {"deploy-mode": "client"}}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE",
        json.dumps({"conn_type": "wasb", "login": "account", "password": storage_key}),
    )
    events = tmp_path / "events"
    events.mkdir()
    target = make_table(tmp_path / "orders", partition_by=["region"])
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(2, 5, "eu"), (77, 6, "us")])
    # Random, so no compression could make it fit one argument (Linux takes at most 128 KiB per argument).
    options = (("secret_token", option_secret), ("padding", secrets.token_hex(100_000)))
    spec = dataclasses.replace(spec, source=dataclasses.replace(spec.source, options=options))
    hook = DeltaMergeHook(
        "spark_cluster",
        storage_conn_id="lake",
        conf={
            "spark.executor.memory": "512m",
            "spark.pyspark.python": sys.executable,
            **event_log_conf(events),
        },
    )
    metrics, command_lines = run_watching_command_lines(lambda: hook.run_merge(spec))

    assert (metrics[m.NUM_TARGET_ROWS_UPDATED], metrics[m.NUM_TARGET_ROWS_INSERTED]) == (1, 1)
    rows = sorted_rows(target)
    assert {"id": 2, "qty": 5, "region": "eu"} in rows and {"id": 77, "qty": 6, "region": "us"} in rows
    assert len(rows) == 11
    assert any("deltamerge" in line and "--request-file" in line for line in command_lines)
    event_log = event_log_text(events)
    assert "AZURE_STORAGE_ACCOUNT_KEY" in event_log  # the entry is there, its value redacted
    commits = "".join(p.read_text() for p in (Path(target) / "_delta_log").glob("*.json"))
    for secret in (storage_key, option_secret):
        assert not any(secret in line for line in command_lines)
        assert secret not in event_log
        assert secret not in json.dumps(metrics)
        assert secret not in commits


def s3_merge_on_cluster(monkeypatch, standalone_master, server, lake: str, **hook_kwargs):
    """An upsert into ``lake``/orders on the S3 server, submitted in client mode to the cluster with the
    keys from an ``aws`` connection: (the hook, its spec, the table's version before)."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER",
        json.dumps({"conn_type": "spark", "host": standalone_master, "extra": {"deploy-mode": "client"}}),
    )
    key_id, secret = server.key_pair
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE_S3",
        json.dumps(
            {
                "conn_type": "aws",
                "login": key_id,
                "password": secret,
                "extra": {"endpoint_url": server.url, "region_name": "us-east-1"},
            }
        ),
    )
    write_deltalake(f"{lake}/orders", ORDERS)
    extract = pa.table(
        {"id": pa.array([2, 77], pa.int64()), "qty": pa.array([5, 6], pa.int32()), "region": ["eu", "us"]}
    )
    pq.write_table(extract, f"{lake}/staging/day.parquet")
    spec = MergeSpec(
        target=f"{lake}/orders",
        source=PathSource(f"{lake}/staging/day.parquet"),
        condition="t.id = s.id",
        clauses=(update_all(), insert_all()),
    )
    conf = {
        "spark.executor.memory": "512m",
        "spark.pyspark.python": sys.executable,
        **hook_kwargs.pop("conf", {}),
    }
    hook = DeltaMergeHook("spark_cluster", storage_conn_id="lake_s3", conf=conf, **hook_kwargs)
    return hook, spec, DeltaTable(f"{lake}/orders").version()


def test_a_cluster_without_an_s3_connector_fails_before_reading_naming_it(
    monkeypatch, standalone_master, s3_server_of_session, s3_lake
):
    # Given: a cluster whose Spark has no S3 connector (the task adds none on a cluster)
    hook, spec, version = s3_merge_on_cluster(monkeypatch, standalone_master, s3_server_of_session, s3_lake)
    # When / Then: the job fails at its start with the product's error, the jar to add and Spark's Hadoop
    with pytest.raises(StorageConnectorError, match=r"DELTAMERGE_STORAGE_CONNECTOR_MISSING") as failed:
        hook.run_merge(spec)
    assert "s3://" in str(failed.value) and "org.apache.hadoop:hadoop-aws:3.5.0" in str(failed.value)
    assert DeltaTable(spec.target).version() == version


def test_a_cluster_with_the_connector_merges_into_s3_with_the_keys_on_no_command_line_or_event_log(
    tmp_path, monkeypatch, standalone_master, s3_server_of_session, s3_lake
):
    # Given: the cluster's jobs get hadoop-aws as a cluster's users give it (jars), and an event log
    jars = local_connector_jars(S3_CONNECTOR, announce=print)
    events = tmp_path / "events"
    events.mkdir()
    hook, spec, version = s3_merge_on_cluster(
        monkeypatch,
        standalone_master,
        s3_server_of_session,
        s3_lake,
        # Both workers share this machine's disk: each executor copies the jars once, not twice.
        conf={**event_log_conf(events), "spark.files.useFetchCache": "false"},
        spark_submit_kwargs={"jars": ",".join(jars)},
    )
    # When: the merge runs, its executors in the two workers' processes
    metrics, command_lines = run_watching_command_lines(lambda: hook.run_merge(spec))
    # Then: the executors read and wrote the store with the connection's keys, which no process's command
    # line and no line of Spark's event log (its UI) shows
    assert (metrics[m.NUM_TARGET_ROWS_UPDATED], metrics[m.NUM_TARGET_ROWS_INSERTED]) == (1, 1)
    assert DeltaTable(spec.target).version() == version + 1
    assert {"id": 77, "qty": 6, "region": "us"} in sorted_rows(spec.target)
    secret = s3_server_of_session.key_pair[1]
    event_log = event_log_text(events)
    assert "AWS_SECRET_ACCESS_KEY" in event_log  # the executors' variable is there, its value redacted
    executors = {
        json.loads(line)["Executor ID"]
        for line in event_log.splitlines()
        if '"SparkListenerExecutorAdded"' in line
    }
    assert len(executors) == 2  # one on each worker
    assert not any(secret in line for line in command_lines)
    assert secret not in event_log


def test_cluster_deploy_mode_on_a_standalone_master_is_refused_in_sparks_words_before_submitting(
    tmp_path, monkeypatch, mocker, standalone_master
):
    # Spark's own spark-submit refuses a Python application in cluster mode on a standalone master ...
    spark_home = Path(pyspark.__file__).parent
    script = tmp_path / "job.py"
    script.write_text("print('never runs')\n")
    refused = subprocess.run(
        [
            str(spark_home / "bin" / "spark-submit"),
            "--master",
            standalone_master,
            "--deploy-mode",
            "cluster",
            str(script),
        ],
        env={**os.environ, "SPARK_HOME": str(spark_home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0
    assert f"org.apache.spark.SparkException: {STANDALONE_CLUSTER_MODE_REFUSAL}" in refused.stderr
    # ... so the task says so, with the fix, before starting it, and spends no retry on it.
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER",
        json.dumps({"conn_type": "spark", "host": standalone_master, "extra": {"deploy-mode": "cluster"}}),
    )
    popen = mocker.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen")
    target = make_table(tmp_path / "orders")
    before = table_state(target)
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(2, 5, "eu")])

    with pytest.raises(AirflowFailException) as failure:
        DeltaMergeHook("spark_cluster").run_merge(spec)

    assert str(failure.value).startswith(f"SparkException: {STANDALONE_CLUSTER_MODE_REFUSAL}")
    assert "'spark_cluster'" in str(failure.value) and "submit in client mode" in str(failure.value)
    popen.assert_not_called()
    assert table_state(target) == before
