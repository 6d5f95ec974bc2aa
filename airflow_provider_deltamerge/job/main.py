"""The Spark job: read the merge request, run the merge in a SparkSession, answer how it ended.

Submitted by ``DeltaMergeHook`` as ``spark-submit .../job/main.py --request-file <path>``, in client mode
with ``--answer-file <path>`` too (``spec/transport.py``). The request file is the hook's owner-only file
(client mode) or one shipped with ``--files`` (cluster mode, where the answer goes beside the table).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from py4j.protocol import Py4JJavaError
from pyspark import SparkFiles
from pyspark.errors import PySparkException
from pyspark.logger import PySparkLogger
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.delta.files.writer import table_files
from airflow_provider_deltamerge.delta.log.commit_match import MetricBounds
from airflow_provider_deltamerge.delta.log.job_reports import report_path
from airflow_provider_deltamerge.delta.log.merge_commits import SUBMISSION_ID
from airflow_provider_deltamerge.engine import MergeResult, run_merge
from airflow_provider_deltamerge.engine.backends.delta_spark import choose_backend, run_with_delta_spark
from airflow_provider_deltamerge.engine.progress import ProgressReporter, enter_phase
from airflow_provider_deltamerge.engine.resolve.target_table import table_location
from airflow_provider_deltamerge.engine.session_confs import ENGINE_SESSION_CONF
from airflow_provider_deltamerge.exceptions import DeltaMergeError, MergeSpecError
from airflow_provider_deltamerge.metrics import DRY_RUN, merge_result
from airflow_provider_deltamerge.spec.transport import (
    ANSWER_FILE_ARG,
    CONNECT_CONF_ENV,
    CONNECT_REMOTE_ENV,
    REQUEST_FILE_ARG,
    SPARK_STARTED,
    SPARK_UI,
    JobRequest,
    answer_text,
    decode_request,
)
from airflow_provider_deltamerge.spec.validation import REFLECTION_FUNCTIONS

log = logging.getLogger("airflow_provider_deltamerge")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one merge; exit status 0 when it succeeded (also when it changed nothing), 1 when it failed."""
    parser = argparse.ArgumentParser(prog="deltamerge-job", description=__doc__)
    parser.add_argument(REQUEST_FILE_ARG, required=True, help="the merge request file DeltaMergeHook wrote")
    parser.add_argument(ANSWER_FILE_ARG, help="where to write the answer (client mode)")
    args = parser.parse_args(argv)
    _log_to_stdout()
    # From the first second: starting Spark alone can take a minute on a busy machine.
    remote = os.environ.pop(CONNECT_REMOTE_ENV, None)
    begun = time.monotonic()
    with ProgressReporter() as progress:
        spark = _connect_session(remote, begun) if remote else _submitted_session(begun)
        progress.watch(spark)
        answer_file = Path(args.answer_file) if args.answer_file else None
        try:
            request = decode_request(_request_text(args.request_file))
        except (DeltaMergeError, OSError) as err:
            log.error("The merge request cannot be read: %s", err)
            return 1
        try:
            return answer(spark, request, answer_file=answer_file)
        finally:
            enter_phase("stopping Spark")
            spark.stop()


def _submitted_session(begun: float) -> SparkSession:
    """The session spark-submit started this process for; its JVM is the job's own. Its start line says
    how long the session took since ``begun`` (``time.monotonic()``)."""
    # The app's name is spark-submit's --name, which the hook sets.
    spark = SparkSession.builder.config(map=ENGINE_SESSION_CONF).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    quiet_known_warnings(spark)
    ui = spark.sparkContext.uiWebUrl
    log.info(
        "%s in %.1f s: Spark %s, master %s%s",
        SPARK_STARTED,
        time.monotonic() - begun,
        spark.version,
        spark.sparkContext.master,
        f", {SPARK_UI} {ui}" if ui else "",
    )
    drop_reflection_functions(spark)
    return spark


