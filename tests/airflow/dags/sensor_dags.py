"""Wait for a merge commit of a given DAG with inserted rows, in poke mode; the table comes from conf."""

from __future__ import annotations

import datetime

from airflow.sdk import DAG

from airflow_provider_deltamerge.sensors.delta_table import DeltaTableSensor

with DAG("deltamerge_sensor", schedule=None, start_date=datetime.datetime(2024, 1, 1), catchup=False):
    DeltaTableSensor(
        task_id="wait_for_merge",
        table="{{ dag_run.conf['table'] }}",
        operation="MERGE",
        merge_dag_id="deltamerge_upsert",
        metrics={"numTargetRowsInserted": {"min": 1}},
        mode="poke",
        poke_interval=1,
        timeout=60,
    )
