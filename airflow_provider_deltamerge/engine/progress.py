"""Progress of a long merge for the task log: the current phase and Spark's counts, every few seconds.

A phase can run for minutes as one Spark job with no line of its own, and a task log that stays silent
that long looks hung. The engine names its phase with ``enter_phase``; the job runs a ``ProgressReporter``,
a daemon thread that logs the phase and what Spark's status store says of the active stages (tasks done,
rows read and written so far; Spark updates running tasks' counts at each executor heartbeat).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JError

from airflow_provider_deltamerge.session_kind import is_connect

log = logging.getLogger(__name__)

# The task log gets a line at least this often while a merge runs.
PROGRESS_INTERVAL_S = 10.0


@dataclass(frozen=True)
class Phase:
    """What the merge is doing, since when."""

    name: str
    started: float
    files: int | None = None  # the files this phase reads or rewrites, where known


# One merge runs per job process; the phase is a plain shared value the reporter thread reads.
_current = Phase("starting Spark", time.monotonic())


def enter_phase(name: str, *, files: int | None = None) -> None:
    """Record that the merge now does ``name`` (over ``files`` files, where known)."""
    global _current
    _current = Phase(name, time.monotonic(), files)


def current_phase() -> Phase:
    return _current


@dataclass(frozen=True)
class StageCounts:
    """Spark's counts over the active stages."""

    tasks_done: int
    tasks: int
    rows_read: int
    rows_written: int


def active_stage_counts(spark: Any) -> StageCounts | None:
    """The active stages' task and row counts from the driver's status store; None when no stage runs."""
    stages = spark.sparkContext._jsc.sc().statusStore().activeStages()
    if stages.size() == 0:
        return None
    found = [stages.apply(i) for i in range(stages.size())]
    return StageCounts(
        tasks_done=sum(s.numCompleteTasks() for s in found),
        tasks=sum(s.numTasks() for s in found),
        rows_read=sum(s.inputRecords() + s.shuffleReadRecords() for s in found),
        rows_written=sum(s.outputRecords() + s.shuffleWriteRecords() for s in found),
    )


def progress_line(phase: Phase, counts: StageCounts | None, now: float) -> str:
    """One progress line, e.g. ``Progress: rewrite of the touched files and the inserts (12 files), 31 s:
    Spark tasks 5 of 8 done, 1200000 rows read, 900000 written so far`` (rows once Spark has counted some)."""
    files = f" ({phase.files} file{'' if phase.files == 1 else 's'})" if phase.files is not None else ""
    line = f"Progress: {phase.name}{files}, {now - phase.started:.0f} s"
    if counts is None:
        return line
    line += f": Spark tasks {counts.tasks_done} of {counts.tasks} done"
    # Spark counts a running task's rows only at its executor's heartbeat: no rows yet is no news.
    if counts.rows_read or counts.rows_written:
        line += f", {counts.rows_read} rows read, {counts.rows_written} written so far"
    return line


class ProgressReporter:
    """Logs a progress line every ``interval_s`` seconds from a daemon thread, until stopped.

    Until ``watch`` gives it the SparkSession (while Spark starts) a line has the phase only. A failure to
    read Spark's counts never stops the merge: the reporter notes it once at DEBUG and goes on with the
    phase alone.
    """

    def __init__(self, *, interval_s: float = PROGRESS_INTERVAL_S) -> None:
        self._interval_s = interval_s
        self._read_counts: Callable[[], StageCounts | None] | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="deltamerge-progress", daemon=True)
        self._counts_failed = False
        self._connect_counts: StageCounts | None = None

    def __enter__(self) -> ProgressReporter:
        self._thread.start()
        return self

    def watch(self, spark: Any) -> None:
        """Add Spark's counts of ``spark``'s active stages to the lines from now on.

        A Connect client has no status store to ask: the server streams each running query's stages with
        its results, and the reporter keeps the latest of them (task counts only; Connect sends no rows).
        """
        if is_connect(spark):
            spark.registerProgressHandler(self._on_connect_progress)
            self._read_counts = lambda: self._connect_counts
        else:
            self._read_counts = lambda: active_stage_counts(spark)

    def _on_connect_progress(self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
        found = [s for s in stages or () if not s.done]
        self._connect_counts = (
            StageCounts(
                tasks_done=sum(s.num_completed_tasks for s in found),
                tasks=sum(s.num_tasks for s in found),
                rows_read=0,
                rows_written=0,
            )
            if found and not done
            else None
        )

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._thread.join(timeout=self._interval_s)

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            log.info(progress_line(current_phase(), self._counts(), time.monotonic()))

    def _counts(self) -> StageCounts | None:
        if self._read_counts is None or self._counts_failed:
            return None
        try:
            return self._read_counts()
        except (Py4JError, AttributeError) as err:  # e.g. the session stopping under the reporter's feet
            self._counts_failed = True
            log.debug("Spark's stage counts cannot be read (%s); progress lines give the phase only", err)
            return None
