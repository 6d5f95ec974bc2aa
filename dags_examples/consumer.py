"""A consumer of merges: take the metrics of the orders merge that triggered this run from its asset event,
check them, use them.

Use it when a downstream job must run only after a good merge: the DAG is scheduled on the table's Asset,
which every merge task updates once per commit, and each asset event's ``extra`` holds the merge's metrics,
its ``tableVersion`` and the ``partitions`` it touched. So the run reads them from
``triggering_asset_events``, without polling the table; run by hand (no event), it reads the newest merge
commit from the Delta log once. The check fails the run when that merge deleted or rewrote more than
expected, and the last task uses its metrics.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, task
from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_deltamerge.delta.log.commit_match import CommitCriteria
from airflow_provider_deltamerge.operators.delta_merge_check import DeltaMergeCheckOperator

LAKE = os.environ.get("DELTAMERGE_LAKE", "/tmp/deltamerge-lake")
ORDERS = f"{LAKE}/orders"
ORDERS_ASSET = Asset(Path(ORDERS).absolute().as_uri())

with DAG(
    dag_id="deltamerge_consumer",
    schedule=[ORDERS_ASSET],
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["deltamerge", "example"],
    doc_md=__doc__,
):

    @task
    def merge_metrics(triggering_asset_events: Any = None) -> dict[str, Any]:
        """The metrics of the newest merge event that triggered this run; run by hand, the newest merge's."""
        events = [
            event
            for asset, asset_events in (triggering_asset_events or {}).items()
            if asset.uri == ORDERS_ASSET.uri
            for event in asset_events
        ]
        if events:
            return dict(max(events, key=lambda event: event.timestamp).extra)
        # Imported in the task, as Airflow advises for heavy imports: reading the log loads deltalake and
        # pyarrow, which no parse of this DAG needs.
        from airflow_provider_deltamerge.delta.log.merge_commits import find_commit

        commit = find_commit(ORDERS, CommitCriteria.from_values(operation="MERGE"))
        if commit is None:
            raise AirflowSkipException(f"No merge commit in {ORDERS} yet: nothing to check or publish.")
        return {**commit.metrics, "tableVersion": commit.version}

    checked = DeltaMergeCheckOperator(
        task_id="check_merge",
        metrics=merge_metrics(),
        bounds={
            "numTargetRowsDeleted": {"max": 0},
            "numTargetRowsInserted": {"min": 1},
            "numTargetRowsUpdated / numTargetRowsCopied": {"max": 0.5},
        },
    )

    @task
    def publish(metrics: dict[str, Any]) -> None:
        """Downstream work that reads the merge's metrics from XCom."""
        print(
            f"DELTAMERGE CONSUMER: {metrics['numTargetRowsInserted']} new orders to publish "
            f"(table version {metrics['tableVersion']})"
        )

    publish(checked.output)
