"""A merge's metrics (pushed by a stand-in task shaped like DeltaMergeOperator's) checked three ways.

One run covers every outcome: lenient bounds pass, strict bounds fail the task, the same strict bounds in
skip mode skip downstream.
"""

from __future__ import annotations

import datetime
from typing import Any

from airflow.sdk import DAG, task

from airflow_provider_deltamerge.metrics import METRIC_DESCRIPTIONS
from airflow_provider_deltamerge.operators.delta_merge_check import DeltaMergeCheckOperator

LENIENT = {"numSourceRows": {"min": 1}, "numTargetRowsDeleted / numTargetRowsCopied": {"max": 1}}
STRICT = {
    "numSourceRows": {"min": 500},
    "numTargetRowsDeleted": {"max": 1000},
    "numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.1},
    "numTargetFilesAfterSkipping": {"max": 50},
}

with DAG("deltamerge_check", schedule=None, start_date=datetime.datetime(2024, 1, 1), catchup=False):

    @task
    def merge_orders() -> dict[str, Any]:
        """The metrics dict a DeltaMergeOperator returns (a full sync that deleted many rows)."""
        metrics: dict[str, Any] = dict.fromkeys(METRIC_DESCRIPTIONS, 0)
        metrics.update(numSourceRows=200, numTargetRowsInserted=100, numTargetRowsUpdated=100)
        metrics.update(numTargetRowsDeleted=5000, numTargetRowsCopied=10000, numTargetFilesAfterSkipping=3)
        return {**metrics, "tableVersion": 1, "executor": "classic", "specHash": "0" * 16}

    @task
    def publish(name: str) -> None:
        print(f"DELTAMERGE CHECK: published after {name}")

    merge = merge_orders()
    checks = [
        DeltaMergeCheckOperator(task_id="check_lenient", metrics=merge, bounds=LENIENT),
        DeltaMergeCheckOperator(task_id="check_strict", merge_task_id="merge_orders", bounds=STRICT),
        DeltaMergeCheckOperator(
            task_id="check_strict_skip", merge_task_id="merge_orders", bounds=STRICT, on_failure="skip"
        ),
    ]
    for check in checks:
        merge >> check >> publish.override(task_id=f"publish_after_{check.task_id}")(check.task_id)
