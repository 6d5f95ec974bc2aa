"""A real Spark standalone cluster (master and worker started here) receiving a merge in client mode."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from tests.conftest import make_table, upsert_from_extract
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
    """spark://127.0.0.1:<port> with one worker of one core, both on loopback, stopped after the module."""
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
        "worker": [
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
            str(logs / "work"),
        ],
    }
    processes = []
    try:
        for name, ready in (("master", "I have been elected leader"), ("worker", "Successfully registered")):
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


def test_merge_runs_on_a_standalone_cluster_in_client_mode(tmp_path, monkeypatch, standalone_master):
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER",
        json.dumps({"conn_type": "spark", "host": standalone_master, "extra": {"deploy-mode": "client"}}),
    )
    target = make_table(tmp_path / "orders", partition_by=["region"])
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(2, 5, "eu"), (77, 6, "us")])
    hook = DeltaMergeHook(
        "spark_cluster", conf={"spark.executor.memory": "512m", "spark.pyspark.python": sys.executable}
    )

    metrics = hook.run_merge(spec)

    assert (metrics[m.NUM_TARGET_ROWS_UPDATED], metrics[m.NUM_TARGET_ROWS_INSERTED]) == (1, 1)
    rows = sorted_rows(target)
    assert {"id": 2, "qty": 5, "region": "eu"} in rows and {"id": 77, "qty": 6, "region": "us"} in rows
    assert len(rows) == 11


def test_a_canary_secret_reaches_no_command_line_event_log_metrics_or_commit(
    tmp_path, monkeypatch, standalone_master
):
    # A storage key from a connection whose variable name Spark's default redaction misses, and a secret
    # in the source's reader options (inside the spec): neither may show in any process's command line,
    # Spark's event log (what its UI shows), the metrics or the commit. The big option once made the spec
    # argument too long for one command line.
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
    target = make_table(tmp_path / "orders")
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(2, 5, "eu")])
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

    assert metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert any("deltamerge" in line and "--request-file" in line for line in command_lines)
    event_log = event_log_text(events)
    assert "AZURE_STORAGE_ACCOUNT_KEY" in event_log  # the entry is there, its value redacted
    commits = "".join(p.read_text() for p in (Path(target) / "_delta_log").glob("*.json"))
    for secret in (storage_key, option_secret):
        assert not any(secret in line for line in command_lines)
        assert secret not in event_log
        assert secret not in json.dumps(metrics)
        assert secret not in commits
