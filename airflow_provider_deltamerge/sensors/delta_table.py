"""``DeltaTableSensor``: wait until a Delta table's log has a commit meeting criteria (no Spark).

Every DAG parse imports this module: the log read (``deltalake``, ``pyarrow``) and the storage connection's
credentials are imported by ``poke`` when the sensor runs, not at the top.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import (
    AirflowException,
    BaseSensorOperator,
    PokeReturnValue,
    conf,
)

from airflow_provider_deltamerge.delta.format.provenance import DEFAULT_HISTORY_DEPTH
from airflow_provider_deltamerge.delta.log.commit_match import CommitCriteria, MetricBounds
from airflow_provider_deltamerge.operators.assets import target_asset
from airflow_provider_deltamerge.triggers.delta_table import DeltaTableTrigger

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaTableSensor(BaseSensorOperator):
    """Wait for a commit of a Delta table that meets every given criterion, read with ``deltalake``.

    Runs in ``mode="poke"`` or ``"reschedule"`` like any sensor, or deferred to the triggerer with
    ``deferrable=True``. A table that does not exist yet counts as "no matching commit yet".

    :param table: Delta table path or URI. (templated)
    :param operation: The commit's operation, e.g. ``MERGE`` (merges of this provider count as MERGE,
        also those delta-rs recorded as WRITE: older ones, and those on stores without a conditional put) or
        ``WRITE``. (templated)
    :param after_version: Only commits with a greater version. (templated)
    :param after_time: Only commits made after this datetime or ISO 8601 string (UTC when naive).
        (templated)
    :param merge_dag_id: Only commits whose provenance record names this DAG. (templated)
    :param merge_task_id: Only commits whose provenance record names this task. (templated)
    :param merge_run_id: Only commits whose provenance record names this DAG run, e.g. ``{{ run_id }}``.
        (templated)
    :param merge_logical_date: Only commits made by a DAG run of this logical date (a datetime or ISO 8601
        string), e.g. ``"{{ logical_date }}"`` in a consumer on the producer's schedule. (templated)
    :param metrics: Bounds the commit's metrics must keep, in ``DeltaMergeCheckOperator``'s form, e.g.
        ``{"numTargetRowsInserted": {"min": 1}}``; ``tableVersion`` is the commit's version.
    :param depth: How many of the newest commits to look at.
    :param storage_conn_id: Connection holding the object store's credentials, as for
        ``DeltaMergeOperator`` (``aws``, ``wasb``, ``google_cloud_platform``, this provider's
        ``deltamerge_storage``, or any type with an ``env`` extra). The deferred trigger receives this id,
        never the credentials, and resolves them in the triggerer.
    :param deferrable: Wait in the triggerer instead of a worker slot.

    Which merge: when this sensor's DAG run was triggered by an asset event of the table (a consumer
    scheduled on the merge task's outlet) and no ``merge_run_id`` is given, only commits of the run that
    emitted the newest such event count; so a consumer checks the merge that triggered it, not an earlier
    one. When several commits match, the newest; with ``after_version``, the oldest after it.

    Returns (as XCom ``return_value``) the matching commit: ``version``, ``timestamp`` (ISO 8601),
    ``operation``, ``metrics`` and ``provenance``.
    """

    template_fields: Sequence[str] = (
        "table",
        "operation",
        "after_version",
        "after_time",
        "merge_dag_id",
        "merge_task_id",
        "merge_run_id",
        "merge_logical_date",
    )
    ui_color = "#00add4"

    def __init__(
        self,
        *,
        table: str,
        operation: str | None = None,
        after_version: int | str | None = None,
        after_time: datetime.datetime | str | None = None,
        merge_dag_id: str | None = None,
        merge_task_id: str | None = None,
        merge_run_id: str | None = None,
        merge_logical_date: datetime.datetime | str | None = None,
        metrics: Mapping[str, Mapping[str, float]] | None = None,
        depth: int = DEFAULT_HISTORY_DEPTH,
        storage_conn_id: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table, self.operation = table, operation
        self.after_version, self.after_time = after_version, after_time
        self.merge_dag_id, self.merge_task_id, self.merge_run_id = merge_dag_id, merge_task_id, merge_run_id
        self.merge_logical_date = merge_logical_date
        self.metrics = dict(metrics or {})
        MetricBounds(self.metrics)  # a wrong metric name fails at DAG parse time
        self.depth, self.storage_conn_id, self.deferrable = depth, storage_conn_id, deferrable

    def criteria(self, context: Context | None = None) -> CommitCriteria:
        """The criteria with templates rendered, pinned to the merge whose asset event triggered the run."""
        dag_id, task_id, run_id = self.merge_dag_id, self.merge_task_id, self.merge_run_id
        trigger = None if run_id or context is None else self._triggering_merge(context)
        if trigger is not None:
            dag_id, task_id, run_id = trigger.source_dag_id, trigger.source_task_id, trigger.source_run_id
        return CommitCriteria.from_values(
            operation=self.operation,
            after_version=self.after_version,
            after_time=self.after_time,
            dag_id=dag_id,
            task_id=task_id,
            run_id=run_id,
            metrics=self.metrics,
            logical_date=self.merge_logical_date,
        )

    def _triggering_merge(self, context: Context) -> Any:
        """The newest asset event of the table among those that triggered this DAG run, from the DAG and task
        the sensor waits for; None when the run was not triggered by one."""
        table = target_asset(self.table).uri
        events = [
            event
            for asset, asset_events in (context.get("triggering_asset_events") or {}).items()
            if getattr(asset, "uri", None) == table
            for event in asset_events
            if self.merge_dag_id in (None, event.source_dag_id)
            and self.merge_task_id in (None, event.source_task_id)
        ]
        return max(events, key=lambda event: event.timestamp, default=None)

    def poke(self, context: Context) -> PokeReturnValue:
        from deltalake.exceptions import DeltaError

        from airflow_provider_deltamerge.delta.log.merge_commits import find_commit
        from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options

        criteria = self.criteria(context)
        options = connection_storage_options(self.storage_conn_id) or None
        try:
            commit = find_commit(self.table, criteria, depth=self.depth, storage_options=options)
        except (DeltaError, OSError) as err:
            # The store's answer (403, no such bucket, ...) names neither key nor secret.
            raise AirflowException(
                f"Cannot read {self.table} with connection {self.storage_conn_id}: {err}. Check the table "
                "path and the connection's credentials."
            ) from err
        if commit is None:
            self.log.info("No commit of %s yet with %s", self.table, criteria.describe())
            return PokeReturnValue(is_done=False)
        self.log.info("Commit %d of %s matches: %s", commit.version, self.table, commit.to_xcom())
        return PokeReturnValue(is_done=True, xcom_value=commit.to_xcom())

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        found = self.poke(context)  # no deferral when the commit is already there
        if found.is_done:
            return found.xcom_value
        self.defer(
            trigger=DeltaTableTrigger(
                table=self.table,
                criteria=self.criteria(context).to_json(),
                poke_interval=self.poke_interval,
                depth=self.depth,
                storage_conn_id=self.storage_conn_id,
            ),
            method_name="execute_complete",
            timeout=datetime.timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "success":
            raise AirflowException(
                f"{event.get('message', event)}. Check the table path and storage_conn_id of this sensor."
            )
        commit: dict[str, Any] = event["commit"]
        self.log.info("Commit %d of %s matches", commit["version"], self.table)
        return commit
