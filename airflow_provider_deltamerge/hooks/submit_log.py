"""spark-submit's output in the task log at the level each line was written at, not all at INFO.

SparkSubmitHook logs every line of spark-submit at INFO: Spark's start-up alone is some 60 lines before
the merge says anything, and a Spark warning looks like the rest. ``SubmitOutputLog`` stands in for the
hook's logger and gives each line its own level: the job's lines (``deltamerge LEVEL message``) theirs;
Spark's log4j lines (``yy/MM/dd HH:mm:ss LEVEL Logger: message``) WARNING or ERROR for WARN and ERROR
and DEBUG below; Spark's start-up (everything before the job says ``Spark started``, warnings included:
they are about the machine, such as a loopback host name) DEBUG unless an error; and a line that is no
record (a stack frame, a traceback) the level of the record it continues. spark-submit's own report of a
failed job's exit (with ``spark.submit.callSystemExitOnMainExit``, a ``SparkUserAppException`` and its JVM
stack) is DEBUG: the job's error line has said what failed. The hook's own messages are untouched.

It also notes where the application can be seen: the driver's Spark UI from the job's start line (client
mode), YARN's tracking URL from the YARN client's application report, and the driver pod's name and
namespace from the Kubernetes submission's pod report (both print their details one per line as
``\t key: value``, ``N/A`` when unknown).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from airflow_provider_deltamerge.job_contract import SPARK_STARTED, SPARK_UI

UI_ADDRESS = re.compile(rf"{SPARK_UI} (https?://\S+)")
# Lines of YARN's Client.formatReportDetails and Kubernetes' KubernetesUtils.formatPodState.
TRACKING_URL = re.compile(r"^\s*tracking URL: (https?://\S+)\s*$")
DRIVER_POD = re.compile(r"^\s*pod name: (\S+)\s*$")
POD_NAMESPACE = re.compile(r"^\s*namespace: (\S+)\s*$")
JOB_LINE = re.compile(r"^deltamerge (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$", re.DOTALL)
# What spark-submit prints before it ends the JVM itself with the job's exit status; its stack follows.
EXIT_REPORT = "Calling System.exit() with exit code "
SPARK_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
SPARK_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.DEBUG,  # Spark's progress chatter; the job reports what matters in its own lines
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}


class SubmitOutputLog:
    """A logger for SparkSubmitHook that logs spark-submit's lines at their own level (see the module)."""

    def __init__(self, logger: Any) -> None:
        self._logger = logger
        self._started = False  # the job has said its SparkSession is up: Spark's start-up is over
        # When that line came (time.monotonic()): the merge's own work starts there (bench/overhead.py).
        self.started_at: float | None = None
        # The job's own lines (a few per merge, one per progress interval) with when each came: where a
        # merge's time went, phase by phase (bench/overhead.py).
        self.job_lines: list[tuple[float, str]] = []
        self._level = logging.DEBUG  # the level of the record the next non-record line continues
        self.spark_ui: str | None = None  # the driver's Spark UI, as the job's start line names it
        self.tracking_url: str | None = None  # YARN's page of the application (its proxy to the UI)
        self.driver_pod: tuple[str, str] | None = None  # (namespace, pod name) of a Kubernetes driver
        self._pod_name: str | None = None  # the pod report's name, until its namespace line follows

    def info(self, message: Any, *args: Any, **kwargs: Any) -> None:
        # SparkSubmitHook logs an output line as the message alone; anything else is its own message.
        if args or kwargs or not isinstance(message, str):
            self._logger.info(message, *args, **kwargs)
            return
        level, text = self.level_of(message)
        self._logger.log(level, "%s", text)

    def level_of(self, line: str) -> tuple[int, str]:
        """The level to log ``line`` at, and its text (a job line without its prefix)."""
        self._note_application(line)
        job = JOB_LINE.match(line)
        if job:
            self.job_lines.append((time.monotonic(), job.group(2)))
            if job.group(2).startswith(SPARK_STARTED):
                self._started = True
                self.started_at = time.monotonic()
                address = UI_ADDRESS.search(job.group(2))
                self.spark_ui = address.group(1) if address else self.spark_ui
            self._level = logging.getLevelNamesMapping()[job.group(1)]
            return self._level, job.group(2)
        spark = SPARK_LINE.match(line)
        if spark:
            self._level = SPARK_LEVELS[spark.group(1)]
        elif line.startswith(EXIT_REPORT):
            self._level = logging.DEBUG
        if not self._started and self._level < logging.ERROR:
            return logging.DEBUG, line
        return self._level, line

    def _note_application(self, line: str) -> None:
        if tracking := TRACKING_URL.match(line):
            self.tracking_url = tracking.group(1)
        elif pod := DRIVER_POD.match(line):
            self._pod_name = pod.group(1)
        elif (namespace := POD_NAMESPACE.match(line)) and self._pod_name:
            self.driver_pod = (namespace.group(1), self._pod_name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)
