"""The README's "Your first DAG" as a newcomer follows it: fresh Airflow, no Spark connection, bare PATH."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from bench.first_dag import PHASES, readme_first_dag_blocks, run_phases, task_figures
from tests.e2e.conftest import xcom_value

pytestmark = pytest.mark.slow

# A PATH such as a service manager gives: Java, no virtual environment, so no spark-submit.
BARE_PATH = "/usr/bin:/bin"


def test_readme_first_dag_runs_on_a_fresh_airflow(airflow_env, tmp_path):
    # Given: the README's table and DAG with its lake moved into tmp_path, and a fresh Airflow home with no
    # Spark connection, run by the environment's own airflow with spark-submit off the PATH
    setup, dag, commands = readme_first_dag_blocks()
    lake = tmp_path / "my-lake"
    subprocess.run([sys.executable, "-c", setup.replace("/tmp/my-lake", str(lake))], check=True)
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "my_first_merge.py").write_text(dag.replace("/tmp/my-lake", str(lake)))
    home = tmp_path / "airflow"
    home.mkdir()
    shutil.copy(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db", home / "airflow.db")
    hidden = ("AIRFLOW_CONN_SPARK_DEFAULT", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
    env = {k: v for k, v in airflow_env.items() if k not in hidden}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__DAGS_FOLDER=str(dags), PATH=BARE_PATH)
    assert shutil.which("spark-submit", path=BARE_PATH) is None
    assert "airflow dags test my_first_merge 2024-01-02" in commands

    # When: the README's command runs the DAG for its day
    airflow = str(Path(sys.executable).parent / "airflow")
    started = time.time()
    result = subprocess.run(
        [airflow, "dags", "test", "my_first_merge", "2024-01-02"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    command_seconds = time.time() - started

    # Then: the merge ran on this machine's Spark, with pyspark's spark-submit, as the README says
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    # The documented happy path is information, not a warning.
    assert re.search(r"\[info +\] No Spark connection 'spark_default' is defined", output)
    assert re.search(r"Spark-Submit cmd: \S+/pyspark/bin/spark-submit --master local\[\*\]", output)
    table = DeltaTable(str(lake / "orders"))
    assert table.version() == 1
    rows = {r["order_id"]: r["amount"] for r in table.to_pyarrow_table().to_pylist()}
    assert rows == {1: 10.0, 2: 20.0, 3: 35.0, 4: 40.0}
    metrics = xcom_value({"AIRFLOW_HOME": str(home)}, "my_first_merge", "merge_orders")
    assert (metrics["numTargetRowsInserted"], metrics["numTargetRowsUpdated"]) == (1, 1)
    # The headline the README quotes leads the XCom value and the task's report of the merge.
    headline = "1 inserted, 1 updated, 0 deleted, 2 copied rows; 1 file rewritten, 1 added;"
    assert next(iter(metrics)) == "summary" and metrics["summary"].startswith(headline)
    assert f"Merge into {lake}/orders: {headline}" in output
    # Spark's start-up is at DEBUG, below the task log's level; the job's own lines are at theirs.
    assert "SparkContext: Running Spark version" not in output
    assert "was locally checkpointed" not in output  # the materialized source's warning, expected
    assert re.search(r"\[info +\] Snapshot: \S+/orders at version 0", output)
    # What `python -m bench first-dag` reads of such a run: the task's seconds lie within the command's and
    # hold the merge's own, and its XCom value is the one above.
    task_seconds, bench_metrics = task_figures(home / "airflow.db")
    assert metrics["executionTimeMs"] / 1000 < task_seconds < command_seconds
    assert bench_metrics == metrics
    phases = run_phases(output, started, started + command_seconds)
    assert list(phases) == list(PHASES) and all(seconds >= 0 for seconds in phases.values())
    assert sum(phases.values()) == pytest.approx(command_seconds, abs=0.01)
