"""The optional delta-spark backend: run a ``MergeSpec`` with Delta Lake's own merge where a session has it.

Our engine needs no Delta jars. Where a SparkSession does have Delta's runtime, this backend hands the data
work to Delta's ``DeltaMergeBuilder`` (for table features the engine refuses) and keeps the rest: the spec,
the run identity in the commit, and Delta's metrics in a ``MergeResult``. ``delta`` (the delta-spark
package) is imported only inside functions, so this module imports, and its checks run, without it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from py4j.java_gateway import JavaClass
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import Row, SparkSession

from airflow_provider_deltamerge import PACKAGE_NAME, __version__
from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.auto_compaction import (
    AUTO_COMPACT_CONF,
    AUTO_COMPACTION,
    compacts_after_writes,
)
from airflow_provider_deltamerge.delta.log.commit_match import MERGE
from airflow_provider_deltamerge.delta.log.idempotency import IDEMPOTENCY_DEPTH, run_identity, same_run
from airflow_provider_deltamerge.delta.log.merge_commits import SUBMISSION_ID, provenance_of
from airflow_provider_deltamerge.delta.log.operation_metrics import (
    DELTA_SPARK_EXECUTOR,
    before_skipping,
    delta_merge_metrics,
)
from airflow_provider_deltamerge.delta.log.protocol import refused_features
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from airflow_provider_deltamerge.delta.log.table_features import NOT_WRITABLE_BY_DELTA_SPARK
from airflow_provider_deltamerge.engine.backends.delta_command_metrics import command_metrics
from airflow_provider_deltamerge.engine.merge import MergeResult
from airflow_provider_deltamerge.engine.resolve.resolution import quote
from airflow_provider_deltamerge.engine.resolve.target_table import table_location
from airflow_provider_deltamerge.engine.source.load import merge_source
from airflow_provider_deltamerge.engine.spark_errors import SparkFailure, first_sentence, summarize
from airflow_provider_deltamerge.exceptions import (
    ClauseResolutionError,
    DeltaMergeError,
    DeltaRuntimeError,
    MergeCommitError,
    MergeExecutionError,
    MergeSpecError,
    TargetTableError,
    UnsupportedFeaturesError,
)
from airflow_provider_deltamerge.metrics import MetricsRecorder, MetricValue
from airflow_provider_deltamerge.session_kind import session_confs_set
from airflow_provider_deltamerge.spec import (
    MatchedDelete,
    MatchedUpdate,
    MergeSpec,
    NotMatchedBySourceDelete,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
    spec_hash,
)

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

log = logging.getLogger(__name__)

Backend = Literal["engine", "delta-spark"]
BackendRequest = Literal["auto", "engine", "delta-spark"]
BACKEND_REQUESTS: tuple[str, ...] = ("auto", "engine", "delta-spark")
EXECUTOR_NAME = DELTA_SPARK_EXECUTOR

DELTA_TABLE_CLASS = "io.delta.tables.DeltaTable"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
EXTENSIONS_CONF = "spark.sql.extensions"
CATALOG_CONF = "spark.sql.catalog.spark_catalog"
# Delta copies this session conf into the commitInfo.userMetadata of every commit made while it is set.
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


# (method, keyword arguments) of one DeltaMergeBuilder call.
BuilderCall = tuple[str, dict[str, Any]]


# --- Does the session have Delta's runtime? -------------------------------------------------------------


def has_delta_runtime(spark: SparkSession) -> bool:
    """The session can run Delta's own merge: delta-spark importable, its jars loaded, its confs set."""
    return not missing_delta_runtime(spark)


def require_delta_runtime(spark: SparkSession) -> None:
    """Raise unless the session can run Delta's own merge.

    Raises:
        DeltaRuntimeError: a numbered list of what is missing, each with the way to add it.
    """
    missing = missing_delta_runtime(spark)
    if missing:
        steps = "\n".join(f"  {n}. {item}" for n, item in enumerate(missing, start=1))
        raise DeltaRuntimeError(
            "The delta-spark backend needs Delta Lake's own Spark runtime, and this session lacks:\n"
            f"{steps}\nOr choose backend='engine', which needs none of these.",
            error_class="DELTA_RUNTIME_MISSING",
        )


