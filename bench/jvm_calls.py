"""JVM round trips the driver makes during an engine run: the driver's own work, counted, not timed.

Building a merge's queries costs the driver one py4j round trip per DataFrame or Column call. Their time
swings with the machine's load; their number does not, so the report gives both the phase times and this
count, and a change to how the engine builds its queries shows in the count whatever the machine did.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from py4j.clientserver import ClientServerConnection


class JvmCalls:
    """The number of commands this process sent to the JVM while ``counting`` was open."""

    def __init__(self) -> None:
        self.count = 0


@contextmanager
def counting() -> Iterator[JvmCalls]:
    """Count every py4j command sent from this thread (PySpark's pinned-thread gateway: one connection a
    thread) until the block ends."""
    calls = JvmCalls()
    thread = threading.get_ident()
    send = ClientServerConnection.send_command

    def counted(connection: ClientServerConnection, command: str) -> Any:
        if threading.get_ident() == thread:
            calls.count += 1
        return send(connection, command)

    ClientServerConnection.send_command = counted  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        ClientServerConnection.send_command = send  # type: ignore[method-assign]
