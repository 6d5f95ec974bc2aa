"""A merge's metrics (pushed by a stand-in task shaped like DeltaMergeOperator's) checked against bounds."""

from __future__ import annotations

import datetime
from typing import Any

from airflow.sdk import DAG, get_current_context, task

from airflow_provider_deltamerge.engine.metrics import METRIC_DESCRIPTIONS
from airflow_provider_deltamerge.operators.delta_merge_check import DeltaMergeCheckOperator

BOUNDS = {
    "numSourceRows": {"min": 1},
    "numTargetRowsDeleted": {"max": 1000},
    "numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.1},
    "numTargetFilesAfterSkipping": {"max": 50},
}

for dag_id, on_failure in (("deltamerge_check", "fail"), ("deltamerge_check_skip", "skip")):
    with DAG(dag_id, schedule=None, start_date=datetime.datetime(2024, 1, 1), catchup=False):

        @task(task_id="merge_orders")
        def merge_orders() -> dict[str, Any]:
            """The metrics dict a DeltaMergeOperator returns; dag_run.conf overrides some of them."""
            metrics: dict[str, Any] = dict.fromkeys(METRIC_DESCRIPTIONS, 0)
            metrics.update(numSourceRows=200, numTargetRowsInserted=100, numTargetRowsUpdated=100)
            metrics.update(numTargetRowsCopied=9000, numTargetFilesAfterSkipping=3)
            dag_run = get_current_context()["dag_run"]
            metrics.update((dag_run.conf or {}).get("metrics", {}))
            return {**metrics, "tableVersion": 1, "executor": "classic", "specHash": "0" * 16}

        @task
        def publish() -> None:
            print("DELTAMERGE CHECK: published")

        merge = merge_orders()
        check = DeltaMergeCheckOperator(
            task_id="check_merge", merge_task_id="merge_orders", bounds=BOUNDS, on_failure=on_failure
        )
        merge >> check >> publish()
