"""Run the example upsert DAG end to end: sample lake, Airflow on SQLite, a real Spark merge, the result.

Everything lives under ``.demo/`` in the repository; ``make demo`` runs this after installing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from deltalake import DeltaTable

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / ".demo"
LAKE = DEMO / "lake"
LOGICAL_DATE = "2024-01-02"
DAG_ID = "deltamerge_upsert"


def airflow_env() -> dict[str, str]:
    """A project-local Airflow: SQLite metadata under .demo/, the example DAGs, a local Spark master."""
    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(DEMO / "airflow"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags_examples"),
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[*]"}),
        DELTAMERGE_LAKE=str(LAKE),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def run(step: str, command: list[str], log_name: str) -> str:
    """Run one step with its output in .demo/<log_name>; on failure show the end of it and stop."""
    print(f"==> {step}", flush=True)
    log = DEMO / log_name
    result = subprocess.run(command, env=airflow_env(), cwd=ROOT, capture_output=True, text=True, check=False)
    log.write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        sys.exit(f"{step} failed (exit {result.returncode}); full log: {log}\n{tail}")
    return result.stdout + result.stderr


def main() -> None:
    DEMO.mkdir(exist_ok=True)
    run(
        "Writing the sample lake",
        [sys.executable, "dags_examples/sample_lake.py", str(LAKE), LOGICAL_DATE],
        "lake.log",
    )
    run("Preparing Airflow's metadata database (SQLite)", ["airflow", "db", "migrate"], "db.log")
    output = run(
        f"Running DAG {DAG_ID} for {LOGICAL_DATE} (spark-submit, local[*]; about a minute)",
        ["airflow", "dags", "test", DAG_ID, LOGICAL_DATE],
        "dags_test.log",
    )
    for line in output.splitlines():
        if "DELTAMERGE DEMO:" in line:
            print(line[line.index("DELTAMERGE DEMO:") :])
    table = DeltaTable(str(LAKE / "orders"))
    last = table.history(1)[0]
    print(f"orders table is now at version {table.version()} with {table.count()} rows")
    print("metrics recorded in that commit:")
    for name, value in sorted(last.get("operationMetrics", {}).items()):
        print(f"  {name:40} {value}")


if __name__ == "__main__":
    main()