def missing_delta_runtime(spark: SparkSession) -> tuple[str, ...]:
    """What the session lacks to run Delta's merge, each item saying how to add it; empty if nothing."""
    missing = []
    if not _delta_python_api_importable():
        missing.append(f"the Python package delta-spark: pip install {PACKAGE_NAME}[delta-spark]")
    # None: a Spark Connect client cannot see the server's classpath; the server reports it at execute().
    if _jvm_has_class(spark, DELTA_TABLE_CLASS) is False:
        missing.append(
            f"Delta's jars ({DELTA_TABLE_CLASS} is not on the JVM's classpath): "
            f"spark-submit --packages io.delta:{delta_artifact(spark.version)}:{_delta_version()} "
            "(a delta-spark release built for your Spark version), or list the jars in spark.jars"
        )
    extensions = [name.strip() for name in (spark.conf.get(EXTENSIONS_CONF, "") or "").split(",")]
    if DELTA_EXTENSION not in extensions:
        missing.append(
            f"the Spark conf {EXTENSIONS_CONF}={DELTA_EXTENSION} (set it when the session is built, "
            "e.g. spark-submit --conf)"
        )
    if spark.conf.get(CATALOG_CONF, "") != DELTA_CATALOG:
        missing.append(f"the Spark conf {CATALOG_CONF}={DELTA_CATALOG}")
    supported = _delta_spark_range()
    if supported is not None and not supported.contains(spark.version, prereleases=True):
        # Delta built for other Spark versions fails inside the JVM (NoSuchMethodError) at its first MERGE.
        missing.append(
            f"a Spark version delta-spark {_delta_version()} supports ({supported}); this session runs "
            f"Spark {spark.version}: install the delta-spark release built for it, or that Spark"
        )
    return tuple(missing)


def _delta_spark_range() -> SpecifierSet | None:
    """The pyspark versions the installed delta-spark declares it works with; None if it is not installed
    or declares none."""
    try:
        requirements = importlib.metadata.requires("delta-spark") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    from packaging.requirements import Requirement  # the delta-spark extra's dependency

    for text in requirements:
        requirement = Requirement(text)
        if requirement.name == "pyspark" and requirement.marker is None and requirement.specifier:
            return requirement.specifier
    return None


def _delta_python_api_importable() -> bool:
    try:
        importlib.import_module("delta.tables")
    except ImportError:
        return False
    return True


def _delta_version() -> str:
    try:
        return importlib.metadata.version("delta-spark")
    except importlib.metadata.PackageNotFoundError:
        return "<version>"


def delta_artifact(spark_version: str) -> str:
    """The Maven artifact of Delta's jars for this Spark, named as delta-spark's own
    ``configure_spark_with_delta_pip`` names it: one per Spark line since delta-spark 4.1
    (``delta-spark_4.2_2.13``), one for all before (``delta-spark_2.13``)."""
    release = tuple(int(part) for part in _delta_version().split(".")[:2] if part.isdigit())
    if len(release) == 2 and release < (4, 1):
        return "delta-spark_2.13"
    return f"delta-spark_{'.'.join(spark_version.split('.')[:2])}_2.13"


def _jvm_has_class(spark: SparkSession, class_name: str) -> bool | None:
    """Whether the driver JVM can load ``class_name``; None when the session has no JVM (Spark Connect)."""
    node = getattr(spark, "_jvm", None)
    if node is None:
        return None
    # py4j answers an unknown class name with a JavaPackage, a loadable one with a JavaClass.
    for part in class_name.split("."):
        node = getattr(node, part)
    return isinstance(node, JavaClass)


# --- Which backend runs a merge? --------------------------------------------------------------------------


