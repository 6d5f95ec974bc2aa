"""A merge task with a retry: the tests kill its job right after the commit to play a lost worker."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all, update_all

LAKE = os.environ["DELTAMERGE_LAKE"]

with DAG(dag_id="deltamerge_retry_after_commit", schedule=None, start_date=datetime(2024, 1, 1)):
    DeltaMergeOperator(
        task_id="merge",
        target=f"{LAKE}/orders",
        source=LAKE + "/staging/orders/{{ ds }}.parquet",
        condition="t.order_id = s.order_id",
        clauses=[update_all(), insert_all()],
        retries=1,
        retry_delay=timedelta(seconds=1),
    )
