"""The calls a merge makes to a Spark Connect server, by where in the package they come from, with their time.

On Connect every query the engine runs is a round trip (``ExecutePlan``: the server plans and runs it) and
every schema it reads is another (``AnalyzePlan``). Their seconds, summed per call site, say which of a
small merge's queries cost what, the figure a change to the engine's queries should move.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.connect.client.core import SparkConnectClient

PACKAGE = "airflow_provider_deltamerge/"
# The client's methods that send a plan: a query run (its rows fetched) and an analysis (a schema, say).
KINDS = {"_execute_and_fetch": "query", "_analyze": "analysis"}


@dataclass
class ConnectCalls:
    """Per (kind, call site): how many calls, and their seconds."""

    calls: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, kind: str, site: str, seconds: float) -> None:
        self.calls.setdefault((kind, site), []).append(seconds)


@contextmanager
def timing_connect_calls() -> Iterator[ConnectCalls]:
    """Time every query and analysis this process sends to a Connect server until the block ends, each under
    the package's innermost frame that made it (module:function)."""
    recorded = ConnectCalls()
    originals = {name: getattr(SparkConnectClient, name) for name in KINDS}

    def timed(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(client: SparkConnectClient, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(client, *args, **kwargs)
            finally:
                recorded.add(KINDS[name], _call_site(), time.perf_counter() - start)

        return call

    for name, original in originals.items():
        setattr(SparkConnectClient, name, timed(name, original))
    try:
        yield recorded
    finally:
        for name, original in originals.items():
            setattr(SparkConnectClient, name, original)


def _call_site() -> str:
    frames = [f for f in traceback.extract_stack() if PACKAGE in f.filename]
    if not frames:
        return "(outside the package)"
    frame = frames[-1]
    return f"{frame.filename.split(PACKAGE, 1)[1]}:{frame.name}"