def choose_backend(spark: SparkSession, spec: MergeSpec, requested: str) -> Backend:
    """The backend that runs ``spec``.

    * ``engine``: always our engine; nothing is checked.
    * ``delta-spark``: Delta's merge; the session must have Delta's runtime.
    * ``auto``: Delta's merge only when the target uses a feature our engine refuses (row tracking without
      its columns, UniForm, ...) or asks for auto compaction, and the session has Delta's runtime; otherwise
      our engine (which then refuses such a table itself).

    Raises:
        MergeSpecError: ``requested`` is not one of ``auto``, ``engine``, ``delta-spark``.
        DeltaRuntimeError: ``delta-spark`` was requested and the session lacks Delta's runtime.
        TargetTableError: ``auto`` and there is no Delta table at the target.
    """
    if requested == "engine":
        return "engine"
    if requested == "delta-spark":
        require_delta_runtime(spark)
        return "delta-spark"
    if requested != "auto":
        raise MergeSpecError(
            f"Unknown backend {requested!r}; choose one of {', '.join(BACKEND_REQUESTS)}.",
            error_class="DELTAMERGE_INVALID_BACKEND",
        )
    features = needing_delta_runtime(
        table_location(spark, spec.target), auto_compact_conf=spark.conf.get(AUTO_COMPACT_CONF, None)
    )
    if not features:
        return "engine"
    missing = missing_delta_runtime(spark)
    if not missing:
        log.info("%s uses %s: the merge runs on Delta's own runtime", spec.target, ", ".join(features))
        return "delta-spark"
    log.warning(
        "%s uses %s, which this engine does not support; Delta's runtime would, but the session lacks: %s",
        spec.target,
        ", ".join(features),
        "; ".join(missing),
    )
    return "engine"


def needing_delta_runtime(table_uri: str, *, auto_compact_conf: str | None = None) -> tuple[str, ...]:
    """What of ``table_uri`` only Delta's runtime does, by Delta's names: the table features our engine
    refuses (``delta/log/table_features.py``: row tracking without its columns, UniForm's Iceberg
    compatibility, unknown features), the reader features ``deltalake`` cannot open the table with (the log's
    protocol names them: catalogManaged, geospatial, ...), and auto compaction where Delta would compact
    after the merge (``delta/log/auto_compaction.py``; ``auto_compact_conf`` is the session's
    ``spark.databricks.delta.autoCompact.enabled``). None when a feature is one Delta 4.4's runtime cannot
    write either (collations, icebergWriterCompat): then the engine refuses the table itself, naming it."""
    try:
        snapshot = read_snapshot(table_uri)
    except UnsupportedFeaturesError as unreadable:
        refused = unreadable.features
    else:
        refused = tuple(refused_features(snapshot))
        if compacts_after_writes(dict(snapshot.configuration), auto_compact_conf):
            refused += (AUTO_COMPACTION,)
    return () if NOT_WRITABLE_BY_DELTA_SPARK.intersection(refused) else refused


# --- Run a merge with Delta's builder ---------------------------------------------------------------------


