"""The merge's Airflow Assets: the target as outlet, the source as inlet, and what the asset event carries.

A target known when the DAG is parsed is declared as an outlet Asset, so the scheduler knows which DAGs it
feeds. One known only at run time (a templated path, a ``.sql`` file) cannot be: the task declares an
``AssetAlias`` instead and attaches the event for the rendered table to it, which Airflow turns into an
event of that table's Asset (creating it on first use), so consumers scheduled on the table or on the alias
are triggered all the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset

from airflow_provider_deltamerge.spec import MergeSource, PathSource, TableSource
from airflow_provider_deltamerge.spec.sql_parse import is_path_like

if TYPE_CHECKING:
    from airflow_provider_deltamerge.delta.log.commit_partitions import Partition

_TEMPLATE_MARKERS = ("{{", "{%")
# Keys the asset event's extra adds to the merge's metrics (tableVersion is among the metrics).
PARTITIONS = "partitions"
PARTITIONS_TRUNCATED = "partitionsTruncated"
# Airflow keeps each event's extra in its database and hands it to every triggered run: a merge touching
# more partitions than this (an hourly table's backfill) lists the first ones and says so.
MAX_EVENT_PARTITIONS = 1000


def is_templated(text: str) -> bool:
    return any(marker in text for marker in _TEMPLATE_MARKERS)


def target_asset(target: str) -> Asset:
    """The Airflow Asset of a Delta table: its URI, a local path's ``file://`` URI, or a catalog name."""
    if "://" in target or not is_path_like(target):
        return Asset(target)
    return Asset(Path(target).absolute().as_uri())


def source_asset(source: str | MergeSource | None) -> Asset | None:
    """The inlet of a source known at parse time: a path's or a catalog table's Asset (a query has none)."""
    match source:
        case str(where) | PathSource(path=where) | TableSource(name=where) if not is_templated(where):
            return target_asset(where)
    return None


def default_alias_name(dag_id: str, task_id: str) -> str:
    """The AssetAlias of a merge task whose target is known only at run time, unless it is given one."""
    return f"deltamerge/{dag_id}/{task_id}"


def event_extra(metrics: Mapping[str, Any], partitions: list[Partition] | None) -> dict[str, Any]:
    """The asset event's extra: the merge's metrics (``tableVersion`` among them) and, when the table's log
    could be read, the partitions its commit touched (column -> value; none for an unpartitioned table).

    Partitions travel in the extra, not as Airflow 3.3's partition keys: Airflow queues no run of a DAG
    without a partitioned timetable for an event that has a partition key, so keys would stop every
    ordinary consumer scheduled on the table.
    """
    extra = dict(metrics)
    if partitions is not None:
        extra[PARTITIONS] = partitions[:MAX_EVENT_PARTITIONS]
        if len(partitions) > MAX_EVENT_PARTITIONS:
            extra[PARTITIONS_TRUNCATED] = True
    return extra
