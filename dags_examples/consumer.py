"""A consumer of merges: find the orders table's merge that triggered this run, check its metrics, use them.

Use it when a downstream job must run only after a good merge: the DAG is scheduled on the table's Asset,
which every merge task updates once per commit; the sensor reads the Delta log (no Spark) for the merge
commit of ``deltamerge_upsert`` made by the run whose asset event triggered this one (run by hand, the
newest such commit; it waits while there is none), the check fails the run when that merge deleted or
rewrote more than expected, and the last task reads its metrics from XCom.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, task

from airflow_provider_deltamerge.operators.delta_merge_check import DeltaMergeCheckOperator
from airflow_provider_deltamerge.sensors.delta_table import DeltaTableSensor

LAKE = os.environ.get("DELTAMERGE_LAKE", "/tmp/deltamerge-lake")
ORDERS = f"{LAKE}/orders"

with DAG(
    dag_id="deltamerge_consumer",
    schedule=[Asset(Path(ORDERS).absolute().as_uri())],
    start_date=datetime(2024, 1, 1),
    catchup=False,
    render_template_as_native_obj=True,  # the check receives the metrics as a dict, not as text
    tags=["deltamerge", "example"],
    doc_md=__doc__,
):
    merged = DeltaTableSensor(
        task_id="wait_for_merge",
        table=ORDERS,
        operation="MERGE",
        merge_dag_id="deltamerge_upsert",
        poke_interval=10,
        timeout=15 * 60,
    )
    checked = DeltaMergeCheckOperator(
        task_id="check_merge",
        metrics="{{ ti.xcom_pull(task_ids='wait_for_merge')['metrics'] }}",
        bounds={
            "numTargetRowsDeleted": {"max": 0},
            "numTargetRowsInserted": {"min": 1},
            "numTargetRowsUpdated / numTargetRowsCopied": {"max": 0.5},
        },
    )

    @task
    def publish(metrics: dict[str, Any]) -> None:
        """Downstream work that reads the merge's metrics from XCom."""
        print(f"DELTAMERGE CONSUMER: {metrics['numTargetRowsInserted']} new orders to publish")

    merged >> checked >> publish(checked.output)
