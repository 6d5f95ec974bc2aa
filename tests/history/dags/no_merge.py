"""A DAG without a merge: its page must show no merge history tab."""

from __future__ import annotations

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

with DAG("no_merge", schedule=None, catchup=False):
    EmptyOperator(task_id="nothing")
