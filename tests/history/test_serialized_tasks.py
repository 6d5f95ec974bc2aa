"""What the API server knows of merge and check tasks: the fields the history page reads survive Airflow's
DAG serialization (the API server never imports DAG files)."""

from __future__ import annotations

import json

from airflow.sdk import DAG
from airflow.serialization.serialized_objects import DagSerialization

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.operators.delta_merge_check import DeltaMergeCheckOperator
from airflow_provider_deltamerge.spec import insert_all

BOUNDS = {"numTargetRowsDeleted": {"max": 10}, "numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.01}}


def test_the_storage_connection_and_check_bounds_survive_serialization(tmp_path):
    with DAG("serialized_merge", schedule=None) as dag:
        merge = DeltaMergeOperator(
            task_id="merge",
            target=str(tmp_path / "orders"),
            source=str(tmp_path / "extract"),
            condition="t.id = s.id",
            clauses=[insert_all()],
            storage_conn_id="lake",
        )
        DeltaMergeCheckOperator(task_id="check", metrics=merge.output, bounds=BOUNDS)
    served = DagSerialization.from_dict(json.loads(json.dumps(DagSerialization.to_dict(dag))))
    assert served.task_dict["merge"].storage_conn_id == "lake"
    assert json.loads(served.task_dict["check"].declared_bounds) == BOUNDS
    assert served.task_dict["merge"].downstream_task_ids == {"check"}
