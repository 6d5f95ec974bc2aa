"""The DAG of ``python -m bench backfill``: each day merges its small extract into its own day of one table.

``deltamerge_small_dates`` merges ``<lake>/extracts/<ds>.parquet`` (60 rows: 50 of the day's rows changed,
10 new) into ``<lake>/sales``, a table partitioned by ``day``; the condition names the day, so each merge
reads its own day's file only. Its 31 days (January 2024) are run by backfills alone: the DAG's end
date is past and it does not catch up. The merges run on the connection ``spark_connect``.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all, update_all

LAKE = os.environ["DELTAMERGE_BENCH_LAKE"]

with DAG(
    dag_id="deltamerge_small_dates",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    end_date=datetime(2024, 1, 31),
    catchup=False,
):
    DeltaMergeOperator(
        task_id="merge_day",
        target=f"{LAKE}/sales",
        source=LAKE + "/extracts/{{ ds }}.parquet",
        condition="t.day = s.day AND t.id = s.id",
        clauses=[update_all(), insert_all()],
        spark_conn_id="spark_connect",
    )
