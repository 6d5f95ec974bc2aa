"""Which tables the history page may show: the targets of this provider's merge tasks, as Airflow knows them.

A UI user may be trusted less than a DAG author, so the page never opens a location named in its URL: the URL
names an Asset by id, and that Asset must be the declared outlet of a ``DeltaMergeOperator`` task in a
serialized DAG, or have an event from one (a target known only at run time reaches its Asset through an
alias). The storage connection and the check bounds come from those same serialized tasks, written by DAG
authors.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.models.asset import AssetEvent, AssetModel, TaskOutletAssetReference
from airflow.models.serialized_dag import SerializedDagModel
from sqlalchemy import select

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

MERGE_TASK_TYPE = "DeltaMergeOperator"
CHECK_TASK_TYPE = "DeltaMergeCheckOperator"
_OUR_MODULES = "airflow_provider_deltamerge."
# How many of a table's newest events are searched for the merge tasks that emitted them.
_EVENTS_SEARCHED = 200


@dataclass(frozen=True)
class MergeTask:
    """A merge task as its serialized DAG has it, with the bounds of the check tasks right after it."""

    dag_id: str
    task_id: str
    storage_conn_id: str | None
    # Check task id -> its declared bounds (metric or "a / b" -> {"min": x, "max": y}).
    bounds: Mapping[str, Mapping[str, Mapping[str, float]]]


@dataclass(frozen=True)
class KnownTable:
    """A Delta table this provider's merge tasks write: its Asset, and the tasks that merge into it."""

    asset_id: int
    uri: str
    tasks: Sequence[MergeTask]

    @property
    def storage_conn_id(self) -> str | None:
        """The connection the merge tasks read and write the table with (the first task's that has one)."""
        return next((t.storage_conn_id for t in self.tasks if t.storage_conn_id), None)


def known_table(session: Session, asset_id: int) -> KnownTable | None:
    """The table of Asset ``asset_id``, if it is a merge task's target; else None."""
    asset = session.get(AssetModel, asset_id)
    if asset is None:
        return None
    declared = select(TaskOutletAssetReference.dag_id, TaskOutletAssetReference.task_id).where(
        TaskOutletAssetReference.asset_id == asset_id
    )
    emitted = (
        select(AssetEvent.source_dag_id, AssetEvent.source_task_id)
        .where(AssetEvent.asset_id == asset_id, AssetEvent.source_dag_id.is_not(None))
        .order_by(AssetEvent.id.desc())
        .limit(_EVENTS_SEARCHED)
    )
    pairs = dict.fromkeys([*session.execute(declared).tuples(), *session.execute(emitted).tuples()])
    tasks = [task for dag_id, task_id in pairs if (task := merge_task(session, dag_id, task_id)) is not None]
    return KnownTable(asset.id, asset.uri, tasks) if tasks else None


def tables_of_dags(session: Session, dag_ids: Collection[str]) -> list[KnownTable]:
    """The tables the merge tasks of the DAGs ``dag_ids`` write, once each, by Asset URI."""
    declared = select(TaskOutletAssetReference.dag_id).where(TaskOutletAssetReference.dag_id.in_(dag_ids))
    emitted = select(AssetEvent.source_dag_id).where(AssetEvent.source_dag_id.in_(dag_ids))
    writers = sorted({*session.scalars(declared.distinct()), *session.scalars(emitted.distinct())})
    tables = {table.asset_id: table for dag_id in writers for table in dag_tables(session, dag_id)}
    return sorted(tables.values(), key=lambda table: table.uri)


def dag_is_known(session: Session, dag_id: str) -> bool:
    """Whether Airflow has a serialized DAG ``dag_id``."""
    return SerializedDagModel.get_dag(dag_id, session=session) is not None


def dag_tables(session: Session, dag_id: str) -> list[KnownTable]:
    """The tables the merge tasks of DAG ``dag_id`` write, by Asset URI."""
    dag = SerializedDagModel.get_dag(dag_id, session=session)
    task_ids = [t.task_id for t in (dag.tasks if dag else ()) if _is_ours(t, MERGE_TASK_TYPE)]
    asset_ids = set()
    for task_id in task_ids:
        asset_ids |= _task_asset_ids(session, dag_id, task_id)
    tables = [table for asset_id in asset_ids if (table := known_table(session, asset_id)) is not None]
    return sorted(tables, key=lambda table: table.uri)


def task_tables(session: Session, dag_id: str, task_id: str) -> list[KnownTable]:
    """The tables merge task ``task_id`` of ``dag_id`` writes (none if it is no merge task)."""
    if merge_task(session, dag_id, task_id) is None:
        return []
    tables = [known_table(session, asset_id) for asset_id in _task_asset_ids(session, dag_id, task_id)]
    return sorted((t for t in tables if t is not None), key=lambda table: table.uri)


def merge_task(session: Session, dag_id: str, task_id: str) -> MergeTask | None:
    """Task ``task_id`` of ``dag_id`` as serialized, if it is a ``DeltaMergeOperator``."""
    dag = SerializedDagModel.get_dag(dag_id, session=session)
    task = dag.task_dict.get(task_id) if dag else None
    if dag is None or task is None or not _is_ours(task, MERGE_TASK_TYPE):
        return None
    checks = (dag.task_dict[i] for i in sorted(task.downstream_task_ids))
    bounds = {c.task_id: getattr(c, "declared_bounds", None) for c in checks if _is_ours(c, CHECK_TASK_TYPE)}
    return MergeTask(dag_id, task_id, getattr(task, "storage_conn_id", None), _only_declared(bounds))


def _task_asset_ids(session: Session, dag_id: str, task_id: str) -> set[int]:
    declared = select(TaskOutletAssetReference.asset_id).where(
        TaskOutletAssetReference.dag_id == dag_id, TaskOutletAssetReference.task_id == task_id
    )
    emitted = (
        select(AssetEvent.asset_id)
        .where(AssetEvent.source_dag_id == dag_id, AssetEvent.source_task_id == task_id)
        .distinct()
    )
    return {*session.scalars(declared), *session.scalars(emitted)}


def _is_ours(task: Any, task_type: str) -> bool:
    return bool(
        task.task_type == task_type and str(getattr(task, "_task_module", "")).startswith(_OUR_MODULES)
    )


def _only_declared(bounds: Mapping[str, Any]) -> dict[str, Mapping[str, Mapping[str, float]]]:
    # A DAG serialized before check tasks carried their bounds has none to draw.
    return {
        task_id: json.loads(declared) for task_id, declared in bounds.items() if isinstance(declared, str)
    }
