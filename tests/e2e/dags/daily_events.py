"""A daily merge into a date-partitioned table, as a backfill runs it for many logical dates at once.

The condition equates the partition column without a literal, so each run touches only its own day (the
engine prunes by the days present in the source) and concurrent runs commit without failing each other.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all, update_all

LAKE = os.environ["DELTAMERGE_LAKE"]

with DAG(dag_id="deltamerge_daily_events", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    DeltaMergeOperator(
        task_id="merge_day",
        target=f"{LAKE}/events",
        source=LAKE + "/staging/events/{{ ds }}.parquet",
        condition="t.day = s.day AND t.event_id = s.event_id",
        clauses=[update_all(), insert_all()],
    )
