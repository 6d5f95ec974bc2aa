"""Where a secret handed to a Spark job could leak: any process's command line while the job runs (``ps``
shows it to every user of the machine) and Spark's event log (what its UI shows)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

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


@dataclass(frozen=True)
class WatchedMerge:
    """A merge job's result, every command line seen while it ran, and its event log."""

    metrics: dict[str, Any]
    command_lines: set[str]
    event_log: str

    def properties(self, section: str) -> dict[str, str]:
        """A section ("Spark Properties", "Hadoop Properties") of the event log's environment."""
        update = next(line for line in self.event_log.splitlines() if "EnvironmentUpdate" in line)
        return dict(json.loads(update)[section])

    def leaked(self, secret: str) -> list[str]:
        """Where ``secret`` shows: a command line, the event log, the result."""
        places = {
            "a command line": any(secret in line for line in self.command_lines),
            "the event log": secret in self.event_log,
            "the result": secret in json.dumps(self.metrics),
        }
        return [place for place, shown in places.items() if shown]


def watched_merge(hook: Any, spec: Any, events: Path) -> WatchedMerge:
    """``hook.run_merge(spec)`` (a hook writing its event log into ``events``), watched: the command lines of
    the processes it starts (another test's, on the other worker, may hold the same secret); the watch is
    checked to have seen the job's own command line."""
    metrics, command_lines = run_watching_descendants(lambda: hook.run_merge(spec))
    assert any("deltamerge" in line and "--request-file" in line for line in command_lines)
    return WatchedMerge(metrics, command_lines, event_log_text(events))


def run_watching_command_lines(run: Callable[[], T]) -> tuple[T, set[str]]:
    """``run()``'s result and every command line seen on the machine while it ran."""
    return _run_watching(run, lambda processes: set(processes.values()))


def run_watching_descendants(run: Callable[[], T]) -> tuple[T, set[str]]:
    """``run()``'s result and the command lines of this process's descendants seen while it ran: what
    ``run()`` started, not what other test workers on the machine run at the same time."""
    return _run_watching(run, lambda processes: set(_descendants(processes, os.getpid()).values()))


def command_lines_now() -> set[str]:
    """Every command line on the machine at this moment."""
    return set(_processes().values())


def _run_watching(run: Callable[[], T], kept: Callable[[dict[Process, str]], set[str]]) -> tuple[T, set[str]]:
    command_lines: set[str] = set()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(run)
        while not running.done():
            command_lines |= kept(_processes())
            time.sleep(0.1)
        return running.result(), command_lines


class Process(NamedTuple):
    pid: int
    parent: int


def _descendants(processes: dict[Process, str], root: int) -> dict[Process, str]:
    parents = {process.pid: process.parent for process in processes}

    def descends(pid: int) -> bool:
        seen = set()
        while pid in parents and pid not in seen:
            seen.add(pid)
            pid = parents[pid]
            if pid == root:
                return True
        return False

    return {process: line for process, line in processes.items() if descends(process.pid)}


def _processes() -> dict[Process, str]:
    """Every process on the machine now, with its command line."""
    processes = {}
    for folder in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (folder / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            # stat's fourth field is the parent's pid; the second, the name in parentheses, may hold spaces.
            parent = int((folder / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # the process ended while we looked
            continue
        processes[Process(int(folder.name), parent)] = cmdline
    return processes
