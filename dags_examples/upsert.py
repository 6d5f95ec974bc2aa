"""Upsert (SCD type 1): apply a daily extract of orders to the ``orders`` Delta table.

Use it when each day's extract holds the latest state of some rows: rows whose key exists are
overwritten, new keys are inserted, nothing is deleted. The downstream task reads the merge metrics
from XCom. ``DELTAMERGE_LAKE`` points at the lake folder; the first task writes sample data when the lake
is a local sample lake (``make demo`` prepares one).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param, task
from sample_lake import sample_data_task

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all, update_all

LAKE = os.environ.get("DELTAMERGE_LAKE", "/tmp/deltamerge-lake")

with DAG(
    dag_id="deltamerge_upsert",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["deltamerge", "example"],
    doc_md=__doc__,
    # Whoever triggers a run may choose what a cleared task does with its earlier commit, and only that.
    params={"rerun": Param("auto", enum=["auto", "skip", "merge"], description="A Clear merges again?")},
):
    merge_orders = DeltaMergeOperator(
        task_id="merge_orders",
        allowed_paths=[LAKE],
        rerun="{{ params.rerun }}",
        target=f"{LAKE}/orders",
        source=LAKE + "/staging/orders/{{ ds }}.parquet",
        condition="t.order_id = s.order_id",
        # Clause expressions are templated too: only orders of the run's day are new orders.
        clauses=[update_all(), insert_all(condition="s.order_date = DATE'{{ ds }}'")],
    )

    @task
    def report(metrics: dict[str, Any]) -> None:
        """Print what the merge did, as a downstream check or alert would read it."""
        print(
            f"DELTAMERGE DEMO: table version {metrics['tableVersion']}: "
            f"{metrics['numTargetRowsInserted']} inserted, {metrics['numTargetRowsUpdated']} updated, "
            f"{metrics['numTargetRowsCopied']} copied, {metrics['numTargetFilesAdded']} files added "
            f"in {metrics['executionTimeMs']} ms"
        )

    sample_data_task(LAKE, "orders") >> merge_orders
    report(merge_orders.output)