def run_with_delta_spark(
    spark: SparkSession,
    spec: MergeSpec,
    *,
    provenance: Mapping[str, Any] | None = None,
    rerun: str = "skip",
) -> MergeResult:
    """Run ``spec`` with Delta Lake's ``DeltaMergeBuilder`` and read Delta's metrics back from the log.

    0. With ``rerun="skip"``, return the recorded result if Delta's history already holds this run's commit
       (same dag, task, run, map index and spec hash in ``provenance``), as the engine does: a retried job
       never merges twice, whatever the target (path or catalog name).
    1. Build ``DeltaTable.forPath(target).alias(t).merge(source.alias(s), condition)`` and one builder call
       per clause, in clause order (see ``builder_calls``), then ``withSchemaEvolution()`` if asked.
    2. Execute with the run identity (``submissionId``, ``specHash``, ``engineVersion``, ``executor`` and
       ``provenance``) as JSON in the session conf ``spark.databricks.delta.commitInfo.userMetadata``,
       which Delta writes into the commit's ``userMetadata``; the conf's previous value is restored after.
    3. Find our commit among the commits made since execute() started (by ``submissionId``) and return its
       metrics as ``delta/log/operation_metrics.py`` reads them from the commit file (Delta's
       ``operationMetrics``, the ones the log gives exactly: files and bytes before skipping, partitions
       removed from and added to, change file bytes), and those only Delta's SQL metrics hold (files, bytes
       and partitions after skipping, ``numSourceRowsInSecondScan``) from the executed command's plan
       (``delta_command_metrics.py``). A merge that changes nothing makes no commit: then ``committed`` is
       False, the version is the one before, and the metrics are Delta's SQL metrics, all of them. On Spark
       Connect, where the plan cannot be read, those only Delta's SQL metrics hold are None (not measured);
       without a commit there, the row counts come from execute()'s own result, ``numSourceRows`` from
       counting the source, ``executionTimeMs`` from the wall time of execute(), the files and bytes before
       skipping from the snapshot at the version before when no other commit landed meanwhile (so Delta
       read that one), and Delta's phase timings are None too.

    Raises:
        DeltaRuntimeError: the session lacks Delta's runtime.
        TargetTableError: Delta's runtime cannot open the target as a Delta table.
        SourceError: the source cannot be read.
        ClauseResolutionError: Delta's analysis of the merge failed.
        MergeCommitError: a concurrent commit conflicted with this one (Delta's conflict check).
        MergeExecutionError: Delta's merge failed while computing or writing its files.
    """
    require_delta_runtime(spark)
    from delta.tables import DeltaTable

    info = {"engineVersion": __version__, "specHash": spec_hash(spec), **(provenance or {})}
    info.setdefault(SUBMISSION_ID, uuid.uuid4().hex)
    info["executor"] = EXECUTOR_NAME
    source = merge_source(spark, spec)
    location = table_location(spark, spec.target)
    try:
        table = DeltaTable.forPath(spark, location)
    except AnalysisException as err:
        failure = summarize(err)
        raise TargetTableError(
            f"Delta's runtime cannot open {spec.target} as a Delta table: {failure}",
            error_class=_error_class(err, failure),
        ) from err
    with _delta_errors(spark):
        earlier = _committed_run(table, info) if rerun == "skip" else None
        if earlier is not None:
            log.info("This run already committed version %d: nothing to do", earlier["version"])
            metrics = delta_merge_metrics(location, earlier["version"])
            return MergeResult(
                metrics, earlier["version"], EXECUTOR_NAME, committed=True, already_committed=True
            )
        version_before = _latest_commit(table)["version"]
        builder = table.alias(spec.target_alias).merge(source.alias(spec.source_alias), spec.condition)
        for method, kwargs in builder_calls(spec, source.columns, table.toDF().columns):
            builder = getattr(builder, method)(**kwargs)
        log.info("Running the merge into %s (version %d) with Delta's runtime", spec.target, version_before)
        started = time.monotonic()
        with session_confs_set(spark, {USER_METADATA_CONF: json.dumps(info, sort_keys=True)}):
            executed = builder.execute()
            counts = executed.collect()
        elapsed_ms = math.ceil((time.monotonic() - started) * 1000)
        measured = command_metrics(executed)
        latest = _latest_commit(table)
        commit = _find_commit(table, version_before, latest, info[SUBMISSION_ID])
    if commit is None:
        log.info("Delta made no commit for this merge; table stays at version %d", version_before)
        if measured:
            return MergeResult(
                {**dict.fromkeys(m.METRIC_DESCRIPTIONS), **measured},
                version_before,
                EXECUTOR_NAME,
                committed=False,
            )
        # No commit holds Delta's metrics: the source rows are counted (one scan, only here) and the time
        # is the merge's wall time, so neither is reported as a made-up 0. With no commit since
        # version_before, that is the snapshot Delta's merge read; after another writer's commit it is not
        # known which one it read.
        metrics = {
            **_metrics_from_counts(counts, source_rows=source.count(), execution_time_ms=elapsed_ms),
            **(before_skipping(location, version_before) if latest["version"] == version_before else {}),
        }
        return MergeResult(metrics, version_before, EXECUTOR_NAME, committed=False)
    log.info("Delta committed version %d", commit["version"])
    # The commit's metrics first; Delta's SQL metrics for the ones its commit leaves out.
    metrics = {
        name: measured.get(name) if value is None else value
        for name, value in delta_merge_metrics(location, commit["version"]).items()
    }
    return MergeResult(metrics, commit["version"], EXECUTOR_NAME, committed=True)


