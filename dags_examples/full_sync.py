"""Full sync: make the ``products`` table equal to the day's full export of the upstream catalogue.

Use it when the upstream system exports everything it has each day and the table must mirror it:
changed rows are updated, new ones inserted, and rows absent from the export are deleted (WHEN NOT
MATCHED BY SOURCE DELETE). The update only fires for rows that really changed, so the metrics say how
much changed. Every target file is read, as for any NOT MATCHED BY SOURCE clause: keep such tables
modest, or bound the delete with a condition. The first task writes sample data when the lake is a local
sample lake.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG
from sample_lake import sample_data_task

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import delete_by_source, insert_all, update_all

LAKE = os.environ.get("DELTAMERGE_LAKE", "/tmp/deltamerge-lake")

with DAG(
    dag_id="deltamerge_full_sync",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["deltamerge", "example"],
    doc_md=__doc__,
):
    sample_data_task(LAKE, "products") >> DeltaMergeOperator(
        task_id="sync_products",
        allowed_paths=[LAKE],
        target=f"{LAKE}/products",
        source=LAKE + "/staging/products/{{ ds }}.parquet",
        condition="t.product_id = s.product_id",
        clauses=[
            update_all(condition="t.name <> s.name OR t.price <> s.price"),
            insert_all(),
            delete_by_source(),
        ],
    )
