"""The merge job in the Airflow task's own process, against a Spark Connect server.

With a ``spark_connect`` connection nothing is submitted and no process is started: ``DeltaMergeHook`` runs
``ConnectedJob`` in the task's process, which opens a Connect session to the long-lived server, runs the
request's merge and answers as the spark-submit job does (``answer.py``). A child Python process would pay
the interpreter's start and the engine's imports again on every merge, seconds against a warm server's
merge of about one. Those imports (pyspark's Connect client, the engine) come with the hook's call, never
at DAG parse. The server's URL, which may carry a token, stays in the process's memory: no command line,
no environment.

The job's lines reach ``emit`` as spark-submit's output reaches the hook (``deltamerge LEVEL message``), so
the task log, its levels and the phase timings (bench/overhead.py) are the same either way.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.connect.client.retries import DefaultPolicy
from pyspark.sql.connect.session import SparkSession as ConnectSession

from airflow_provider_deltamerge.engine.progress import ProgressReporter, enter_phase
from airflow_provider_deltamerge.job.answer import answer
from airflow_provider_deltamerge.job.main import JOB_LINE_FORMAT, quiet_query_context_loggers
from airflow_provider_deltamerge.job_contract import SPARK_STARTED
from airflow_provider_deltamerge.spec.transport import JobRequest

log = logging.getLogger("airflow_provider_deltamerge")

# PySpark picks the Connect form of its functions by this variable; its own builder sets it for good, the job
# only while it runs.
CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"
# The first call to the server is tried for about 8 s (0.25 s, doubling, 5 tries), not for pyspark's default
# of ten minutes and more, which is made to ride out a server's restart in the middle of a query: a server
# that is not there fails the task now, and Airflow's retries try again later. The merge's calls keep the
# default.
FIRST_CALL_RETRIES = DefaultPolicy(
    max_retries=5, initial_backoff=250, backoff_multiplier=2.0, max_backoff=4000
)


class ConnectServerUnavailable(ConnectionError):
    """The Spark Connect server did not answer the job's first call."""


class ConnectedJob:
    """One merge on a Spark Connect server from this process; ``interrupt`` stops it from another thread."""

    def __init__(self, url: str, emit: Callable[[str], None]) -> None:
        self._url = url
        self._emit = emit
        self._session: SparkSession | None = None

    def run(
        self,
        request: JobRequest,
        *,
        conf: Mapping[str, object],
        environment: Mapping[str, str],
        answer_file: Path,
    ) -> int:
        """Answer ``request`` into ``answer_file``; 0 when the merge succeeded (also when it changed nothing).

        ``environment`` (the storage's credentials, by the names deltalake and obstore read) is set for the
        run and taken away after it.
        """
        begun = time.monotonic()
        with _job_lines(self._emit), _environment({CONNECT_MODE_ENV: "1", **environment}):
            spark = self._session = _connect_session(self._url, conf, begun)
            try:
                with ProgressReporter() as progress:
                    progress.watch(spark)
                    return answer(spark, request, answer_file=answer_file)
            finally:
                enter_phase("stopping Spark")
                spark.stop()

    def interrupt(self) -> None:
        """Stop the server's running queries of this job and end its session, from another thread (the
        hook's ``on_kill``): the merge fails at its next step and, unless its commit was under way, commits
        nothing."""
        session = self._session
        if session is None:
            return
        try:
            session.interruptAll()
            session.stop()
        except PySparkException as err:  # the session ended meanwhile
            log.debug("The Connect session could not be interrupted: %s", type(err).__name__)


def _connect_session(url: str, conf: Mapping[str, object], begun: float) -> SparkSession:
    """A new session of the server at ``url``, with ``conf`` where the server takes it; its start line says
    how long that took since ``begun`` (``time.monotonic()``).

    The server is shared and long-lived: its JVM's log levels and function registry are not the job's to
    change (the spec's validation still refuses reflection functions by name), and a static conf (memory,
    packages) is the server's own: such a conf is named in a warning, not applied.
    """
    # Connect's own builder: the classic one refuses where a classic SparkContext runs in the process. Its
    # session has the classic one's API, which the engine takes (``session_kind`` tells them apart).
    session = ConnectSession.builder.remote(url).create()
    parts = urlsplit(url.replace("sc://", "http://", 1))  # the token is past the path, never in these
    usual = session.client.get_retry_policies()
    session.client.set_retry_policies([FIRST_CALL_RETRIES])
    try:
        version = session.version
    except PySparkException as err:
        # Its message is gRPC's debug text; what the user needs is which server, its status and what to check.
        status = getattr(err, "getGrpcStatusCode", lambda: None)()
        session.client.close()  # the channel only: stopping would ask the server to release the session
        raise ConnectServerUnavailable(
            f"The Spark Connect server at {parts.hostname}:{parts.port} could not be reached or refused the "
            f"session ({status.name if status else err.getCondition() or type(err).__name__}, after "
            f"{time.monotonic() - begun:.0f} s): check that it runs, that this worker reaches it, and the "
            "connection's token."
        ) from None
    finally:
        session.client.set_retry_policies(usual)
    spark = cast(SparkSession, session)
    for key, value in conf.items():
        try:
            spark.conf.set(key, str(value))
        except PySparkException as err:
            # Spark's class only: its message may quote the value, which can be a secret (a private conf).
            log.warning(
                "%s cannot be set on a running Spark Connect server (%s); set it on the server",
                key,
                err.getCondition() or type(err).__name__,
            )
    log.info(
        "%s in %.1f s: Spark %s, Spark Connect server %s",
        SPARK_STARTED,
        time.monotonic() - begun,
        version,
        parts.hostname,
    )
    return spark


class _LineHandler(logging.Handler):
    """The job's records as the job's output lines."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(JOB_LINE_FORMAT))
        self._emit = emit

    def emit(self, record: logging.LogRecord) -> None:
        self._emit(self.format(record))


@contextmanager
def _job_lines(emit: Callable[[str], None]) -> Iterator[None]:
    """The package's records at INFO and above go to ``emit`` alone while the job runs (the hook logs them
    at their level), as the spark-submit job's go to its output."""
    handler = _LineHandler(emit)
    level, propagate = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    quiet_query_context_loggers()
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in this process's environment for the block; each name as it was afterwards."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
