"""Sensor DAGs: a merge commit of a given DAG with inserted rows in poke mode (the table from conf), and a
deferred wait on an S3 table read through a storage connection."""

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

with DAG("deltamerge_sensor_s3", schedule=None, start_date=datetime.datetime(2024, 1, 1), catchup=False):
    # The DAG names a connection, never a credential; the deferred wait resolves it in the triggerer.
    DeltaTableSensor(
        task_id="wait_for_merge",
        table="s3://lake/orders",
        operation="MERGE",
        merge_run_id="r2",
        storage_conn_id="lake_s3",
        deferrable=True,
        poke_interval=1,
        timeout=60,
    )
