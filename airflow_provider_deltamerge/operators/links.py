"""Extra links on a merge task's page: the Spark application that ran it, and its table's merge history.

Airflow 3 computes a task's links on the worker when the task ends and keeps them as XComs, so each link
reads what the operator learnt while it ran. An empty link is one that does not apply (no Spark UI was
reported, a catalog table name has no log that the history page could read).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink

from airflow_provider_deltamerge.history.urls import task_history_path
from airflow_provider_deltamerge.spec.sql_parse import is_path_like


class SparkApplicationLink(BaseOperatorLink):
    """Where the Spark application that ran the merge can still be seen: YARN's tracking URL (the
    ResourceManager's page, then its history server's) or the Kubernetes driver pod's console page.

    Never the driver's own Spark UI that the job reports: Airflow makes the link when the task ends, and that
    UI ended with its driver, spark-submit's own process in client mode (``local[*]`` among them).
    """

    name = "Spark application"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        hook = getattr(operator, "_hook", None)
        if hook is None:
            return ""
        url = hook.spark_application_url()
        return "" if url is None or url == hook.driver_ui_url else url


class MergeHistoryLink(BaseOperatorLink):
    """The merge history page of the task's table (commits, rows changed, durations), on this Airflow."""

    name = "Merge history"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.configuration import conf

        spec = getattr(operator, "_spec", None)
        if spec is None or not is_path_like(spec.target):
            return ""
        # The API server's own address when it is configured (e.g. behind a proxy path), else this host's.
        base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
        return base + task_history_path(ti_key.dag_id, ti_key.task_id)
