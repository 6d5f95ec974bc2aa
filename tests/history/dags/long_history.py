"""A merge into a table whose log holds 10,000 commits, for the history page's test: what a page of it costs
is measured over HTTP. The API server only reads this DAG's serialized form; the test never runs it."""

from __future__ import annotations

import os

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all

with DAG("deltamerge_long_history", schedule=None, catchup=False):
    DeltaMergeOperator(
        task_id="merge_events",
        target=os.environ["HISTORY_LONG_TABLE"],
        source=os.environ["HISTORY_LONG_TABLE"] + "_extract",
        condition="t.id = s.id",
        clauses=[insert_all()],
    )