def builder_calls(
    spec: MergeSpec, source_columns: Sequence[str], target_columns: Sequence[str]
) -> list[BuilderCall]:
    """The ``DeltaMergeBuilder`` calls for ``spec``'s clauses, in clause order, then schema evolution.

    ``* EXCEPT (cols)`` has no builder form (nor SQL form in Delta 4.4): it becomes an explicit ``set`` /
    ``values`` that does what ``*`` does, minus the excluded columns. With schema evolution that is every
    source column; without it, every target column, from the same-named source column (an UPDATE of a
    target column the source lacks stays in, so Delta reports it as ``*`` would; an INSERT leaves it out,
    so Delta writes NULL or the column default). Columns compare case-insensitively, as Spark's do.
    """
    calls: list[BuilderCall] = []
    for clause in spec.clauses:
        condition = clause.condition
        match clause:
            case MatchedUpdate(star=True, except_columns=()):
                calls.append(("whenMatchedUpdateAll", {"condition": condition}))
            case MatchedUpdate(star=True):
                star = _star_except(spec, clause, source_columns, target_columns)
                calls.append(("whenMatchedUpdate", {"condition": condition, "set": star}))
            case MatchedUpdate():
                calls.append(("whenMatchedUpdate", {"condition": condition, "set": dict(clause.set)}))
            case MatchedDelete():
                calls.append(("whenMatchedDelete", {"condition": condition}))
            case NotMatchedInsert(star=True, except_columns=()):
                calls.append(("whenNotMatchedInsertAll", {"condition": condition}))
            case NotMatchedInsert(star=True):
                star = _star_except(spec, clause, source_columns, target_columns)
                calls.append(("whenNotMatchedInsert", {"condition": condition, "values": star}))
            case NotMatchedInsert():
                values = dict(clause.values)
                calls.append(("whenNotMatchedInsert", {"condition": condition, "values": values}))
            case NotMatchedBySourceUpdate():
                calls.append(
                    ("whenNotMatchedBySourceUpdate", {"condition": condition, "set": dict(clause.set)})
                )
            case NotMatchedBySourceDelete():
                calls.append(("whenNotMatchedBySourceDelete", {"condition": condition}))
    if spec.schema_evolution:
        calls.append(("withSchemaEvolution", {}))
    return calls


def _star_except(
    spec: MergeSpec,
    clause: MatchedUpdate | NotMatchedInsert,
    source_columns: Sequence[str],
    target_columns: Sequence[str],
) -> dict[str, str]:
    excluded = {name.lower() for name in clause.except_columns}
    source_by_lower = {name.lower(): name for name in source_columns}
    over = source_columns if spec.schema_evolution else target_columns
    out: dict[str, str] = {}
    for column in over:
        if column.lower() in excluded:
            continue
        source_column = source_by_lower.get(column.lower())
        if source_column is None and isinstance(clause, NotMatchedInsert):
            continue
        out[quote(column)] = f"{spec.source_alias}.{quote(source_column or column)}"
    return out


def _latest_commit(table: Any) -> Row:
    rows = table.history(1).collect()
    if not rows:
        raise MergeCommitError(
            f"Delta reports no history for {table!r}; is it a Delta table?",
            error_class="DELTA_MISSING_DELTA_TABLE",
        )
    return rows[0]


