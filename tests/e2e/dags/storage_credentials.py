"""A merge whose storage credentials come from an Airflow connection: they must never reach the log."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all, update_all

LAKE = os.environ["DELTAMERGE_LAKE"]

with DAG(dag_id="deltamerge_storage_credentials", schedule=None, start_date=datetime(2024, 1, 1)):
    DeltaMergeOperator(
        task_id="merge",
        target=f"{LAKE}/orders",
        source=LAKE + "/staging/orders/{{ ds }}.parquet",
        condition="t.order_id = s.order_id",
        clauses=[update_all(), insert_all()],
        storage_conn_id="lake_storage",
    )
