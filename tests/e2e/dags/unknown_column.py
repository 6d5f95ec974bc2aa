"""A merge naming a column the target lacks: pre-flight must fail it before any Spark job."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import update

LAKE = os.environ["DELTAMERGE_LAKE"]

with DAG(dag_id="deltamerge_unknown_column", schedule=None, start_date=datetime(2024, 1, 1)):
    DeltaMergeOperator(
        task_id="merge",
        target=f"{LAKE}/orders",
        source=LAKE + "/staging/orders/{{ ds }}.parquet",
        condition="t.order_id = s.order_id",
        clauses=[update({"amount": "s.amout"})],
        # A wrong column fails on every try: the task must fail at once, not spend these.
        retries=3,
        retry_delay=timedelta(seconds=1),
    )
