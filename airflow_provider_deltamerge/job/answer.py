"""The merge job's work once its SparkSession is up: the request read, the merge run, the answer written.

Apart from ``job/main.py`` because of what it imports (the engine, sqlglot, pyarrow, deltalake: seconds): the
job imports it while its SparkSession starts.
"""

from __future__ import annotations

import logging
from pathlib import Path

from py4j.protocol import Py4JJavaError
from pyspark import SparkFiles
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.delta.files.writer import table_files
from airflow_provider_deltamerge.delta.log.commit_match import MetricBounds
from airflow_provider_deltamerge.delta.log.job_reports import report_path
from airflow_provider_deltamerge.delta.log.merge_commits import SUBMISSION_ID
from airflow_provider_deltamerge.engine import MergeResult, run_merge
from airflow_provider_deltamerge.engine.backends.delta_spark import choose_backend, run_with_delta_spark
from airflow_provider_deltamerge.engine.resolve.target_table import table_location
from airflow_provider_deltamerge.exceptions import DeltaMergeError, MergeSpecError
from airflow_provider_deltamerge.job.filesystems import prepare_filesystems
from airflow_provider_deltamerge.metrics import DRY_RUN, merge_result
from airflow_provider_deltamerge.spec.json_form import spec_hash
from airflow_provider_deltamerge.spec.locations import spec_paths
from airflow_provider_deltamerge.spec.transport import JobRequest, answer_text, decode_request
from airflow_provider_deltamerge.spec.validation import REFLECTION_FUNCTIONS

log = logging.getLogger("airflow_provider_deltamerge")


def read_request(name: str) -> JobRequest:
    """The request file: the hook's own path (client mode), or where the cluster put the shipped file.

    Raises:
        DeltaMergeError: the file is not a merge request.
        OSError: it cannot be read.
    """
    for candidate in (Path(name), Path(Path(name).name)):
        if candidate.is_file():
            return decode_request(candidate.read_text(encoding="utf-8"))
    return decode_request(Path(SparkFiles.get(Path(name).name)).read_text(encoding="utf-8"))


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
            spec_hash=spec_hash(request.spec),
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
    prepare_filesystems(spark, spec_paths(request.spec))
    if choose_backend(spark, request.spec, request.backend) == "delta-spark":
        if request.bounds or request.dry_run:
            # Delta's MERGE commits as it finishes writing: there is no moment to check or stop before it.
            raise MergeSpecError(
                "Metric bounds and dry runs need this provider's engine, which holds a merge's metrics "
                "before its commit; this merge runs on Delta's own runtime (backend='delta-spark', or "
                "'auto' on a table with features only that runtime writes, or with auto compaction on). Drop "
                "bounds/dry_run, or check the metrics after the merge with DeltaMergeCheckOperator.",
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
