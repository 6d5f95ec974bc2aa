"""A deferrable DeltaTableSensor: the task defers, its trigger polls the Delta log, the task resumes."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_deltamerge.sensors.delta_table import DeltaTableSensor

with DAG(dag_id="deltamerge_wait_for_commit", schedule=None, start_date=datetime(2024, 1, 1)):
    DeltaTableSensor(
        task_id="wait",
        table=f"{os.environ['DELTAMERGE_LAKE']}/orders",
        operation="WRITE",
        after_version=0,
        deferrable=True,
        poke_interval=1,
        timeout=180,
    )
