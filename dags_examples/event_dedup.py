"""Insert-only event dedup: append a batch of click events, skipping events the table already has.

Use it for append-only facts delivered at least once (a queue, a replayed export): only a WHEN NOT MATCHED
INSERT clause, so events already in the table are skipped and no existing file is rewritten (the
insert-only executor appends new files only). ``deduplicate_source_by`` also drops duplicates within the
batch, which MERGE alone would insert twice. The first task writes sample data when the lake is a local
sample lake.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG
from sample_lake import sample_data_task

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all

LAKE = os.environ.get("DELTAMERGE_LAKE", "/tmp/deltamerge-lake")

with DAG(
    dag_id="deltamerge_event_dedup",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["deltamerge", "example"],
    doc_md=__doc__,
):
    sample_data_task(LAKE, "clicks") >> DeltaMergeOperator(
        task_id="append_new_clicks",
        allowed_paths=[LAKE],
        target=f"{LAKE}/clicks",
        source=LAKE + "/staging/clicks/{{ ds }}.parquet",
        condition="t.event_id = s.event_id",
        deduplicate_source_by=["event_id"],
        deduplicate_order_by=["delivery"],
        clauses=[insert_all()],
    )
