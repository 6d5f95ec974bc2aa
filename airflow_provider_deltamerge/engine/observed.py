"""Metrics counted during a Spark action with ``DataFrame.observe``, read without risking a hang.

``Observation.get`` blocks until the observed node has run; when the optimizer removed that node (e.g. a
join with no target rows) it would block forever. Spark completes an observation as its action finishes,
so after the action we look once (with a short grace) and report ``None`` when nothing was observed
(Spark then completes the observation empty, or not at all).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Observation

from airflow_provider_deltamerge.session_kind import is_connect

GRACE_SECONDS = 2.0


def observe(df: DataFrame, *aggregates: Column) -> tuple[DataFrame, Observation]:
    """``df`` with ``aggregates`` counted as rows flow through it, and the handle to read them."""
    name = f"deltamerge_{uuid.uuid4().hex}"
    if is_connect(df.sparkSession):
        return _observed_on_connect(df, name, aggregates)
    observation = Observation(name)
    return df.observe(observation, *aggregates), observation


def _observed_on_connect(df: Any, name: str, aggregates: Sequence[Column]) -> tuple[DataFrame, Any]:
    """What Connect's ``DataFrame.observe`` makes, without the round trip it spends first asking the server
    whether ``df`` streams (a merge's frames never do): 30 ms a call, three calls in a small upsert
    (docs/performance.md)."""
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame
    from pyspark.sql.connect.observation import Observation as ConnectObservation
    from pyspark.sql.connect.plan import CollectMetrics

    observation = ConnectObservation(name)
    observation._result = {}  # as Observation._on marks it used: a second observe of it fails
    observed = ConnectFrame(CollectMetrics(df._plan, observation, list(aggregates)), df._session)
    observed._cached_schema = df._cached_schema
    return observed, observation


def observed(observation: Observation) -> dict[str, Any] | None:
    """The observed values after the action ran, or None when the observed node never ran."""
    if not hasattr(observation, "_jo"):
        # A Connect observation is filled from the action's own response, before the action returns; a node
        # that never ran leaves it empty.
        return observation.get or None
    handle: Any = observation._jo  # PySpark keeps the JVM Observation here
    future = handle.future()
    deadline = time.monotonic() + GRACE_SECONDS
    while not future.isCompleted():
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)
    # A query that finished without running the observed node completes it with no values.
    return observation.get if not handle.getAsJava().isEmpty() else None


def observed_by_command(df: DataFrame, observation: Observation) -> dict[str, Any] | None:
    """The values ``observation`` took while a command ran over ``df`` (``localCheckpoint``), or None.

    Connect fills an observation from an action's response only: a command's response carries the values
    too, but pyspark's client keeps them in the DataFrame's ``executionInfo`` alone. A classic session fills
    the observation itself (``observed``).
    """
    if hasattr(observation, "_jo"):
        return None
    info = df.executionInfo
    if info is None:
        return None
    name = observation._name
    return next((dict(values) for flow, values in info.flows if flow == name), None)


def observed_count(observation: Observation, name: str, *, fallback: DataFrame) -> int:
    """An observed count; when Spark pruned the observed branch (e.g. no target rows), count directly."""
    values = observed(observation)
    return int(values[name]) if values is not None else fallback.count()