def _committed_run(table: Any, info: Mapping[str, Any]) -> Row | None:
    """The newest merge commit in Delta's history made by the same run and spec as ``info``, if any (not the
    auto compaction after it, which carries the same provenance)."""
    if run_identity(info) is None:
        return None
    matches = same_run(info)
    for row in table.history(IDEMPOTENCY_DEPTH).collect():
        if row["operation"] == MERGE and matches(provenance_of({"userMetadata": row["userMetadata"]})):
            return row
    return None


def _find_commit(table: Any, version_before: int, latest: Row, submission_id: str) -> Row | None:
    """Our MERGE commit among those made after ``version_before`` up to ``latest`` (others may have
    committed after ours: another writer, or Delta's auto compaction of the table, whose OPTIMIZE commit
    carries our provenance record too)."""
    new_commits = latest["version"] - version_before
    if new_commits <= 0:
        return None
    rows = [latest] if new_commits == 1 else table.history(new_commits).collect()
    for row in rows:
        ours = provenance_of({"userMetadata": row["userMetadata"]}).get(SUBMISSION_ID) == submission_id
        if row["version"] > version_before and row["operation"] == MERGE and ours:
            return row
    return None


# execute()'s result columns (DeltaMergeBuilder.execute) -> our metric names.
_EXECUTE_COUNTS = {
    "num_inserted_rows": m.NUM_TARGET_ROWS_INSERTED,
    "num_updated_rows": m.NUM_TARGET_ROWS_UPDATED,
    "num_deleted_rows": m.NUM_TARGET_ROWS_DELETED,
}


# Without a commit on Spark Connect, Delta's SQL metrics (its phase timings among them) are out of reach,
# and no read version is recorded: not measured, unless the caller derives the files and bytes before
# skipping. No file was removed or added, so the partition and change-file metrics are 0 (as Delta's are).
_NOT_MEASURED_WITHOUT_COMMIT = (
    m.NUM_TARGET_FILES_BEFORE_SKIPPING,
    m.NUM_TARGET_BYTES_BEFORE_SKIPPING,
    m.NUM_TARGET_FILES_AFTER_SKIPPING,
    m.NUM_TARGET_BYTES_AFTER_SKIPPING,
    m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING,
    m.NUM_SOURCE_ROWS_IN_SECOND_SCAN,
    m.SCAN_TIME_MS,
    m.REWRITE_TIME_MS,
    m.MATERIALIZE_SOURCE_TIME_MS,
)


def _metrics_from_counts(
    rows: Sequence[Row], *, source_rows: int, execution_time_ms: int
) -> dict[str, MetricValue]:
    recorder = MetricsRecorder()
    recorder.set(m.NUM_SOURCE_ROWS, source_rows)
    recorder.set(m.EXECUTION_TIME_MS, execution_time_ms)
    if rows:
        counts = rows[0].asDict()
        for column, name in _EXECUTE_COUNTS.items():
            recorder.set(name, int(counts.get(column) or 0))
    return {**recorder.freeze(), **dict.fromkeys(_NOT_MEASURED_WITHOUT_COMMIT)}


@contextmanager
def _delta_errors(spark: SparkSession) -> Iterator[None]:
    """Turn Delta's and Spark's errors into the merge's own, keeping Delta's error class."""
    try:
        yield
    except DeltaMergeError:
        raise
    except (PySparkException, Py4JJavaError) as err:
        # Delta's class and first sentence, read from the JVM's exception (spark_errors), never its frames.
        failure = summarize(err)
        error_class = _error_class(err, failure)
        failure = _with_catalogued_message(spark, failure, error_class)
        if _is_conflict(err):
            raise MergeCommitError(
                f"A concurrent commit conflicted with the merge; nothing was committed: {failure}",
                error_class=error_class,
            ) from err
        if isinstance(err, AnalysisException) or (error_class or "").startswith(_ANALYSIS_CLASS_PREFIXES):
            raise ClauseResolutionError(
                f"{failure} (Delta's analysis of the merge) Fix the clause or column it names.",
                error_class=error_class,
            ) from err
        raise MergeExecutionError(
            f"{failure} (Delta's merge) Nothing was committed.", error_class=error_class
        ) from err


