"""The Spark job: read the merge request, run the merge in a SparkSession, answer how it ended.

Submitted by ``DeltaMergeHook`` as ``spark-submit .../job/main.py --request-file <path>``, in client mode
with ``--answer-file <path>`` too (``job_contract.py``). The request file is the hook's owner-only file
(client mode) or one shipped with ``--files`` (cluster mode, where the answer goes beside the table). On a
Spark Connect server the job runs in the task's own process instead (``connect.py``).

This module imports little: the merge's own work (``job/answer.py``: the engine, sqlglot, pyarrow,
deltalake, seconds of imports) loads in a thread while the SparkSession starts.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import import_module
from pathlib import Path
from types import ModuleType

from pyspark.logger import PySparkLogger
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.engine.progress import ProgressReporter, enter_phase
from airflow_provider_deltamerge.exceptions import DeltaMergeError
from airflow_provider_deltamerge.job_contract import (
    ANSWER_FILE_ARG,
    ENGINE_SESSION_CONF,
    REQUEST_FILE_ARG,
    SPARK_STARTED,
    SPARK_UI,
)

WORK_MODULE = "airflow_provider_deltamerge.job.answer"

log = logging.getLogger("airflow_provider_deltamerge")
# The job's own lines in Spark's output: the hook logs each at its level (hooks/submit_log.py).
JOB_LINE_FORMAT = "deltamerge %(levelname)s %(message)s"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one merge; exit status 0 when it succeeded (also when it changed nothing), 1 when it failed."""
    parser = argparse.ArgumentParser(prog="deltamerge-job", description=__doc__)
    parser.add_argument(REQUEST_FILE_ARG, required=True, help="the merge request file DeltaMergeHook wrote")
    parser.add_argument(ANSWER_FILE_ARG, help="where to write the answer (client mode)")
    args = parser.parse_args(argv)
    _log_to_stdout()
    # From the first second: starting Spark alone can take a minute on a busy machine.
    begun = time.monotonic()
    # The merge's modules load while the session starts, which is mostly the JVM's work (or the server's).
    with ThreadPoolExecutor(1, thread_name_prefix="deltamerge-imports") as imports:
        work = imports.submit(import_module, WORK_MODULE)
        with ProgressReporter() as progress:
            spark = _submitted_session(work, begun)
            progress.watch(spark)
            try:
                return _answer(work.result(), spark, args.request_file, args.answer_file)
            finally:
                enter_phase("stopping Spark")
                spark.stop()


def _answer(work: ModuleType, spark: SparkSession, request_file: str, answer_file: str | None) -> int:
    """Read the request and answer it (``job/answer.py``); the job's exit status."""
    try:
        request = work.read_request(request_file)
    except (DeltaMergeError, OSError) as err:
        log.error("The merge request cannot be read: %s", err)
        return 1
    return int(work.answer(spark, request, answer_file=Path(answer_file) if answer_file else None))


def _submitted_session(work: Future[ModuleType], begun: float) -> SparkSession:
    """The session spark-submit started this process for; its JVM is the job's own. Its start line says
    how long the session and the merge's imports (``work``) took since ``begun`` (``time.monotonic()``)."""
    # The app's name is spark-submit's --name, which the hook sets.
    spark = SparkSession.builder.config(map=ENGINE_SESSION_CONF).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    quiet_known_warnings(spark)
    work.result().drop_reflection_functions(spark)
    ui = spark.sparkContext.uiWebUrl
    log.info(
        "%s in %.1f s: Spark %s, master %s%s",
        SPARK_STARTED,
        time.monotonic() - begun,
        spark.version,
        spark.sparkContext.master,
        f", {SPARK_UI} {ui}" if ui else "",
    )
    return spark


# Spark warnings that the merge's own way of working causes on every run and no user can act on: a source is
# checkpointed locally on purpose (engine/source/materialize.py), its lineage never needed after the merge;
# the engine's wide plans have their string form truncated, which only Spark's debug output shows.
EXPECTED_WARNINGS_LOGGERS = (
    "org.apache.spark.rdd.MapPartitionsRDD",
    "org.apache.spark.util.SparkStringUtils",
)


def quiet_known_warnings(spark: SparkSession) -> None:
    """Log only errors from the loggers of ``EXPECTED_WARNINGS_LOGGERS``, so warnings mean something."""
    jvm = spark._jvm
    assert jvm is not None  # a classic (non-Connect) session, as spark-submit gives the job
    for name in EXPECTED_WARNINGS_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            name, jvm.org.apache.logging.log4j.Level.ERROR
        )


def _log_to_stdout() -> None:
    """One readable line per phase on stdout, which spark-submit hands to the Airflow task log."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(JOB_LINE_FORMAT))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    quiet_query_context_loggers()


def quiet_query_context_loggers() -> None:
    """PySpark logs every analysis error it raises with the whole JVM stack; the merge reports the error in a
    line of its own (engine/spark_errors.py), and the stack belongs in the debug log only."""
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


if __name__ == "__main__":
    sys.exit(main())
