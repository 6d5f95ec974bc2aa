"""The ``MERGE INTO`` form: the merge lives in ``sql/merge_orders.sql``, rendered as a Jinja template.

Use it when the team already writes Spark/Databricks MERGE statements, or wants the merge reviewed as
SQL. The statement is parsed into the same spec as the Python clauses, so it gets the same checks at
DAG-parse time, the same pre-flight against the table's schema, and the same metrics. The first task
writes sample data when the lake is a local sample lake.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG
from sample_lake import sample_data_task

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator

LAKE = os.environ.get("DELTAMERGE_LAKE", "/tmp/deltamerge-lake")

with DAG(
    dag_id="deltamerge_sql",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    params={"lake": LAKE},
    tags=["deltamerge", "example"],
    doc_md=__doc__,
):
    sample_data_task(LAKE, "orders") >> DeltaMergeOperator(
        task_id="merge_orders_sql",
        merge_sql="sql/merge_orders.sql",
        # params.lake can be overridden from the UI: every path the statement names must stay in the lake.
        allowed_paths=[LAKE],
    )
