"""SCD type 2: keep every version of a customer's address, closing the current row and adding the new one
in a single merge (Delta Lake's documented SCD type 2 recipe).

Use it when history matters (which address was valid on a date): each row has ``valid_from``, ``valid_to``
and ``is_current``. The day's extract lists customers as they are now: moved, new and unchanged ones. The
source query (a ``QuerySource``, templated like the rest) stages the updates: every extract row keyed by
``customer_id``, which matches the customer's rows (closing the current one if the address changed) or, for
a new customer, matches nothing and is inserted; and, for each customer whose current row in the target
has another address (a join with ``delta.`<target>```, read through the provider's Delta reader), a
NULL-keyed copy that never matches, so it is inserted as the new current version. An unchanged customer
gets neither a closed row nor a second current one. One merge means one atomic commit: readers never see a
customer with no current row or with two. The first task writes sample data when the lake is a local
sample lake.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG
from sample_lake import sample_data_task

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import QuerySource, insert, update

LAKE = os.environ.get("DELTAMERGE_LAKE", "/tmp/deltamerge-lake")
TARGET = LAKE + "/customer_history"
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
        allowed_paths=[LAKE],
        target=TARGET,
        source=QuerySource(
            f"SELECT u.customer_id AS merge_key, u.* FROM parquet.`{CHANGES}` u "
            f"UNION ALL "
            f"SELECT NULL AS merge_key, u.* FROM parquet.`{CHANGES}` u "
            f"JOIN delta.`{TARGET}` c ON u.customer_id = c.customer_id "
            f"WHERE c.is_current AND u.address <> c.address"
        ),
        condition="t.customer_id = s.merge_key",
        clauses=[
            update(
                {"is_current": "false", "valid_to": "s.effective_date"},
                condition="t.is_current AND t.address <> s.address",
            ),
            insert(
                {
                    "customer_id": "s.customer_id",
                    "address": "s.address",
                    "is_current": "true",
                    "valid_from": "s.effective_date",
                    "valid_to": "NULL",
                }
            ),
        ],
    )
