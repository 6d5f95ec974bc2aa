"""A daily merge into the date-partitioned ``events`` table, meant for backfills of many logical dates.

Use it when each run loads one day's extract into a table partitioned by day, and you backfill with
``airflow backfill create`` or catch-up runs started side by side. The condition equates the partition
column without a literal (``t.day = s.day``), so each run reads only its own day (the engine prunes by
the days present in the source) and concurrent runs of different days commit without failing each other.
The first task writes sample data when the lake is a local sample lake.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG
from sample_lake import sample_data_task

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all, update_all

LAKE = os.environ.get("DELTAMERGE_LAKE", "/tmp/deltamerge-lake")

with DAG(
    dag_id="deltamerge_daily_events",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["deltamerge", "example"],
    doc_md=__doc__,
):
    sample_data_task(LAKE, "events") >> DeltaMergeOperator(
        task_id="merge_day",
        allowed_paths=[LAKE],
        target=f"{LAKE}/events",
        source=LAKE + "/staging/events/{{ ds }}.parquet",
        condition="t.day = s.day AND t.event_id = s.event_id",
        clauses=[update_all(), insert_all()],
    )