# Spark's text for an error class its own catalogue lacks. Delta 4.4 on Spark 4.2 has Spark render some of
# its analysis errors (DELTA_MERGE_UNRESOLVED_EXPRESSION among them) from that catalogue, which does not hold
# Delta's classes: the error's class survives in this text, its message and values do not.
_LOST_MESSAGE = re.compile(r"^Cannot find main error class '([A-Z0-9_.]+)'")
DELTA_ERROR_CATALOGUE = "error/delta-error-classes.json"


def _with_catalogued_message(
    spark: SparkSession, failure: SparkFailure, error_class: str | None
) -> SparkFailure:
    """``failure``, with Delta's own message for its class where Spark lost the text: the class's message in
    Delta's error catalogue, read from the jar the session loaded, its ``<parameters>`` as Delta names them
    (the values did not survive)."""
    if (
        error_class is None
        or not error_class.startswith("DELTA_")
        or not _LOST_MESSAGE.match(failure.message)
    ):
        return failure
    message = _delta_catalogue(spark).get(error_class, {}).get("message")
    if not message:
        return failure
    sentence = first_sentence("\n".join(message))
    return SparkFailure(
        error_class,
        f"{sentence} (Delta's message, whose values its runtime lost on this Spark)",
        failure.classes,
    )


def _delta_catalogue(spark: SparkSession) -> dict[str, Any]:
    """Delta's error catalogue from the session's class path; empty where the session cannot read it."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return {}
    url = jvm.Thread.currentThread().getContextClassLoader().getResource(DELTA_ERROR_CATALOGUE)
    if url is None:
        return {}
    try:
        catalogue = json.loads(str(jvm.org.apache.commons.io.IOUtils.toString(url, "UTF-8")))
    except (Py4JJavaError, ValueError):
        return {}
    return catalogue if isinstance(catalogue, dict) else {}


def _is_conflict(err: BaseException) -> bool:
    from delta import exceptions as delta_exceptions

    conflicts = tuple(getattr(delta_exceptions, name) for name in delta_exceptions.__all__)
    return isinstance(err, conflicts)


# Classes of errors Delta's analysis raises (also when PySpark does not convert them to AnalysisException).
_ANALYSIS_CLASS_PREFIXES = (
    "DELTA_MERGE_UNRESOLVED_EXPRESSION",
    "DELTA_MERGE_RESOLVED_ATTRIBUTE_MISSING_FROM_INPUT",
    "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED",
    "DELTA_AGGREGATION_NOT_SUPPORTED",
    "DELTA_UNSUPPORTED_SUBQUERY",
    "DELTA_CONFLICT_SET_COLUMN",
    "UNRESOLVED_COLUMN",
    "AMBIGUOUS_REFERENCE",
)


def _error_class(err: BaseException, failure: SparkFailure) -> str | None:
    """Delta's error class: the first ``DELTA_*`` class of the error's cause chain (Delta's under a wrapper
    of Spark's, such as ``TASK_WRITE_FAILED``), else the exception's own condition, else the outermost class
    its messages give, else a ``DELTA_*`` name in its text (PySpark can hide it behind INTERNAL_ERROR)."""
    delta = next((c for c in failure.classes if c.startswith("DELTA_")), None)
    if delta is not None:
        return delta
    condition = err.getCondition() if isinstance(err, PySparkException) else None
    if condition not in (None, "INTERNAL_ERROR"):
        return condition
    if failure.error_class not in (None, "INTERNAL_ERROR"):
        return failure.error_class
    named = re.search(r"\bDELTA_[A-Z0-9_]+", str(err))
    return named.group(0) if named else condition
