"""CDC apply: replay a day's change feed (inserts, updates, deletes) onto the ``customers`` table.

Use it when the source is a change log (Debezium, DMS, a database's CDC export) with an ``op`` column
(I, U, D) and a sequence number, where one key can change several times in a batch. The merge keeps only
the latest change per key (``deduplicate_source_by`` + ``deduplicate_order_by``: without it several source
rows would match one target row and the merge would fail), deletes the keys whose latest change is a
delete, and upserts the rest. The first task writes sample data when the lake is a local sample lake.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG
from sample_lake import sample_data_task

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import delete, insert_all, update_all

LAKE = os.environ.get("DELTAMERGE_LAKE", "/tmp/deltamerge-lake")

with DAG(
    dag_id="deltamerge_cdc_apply",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["deltamerge", "example"],
    doc_md=__doc__,
):
    sample_data_task(LAKE, "customers") >> DeltaMergeOperator(
        task_id="apply_changes",
        allowed_paths=[LAKE],
        target=f"{LAKE}/customers",
        source=LAKE + "/staging/customers/{{ ds }}.parquet",
        condition="t.customer_id = s.customer_id",
        deduplicate_source_by=["customer_id"],
        deduplicate_order_by=["lsn"],
        clauses=[
            delete(condition="s.op = 'D'"),
            # UPDATE * and INSERT * assign the target's columns only, so the feed's ``op`` is not stored.
            update_all(),
            insert_all(condition="s.op <> 'D'"),  # a key created and deleted within the batch never lands
        ],
    )
