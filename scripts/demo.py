"""Run the example upsert DAG end to end: sample lake, Airflow on SQLite, a real Spark merge, the result.

Everything lives under ``.demo/`` in the repository (``--dir`` for another folder); ``make demo`` runs
this after installing. It ends with what the merge did, headline first, and where everything is.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from airflow_provider_deltamerge.metrics import SUMMARY, readable

ROOT = Path(__file__).resolve().parent.parent
LOGICAL_DATE = "2024-01-02"
DAG_ID = "deltamerge_upsert"
TASK_ID = "merge_orders"


def airflow_env(demo: Path) -> dict[str, str]:
    """A project-local Airflow: SQLite metadata under ``demo``, the example DAGs, a local Spark master."""
    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(demo / "airflow"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags_examples"),
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[*]"}),
        DELTAMERGE_LAKE=str(demo / "lake"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def run(demo: Path, step: str, command: list[str], log_name: str) -> str:
    """Run one step with its output in ``demo/<log_name>``; on failure show the end of it and stop."""
    print(f"==> {step}", flush=True)
    log = demo / log_name
    result = subprocess.run(
        command, env=airflow_env(demo), cwd=ROOT, capture_output=True, text=True, check=False
    )
    log.write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        sys.exit(f"{step} failed (exit {result.returncode}); full log: {log}\n{tail}")
    return result.stdout + result.stderr


def merge_metrics(airflow_home: Path) -> dict[str, Any]:
    """The merge task's XCom value, read from the metadata database."""
    with sqlite3.connect(airflow_home / "airflow.db") as db:
        (value,) = db.execute(
            "SELECT value FROM xcom WHERE dag_id = ? AND task_id = ? AND key = 'return_value' "
            "ORDER BY timestamp DESC LIMIT 1",
            (DAG_ID, TASK_ID),
        ).fetchone()
    return dict(json.loads(value if isinstance(value, str) else value.decode()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=ROOT / ".demo", help="where the demo keeps everything")
    demo = parser.parse_args().dir.absolute()
    lake, home = demo / "lake", demo / "airflow"
    demo.mkdir(exist_ok=True)
    run(
        demo,
        "Writing the sample lake",
        [sys.executable, "dags_examples/sample_lake.py", str(lake), LOGICAL_DATE],
        "lake.log",
    )
    run(demo, "Preparing Airflow's metadata database (SQLite)", ["airflow", "db", "migrate"], "db.log")
    run(
        demo,
        f"Running DAG {DAG_ID} for {LOGICAL_DATE} (spark-submit, local[*]; about a minute)",
        ["airflow", "dags", "test", DAG_ID, LOGICAL_DATE],
        "dags_test.log",
    )
    metrics = readable(merge_metrics(home))
    table = DeltaTable(str(lake / "orders"))
    print(f"\nThe merge: {metrics.pop(SUMMARY)}")
    print(f"orders table is now at version {table.version()} with {table.count()} rows")
    print(f"\nAll metrics (the XCom value of {DAG_ID}.{TASK_ID}), headline first:")
    for name, value in metrics.items():
        print(f"  {name:40} {value}")
    print("\nWhere everything is:")
    print(f"  table         {lake / 'orders'}  (the staged extract: {lake / 'staging'})")
    print(f"  Airflow home  {home}  (AIRFLOW_HOME; metadata database airflow.db)")
    print(f"  logs          {demo / 'dags_test.log'}  (the DAG run and its task logs; db.log, lake.log)")
    print(f"  the DAG       {ROOT / 'dags_examples' / 'upsert.py'}; README: 'Your first DAG' for your own")


if __name__ == "__main__":
    main()
