"""Where a secret handed to a Spark job could leak: any process's command line while the job runs (``ps``
shows it to every user of the machine) and Spark's event log (what its UI shows)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def event_log_conf(folder: Path) -> dict[str, str]:
    """Spark conf writing the event log into ``folder``, uncompressed so a test can search it."""
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": folder.as_uri(),
        "spark.eventLog.compress": "false",
    }


def event_log_text(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def run_watching_command_lines(run: Callable[[], T]) -> tuple[T, set[str]]:
    """``run()``'s result and every command line seen on the machine while it ran."""
    command_lines: set[str] = set()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(run)
        while not running.done():
            command_lines |= set(_command_lines())
            time.sleep(0.1)
        return running.result(), command_lines


def command_lines_now() -> set[str]:
    """Every command line on the machine at this moment."""
    return set(_command_lines())


def _command_lines() -> Iterator[str]:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            yield cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended while we looked
            continue
