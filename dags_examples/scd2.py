"""SCD type 2: keep every version of a customer's address, closing the current row and adding the new one
in a single merge.

Use it when history matters (which address was valid on a date): each row has ``valid_from``, ``valid_to``
and ``is_current``. The day's extract lists customers whose address changed and new customers. The source
query (a ``QuerySource``, templated like the rest) gives every change twice: keyed by ``customer_id``, it
matches the current row and closes it; with a NULL key it never matches, so it is inserted as the new
current version. One merge means one atomic commit: readers never see a customer with no current row or
with two. The first task writes sample data when the lake is a local sample lake.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG
from sample_lake import sample_data_task

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import QuerySource, insert, update

LAKE = os.environ.get("DELTAMERGE_LAKE", "/tmp/deltamerge-lake")
CHANGES = LAKE + "/staging/customer_history/{{ ds }}.parquet"

with DAG(
    dag_id="deltamerge_scd2",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["deltamerge", "example"],
    doc_md=__doc__,
):
    sample_data_task(LAKE, "customer_history") >> DeltaMergeOperator(
        task_id="merge_history",
        target=f"{LAKE}/customer_history",
        source=QuerySource(
            f"SELECT customer_id AS merge_key, * FROM parquet.`{CHANGES}` "
            f"UNION ALL SELECT CAST(NULL AS BIGINT) AS merge_key, * FROM parquet.`{CHANGES}`"
        ),
        condition="t.customer_id = s.merge_key AND t.is_current",
        clauses=[
            update(
                {"is_current": "false", "valid_to": "s.effective_date"},
                condition="t.address <> s.address",
            ),
            insert(
                {
                    "customer_id": "s.customer_id",
                    "address": "s.address",
                    "is_current": "true",
                    "valid_from": "s.effective_date",
                    "valid_to": "NULL",
                },
                condition="s.merge_key IS NULL",
            ),
        ],
    )
