"""A merge task and its check, for the history page's test: the API server reads this DAG's serialized form
(its target Asset, storage connection and check bounds), and the test runs it once, a real merge of the
extract beside the table."""

from __future__ import annotations

import os

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.operators.delta_merge_check import DeltaMergeCheckOperator
from airflow_provider_deltamerge.spec import insert_all, update_all

with DAG("deltamerge_history", schedule=None, catchup=False):
    merge = DeltaMergeOperator(
        task_id="merge_orders",
        target=os.environ["HISTORY_TABLE"],
        source=os.environ["HISTORY_TABLE"] + "_extract",
        condition="t.id = s.id",
        clauses=[update_all(), insert_all()],
        storage_conn_id="history_store",
    )
    check = DeltaMergeCheckOperator(
        task_id="check_orders",
        metrics=merge.output,
        bounds={
            "numTargetRowsInserted": {"max": 100},
            "numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.05},
        },
    )
