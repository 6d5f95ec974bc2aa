"""A daily merge into a table named by a param (``{{ params.table }}``): a target known only at run time,
whose asset event goes out through the task's AssetAlias."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all, update_all

LAKE = os.environ["DELTAMERGE_LAKE"]

with DAG(
    "deltamerge_templated_target", schedule=None, start_date=datetime(2024, 1, 1), params={"table": "events"}
):
    DeltaMergeOperator(
        task_id="merge_day",
        target=LAKE + "/{{ params.table }}",
        source=LAKE + "/staging/{{ params.table }}/{{ ds }}.parquet",
        condition="t.day = s.day AND t.event_id = s.event_id",
        clauses=[update_all(), insert_all()],
    )
