"""Extra links on a merge task's page: the Spark application that ran it, and the Delta table it merged into.

Airflow 3 computes a task's links on the worker when the task ends and keeps them as XComs, so each link
reads what the operator learnt while it ran. An empty link is one that does not apply (no Spark UI was
reported, a catalog table name has no location of its own here).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink

from airflow_provider_deltamerge.operators.assets import target_asset
from airflow_provider_deltamerge.spec.sql_parse import is_path_like


class SparkApplicationLink(BaseOperatorLink):
    """The Spark UI of the job that ran the merge, as its driver reported it."""

    name = "Spark application"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        hook = getattr(operator, "_hook", None)
        return (hook.spark_application_url() if hook is not None else None) or ""


class DeltaTableLink(BaseOperatorLink):
    """The Delta table the merge wrote to (its location; the merge history page will take its place)."""

    name = "Delta table"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        spec = getattr(operator, "_spec", None)
        if spec is None or not is_path_like(spec.target):
            return ""
        return target_asset(spec.target).uri
