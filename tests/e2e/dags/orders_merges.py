"""Upserts of the demo's orders that the e2e tests drive into failure modes.

``deltamerge_retry_after_commit``: a task with a retry; the tests kill its job right after the commit to
play a lost worker. ``deltamerge_retry_after_conflict``: the same with no delay before the retry; the tests
have another writer commit before every run of try 1's merge. ``deltamerge_reprocess``: the same on a daily
schedule for backfills, January 2024 only, so that a scheduler creates no run of its own.
``deltamerge_storage_credentials``: credentials from a connection, which must never reach the log.
``deltamerge_connect``: the merge run against a Spark Connect server (connection ``spark_connect``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all, update_all

LAKE = os.environ["DELTAMERGE_LAKE"]


def orders_upsert_dag(
    dag_id: str, *, dag_kwargs: Mapping[str, Any] | None = None, **operator_kwargs: Any
) -> DAG:
    schedule = {"schedule": None, "start_date": datetime(2024, 1, 1), **(dag_kwargs or {})}
    with DAG(dag_id=dag_id, **schedule) as dag:
        DeltaMergeOperator(
            task_id="merge",
            target=f"{LAKE}/orders",
            source=LAKE + "/staging/orders/{{ ds }}.parquet",
            condition="t.order_id = s.order_id",
            clauses=[update_all(), insert_all()],
            **operator_kwargs,
        )
    return dag


retry_after_commit = orders_upsert_dag(
    "deltamerge_retry_after_commit", retries=1, retry_delay=timedelta(seconds=1)
)
retry_after_conflict = orders_upsert_dag(
    "deltamerge_retry_after_conflict", retries=1, retry_delay=timedelta(0)
)
reprocess = orders_upsert_dag(
    "deltamerge_reprocess",
    dag_kwargs={"schedule": "@daily", "end_date": datetime(2024, 1, 31), "catchup": False},
    retries=1,
    retry_delay=timedelta(seconds=1),
)
storage_credentials = orders_upsert_dag("deltamerge_storage_credentials", storage_conn_id="lake_storage")
connect = orders_upsert_dag("deltamerge_connect", spark_conn_id="spark_connect")
