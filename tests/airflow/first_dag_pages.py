"""A page's "Your first DAG on ..." section run as a user pastes it: its exports, its Python set-up, its DAG
in a fresh Airflow home's DAGs folder, its commands, from the repository (where .venv/ is)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from deltalake import DeltaTable

from tests.e2e.conftest import ROOT, xcom_value


def run_as_printed(
    blocks: list[str],
    ours: Callable[[str], str],
    *,
    dag_id: str,
    airflow_env: Mapping[str, str],
    tmp_path: Path,
    hidden_prefix: str,
) -> tuple[str, Path]:
    """Run the section's ``blocks`` (exports, set-up, DAG, commands), each through ``ours`` (this machine's
    servers and keys in place of the placeholders), with no Spark connection and none of the environment's
    variables starting ``hidden_prefix``; the output, and the Airflow home. The run must succeed."""
    exports, setup, dag, commands = blocks
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / f"{dag_id}.py").write_text(ours(dag))
    home = tmp_path / "airflow"
    home.mkdir()
    shutil.copy(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db", home / "airflow.db")
    hidden = ("AIRFLOW_CONN_SPARK_DEFAULT", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
    env = {k: v for k, v in airflow_env.items() if k not in hidden and not k.startswith(hidden_prefix)}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__DAGS_FOLDER=str(dags))
    assert f"airflow dags test {dag_id} 2024-01-02" in commands
    script = "\n".join(
        [
            "set -euo pipefail",
            ours(exports),
            f"{sys.executable} - <<'SETUP'\n{ours(setup)}SETUP",
            ours(commands),
        ]
    )
    # On bash's input, not its command line, where any process could read the page's keys.
    result = subprocess.run(
        ["bash"], input=script, cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    return output, home


def assert_first_merge(
    uri: str, storage_options: Mapping[str, str], *, home: Path, dag_id: str, output: str
) -> None:
    """The first DAG's merge landed in the table at ``uri``: version 1, its rows, its metrics in XCom, the
    headline in the output."""
    table = DeltaTable(uri, storage_options=dict(storage_options))
    assert table.version() == 1
    rows = {r["order_id"]: r["amount"] for r in table.to_pyarrow_table().to_pylist()}
    assert rows == {1: 10.0, 2: 20.0, 3: 35.0, 4: 40.0}
    metrics = xcom_value({"AIRFLOW_HOME": str(home)}, dag_id, "merge_orders")
    assert (metrics["numTargetRowsInserted"], metrics["numTargetRowsUpdated"]) == (1, 1)
    assert f"Merge into {uri}: 1 inserted, 1 updated" in output
