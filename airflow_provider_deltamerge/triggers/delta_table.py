"""``DeltaTableTrigger``: the deferrable half of ``DeltaTableSensor``, polling the log in the triggerer.

The sensor's module imports this one, so every parse of the sensor's DAG does: the log read (``deltalake``,
``pyarrow``) and the storage connection's credentials are imported when it polls, in the triggerer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.providers.common.compat.sdk import AirflowNotFoundException
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_deltamerge.delta.format.provenance import DEFAULT_HISTORY_DEPTH
from airflow_provider_deltamerge.delta.log.commit_match import Commit, CommitCriteria
from airflow_provider_deltamerge.exceptions import DeltaMergeError


class DeltaTableTrigger(BaseTrigger):
    """Fire once a commit of ``table`` meets ``criteria`` (``CommitCriteria.to_json()`` form).

    Events: ``{"status": "success", "commit": <Commit.to_xcom()>}``, or ``{"status": "error",
    "message": ...}`` when the log cannot be read.

    Its serialized form, stored in Airflow's database, names the storage connection (``storage_conn_id``),
    never a credential: the triggerer resolves the connection before each poll, so temporary credentials
    (an assumed role's) are renewed while it waits.
    """

    def __init__(
        self,
        *,
        table: str,
        criteria: dict[str, Any],
        poke_interval: float = 60.0,
        depth: int = DEFAULT_HISTORY_DEPTH,
        storage_conn_id: str | None = None,
    ) -> None:
        super().__init__()
        self.table, self.criteria, self.poke_interval = table, criteria, poke_interval
        self.depth, self.storage_conn_id = depth, storage_conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table": self.table,
                "criteria": self.criteria,
                "poke_interval": self.poke_interval,
                "depth": self.depth,
                "storage_conn_id": self.storage_conn_id,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from deltalake.exceptions import DeltaError

        criteria = CommitCriteria.from_values(**self.criteria)
        while True:
            try:
                # deltalake reads block: keep them off the triggerer's event loop.
                commit = await asyncio.to_thread(self._find, criteria)
            except (DeltaMergeError, DeltaError, OSError, AirflowNotFoundException) as err:
                yield TriggerEvent({"status": "error", "message": f"Cannot read {self.table}: {err}"})
                return
            if commit is not None:
                yield TriggerEvent({"status": "success", "commit": commit.to_xcom()})
                return
            self.log.info("No commit of %s yet with %s", self.table, criteria.describe())
            await asyncio.sleep(self.poke_interval)

    def _find(self, criteria: CommitCriteria) -> Commit | None:
        from airflow_provider_deltamerge.delta.log.merge_commits import find_commit
        from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options

        options = connection_storage_options(self.storage_conn_id) or None
        return find_commit(self.table, criteria, depth=self.depth, storage_options=options)