def _connect_session(url: str, begun: float) -> SparkSession:
    """A session of the Spark Connect server at ``url``, with the operator's conf where the server takes it;
    its start line says how long that took since ``begun``.

    The server is shared and long-lived: its JVM's log levels and function registry are not the job's to
    change (the spec's validation still refuses reflection functions by name), and a static conf (memory,
    packages) is the server's own: such a conf is named in a warning, not applied.
    """
    spark = SparkSession.builder.remote(url).getOrCreate()
    for key, value in json.loads(os.environ.pop(CONNECT_CONF_ENV, "") or "{}").items():
        try:
            spark.conf.set(key, value)
        except PySparkException as err:
            # Spark's class only: its message may quote the value, which can be a secret (a private conf).
            log.warning(
                "%s cannot be set on a running Spark Connect server (%s); set it on the server",
                key,
                err.getCondition() or type(err).__name__,
            )
    host = urlsplit(url.replace("sc://", "http://", 1)).hostname
    log.info(
        "%s in %.1f s: Spark %s, Spark Connect server %s",
        SPARK_STARTED,
        time.monotonic() - begun,
        spark.version,
        host,
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


def _request_text(name: str) -> str:
    """The request file: the hook's own path (client mode), or where the cluster put the shipped file."""
    for candidate in (Path(name), Path(Path(name).name)):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    return Path(SparkFiles.get(Path(name).name)).read_text(encoding="utf-8")


def drop_reflection_functions(spark: SparkSession) -> None:
    """Take Spark's reflection functions out of the job's session, so no SQL the merge runs can call them.

    The spec's validation refuses them by name already; this also covers what it cannot see, such as a view
    or SQL function defined elsewhere. Spark 4.1+ keys built-ins as ``system.builtin.<name>``, 4.0 by name.
    """
    registry = spark._jsparkSession.sessionState().functionRegistry()
    jvm = spark._jvm
    assert jvm is not None  # a classic (non-Connect) session, as spark-submit gives the job
    identifier = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier
    for name in REFLECTION_FUNCTIONS:
        for key in (
            identifier(name, jvm.scala.Some("builtin"), jvm.scala.Some("system")),
            identifier.apply(name),
        ):
            try:
                if registry.dropFunction(key):
                    break
            except Py4JJavaError:  # the registry of this Spark version keys built-ins the other way
                continue


def answer(spark: SparkSession, request: JobRequest, *, answer_file: Path | None = None) -> int:
    """Run the request's merge and answer how it ended; the job's exit status.

    The answer goes to ``answer_file`` (client mode) and, when the request asks for it, to the report file
    beside the table that the Airflow side reads in cluster deploy mode. Standard output gets log lines only.
    """
    submission_id = str(request.provenance.get(SUBMISSION_ID, ""))
    try:
        result = _run(spark, request)
    except DeltaMergeError as err:
        log.error("Merge failed: %s", err)
        text, status = answer_text(submission_id, error=err), 1
    else:
        report = merge_result(
            result.metrics,
            version=result.version,
            executor=result.executor,
            spec_hash=request.spec.spec_hash,
            runs=result.runs,
        )
        if result.dry_run is not None:
            report[DRY_RUN] = dict(result.dry_run)
        text, status = answer_text(submission_id, result=report), 0
    if answer_file is not None:
        answer_file.write_text(text, encoding="utf-8")
    if request.report_file and submission_id:
        table = table_location(spark, request.spec.target)
        table_files(spark, table).write_text(report_path(submission_id), text)
    return status


def _run(spark: SparkSession, request: JobRequest) -> MergeResult:
    """Our engine, or Delta's own MERGE where the table needs it and the session has Delta's runtime."""
    if choose_backend(spark, request.spec, request.backend) == "delta-spark":
        if request.bounds or request.dry_run:
            # Delta's MERGE commits as it finishes writing: there is no moment to check or stop before it.
            raise MergeSpecError(
                "Metric bounds and dry runs need this provider's engine, which holds a merge's metrics "
                "before its commit; this merge runs on Delta's own runtime (backend='delta-spark', or "
                "'auto' on a table with features only that runtime writes). Drop bounds/dry_run, or check "
                "the metrics after the merge with DeltaMergeCheckOperator.",
                error_class="DELTAMERGE_GUARDS_NEED_ENGINE",
            )
        return run_with_delta_spark(spark, request.spec, provenance=request.provenance, rerun=request.rerun)
    return run_merge(
        spark,
        request.spec,
        executor=request.executor,  # type: ignore[arg-type]
        provenance=request.provenance,
        rerun=request.rerun,
        bounds=MetricBounds(request.bounds) if request.bounds else None,
        dry_run=request.dry_run,
    )


def _log_to_stdout() -> None:
    """One readable line per phase on stdout, which spark-submit hands to the Airflow task log."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("deltamerge %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    # PySpark logs every analysis error it raises with the whole JVM stack; the merge reports the error in a
    # line of its own (engine/spark_errors.py), and the stack belongs in the debug log only.
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


if __name__ == "__main__":
    sys.exit(main())
