"""Materialize the merge source once when it might not give the same rows to every scan (Delta's
``MergeIntoMaterializeSource``).

The classic and matched-only executors read the source twice (find touched files, then rewrite), and
pruning by source keys reads it once more. A source that changes between those reads makes a merge insert
rows it should have updated (delta#527). ``spark.databricks.delta.merge.materializeSource`` decides, with
Delta's values and rules:

* ``all``: always materialize; ``none``: never; any other value: materialize (Delta's failsafe);
* ``auto`` (default): not when the source is read once (the insert-only executor, and pruning reads no
  source keys); else materialize when the source reads something other than a Delta table, has an operator
  other than a deterministic project/filter/union/distinct, reads files while Spark is told to skip
  unreadable ones, or calls a user-defined function.

A source given as a Delta path counts as a Delta scan: it is read from one pinned snapshot's files; so does
a ``delta.`path``` table inside a source query, read the same way (``source_delta_tables.py``). The
rules look at the source as given, before ``deduplicate_source_by``, which is deterministic by construction.
Materializing is Delta's: an eager ``localCheckpoint`` at ``...materializeSource.rddStorageLevel``
(``DISK_ONLY``), released when the merge is done, also when it failed. A source to materialize whose keys
no file can hold is first offered to the append path, which writes it as read (``execute/append.py``),
unless it is small enough to be held on the driver (``held.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine.observed import observe, observed, observed_by_command
from airflow_provider_deltamerge.engine.plan.planning import MergePlan
from airflow_provider_deltamerge.engine.plan.pruning import reads_source
from airflow_provider_deltamerge.engine.session_confs import (
    MATERIALIZE_SOURCE,
    flag,
)
from airflow_provider_deltamerge.engine.session_confs import (
    MATERIALIZE_STORAGE_LEVEL as STORAGE_LEVEL,
)
from airflow_provider_deltamerge.engine.session_confs import (
    MATERIALIZE_UNREADABLE as FORCE_WITH_UNREADABLE_FILES,
)
from airflow_provider_deltamerge.engine.source.delta_tables import VIEW_PREFIX
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.metrics import MetricsRecorder
from airflow_provider_deltamerge.session_kind import is_connect
from airflow_provider_deltamerge.spec import MergeSource, PathSource

log = logging.getLogger(__name__)

IGNORE_UNREADABLE_FILES = ("spark.sql.files.ignoreMissingFiles", "spark.sql.files.ignoreCorruptFiles")
_IGNORE_UNREADABLE_OPTIONS = ("ignoreMissingFiles", "ignoreCorruptFiles")
# Plan nodes Delta lets through its determinism check (besides Delta scans and a one-row relation).
_PASS_THROUGH_NODES = ("Distinct", "Project", "Filter", "Union", "SubqueryAlias")

# Delta's MergeIntoMaterializeSourceReason values, logged with the decision.
MATERIALIZE_ALL = "materializeAll"
NOT_MATERIALIZED_NONE = "notMaterializedNone"
NOT_MATERIALIZED_AUTO_INSERT_ONLY = "notMaterializedAutoInsertOnly"
NON_DETERMINISTIC_SOURCE_NON_DELTA = "materializeNonDeterministicSourceNonDelta"
NON_DETERMINISTIC_SOURCE_OPERATORS = "materializeNonDeterministicSourceOperators"
IGNORE_UNREADABLE_FILES_CONFIGS_ARE_SET = "materializeIgnoreUnreadableFilesConfigsAreSet"
NON_DETERMINISTIC_SOURCE_WITH_DETERMINISTIC_UDF = "materializeNonDeterministicSourceWithDeterministicUdf"
NOT_MATERIALIZED_AUTO = "notMaterializedAuto"
INVALID_CONFIG = "invalidConfigurationFailsafe"


class Materialization(NamedTuple):
    """Whether a merge materializes its source, and Delta's ``MergeIntoMaterializeSourceReason`` for it."""

    materialize: bool
    reason: str


@dataclass(frozen=True)
class SourceTraits:
    """What Delta's ``auto`` rules ask of a source, answered once from its analyzed plan."""

    reads_only_delta: bool  # every leaf is a Delta scan (or a one-row relation)
    deterministic: bool  # only deterministic project/filter/union/distinct over those leaves
    ignores_unreadable_files: bool  # Spark may silently skip a file between two reads
    calls_udf: bool  # a user-defined function, which may be wrongly marked deterministic


def should_materialize(mode: str, *, read_once: bool, traits: SourceTraits) -> Materialization:
    """Delta's ``shouldMaterializeSource``: whether to materialize, and Delta's reason for the answer.

    Args:
        mode: the value of ``spark.databricks.delta.merge.materializeSource`` (case-insensitive).
        read_once: the merge reads the source only once.
        traits: the source's traits.
    """
    match mode.strip().lower():
        case "all":
            return Materialization(True, MATERIALIZE_ALL)
        case "none":
            return Materialization(False, NOT_MATERIALIZED_NONE)
        case "auto":
            pass
        case _:
            return Materialization(True, INVALID_CONFIG)
    if read_once:
        return Materialization(False, NOT_MATERIALIZED_AUTO_INSERT_ONLY)
    if not traits.reads_only_delta:
        return Materialization(True, NON_DETERMINISTIC_SOURCE_NON_DELTA)
    if not traits.deterministic:
        return Materialization(True, NON_DETERMINISTIC_SOURCE_OPERATORS)
    if traits.ignores_unreadable_files:
        return Materialization(True, IGNORE_UNREADABLE_FILES_CONFIGS_ARE_SET)
    if traits.calls_udf:
        return Materialization(True, NON_DETERMINISTIC_SOURCE_WITH_DETERMINISTIC_UDF)
    return Materialization(False, NOT_MATERIALIZED_AUTO)


def source_traits(spark: SparkSession, source: MergeSource, rows: DataFrame) -> SourceTraits:
    """The traits of ``rows``, the source as ``source`` describes it (before de-duplication).

    A Connect client cannot walk the plan: a source other than a Delta path then counts as reading more
    than Delta tables, so the merge materializes it, as Delta does with any source it cannot prove stable.
    """
    ignores = any(flag(spark, conf, default=False) for conf in IGNORE_UNREADABLE_FILES) and flag(
        spark, FORCE_WITH_UNREADABLE_FILES, default=True
    )
    delta_path = isinstance(source, PathSource) and source.format == "delta"
    if is_connect(spark):
        return SourceTraits(delta_path, delta_path, ignores, calls_udf=False)
    plan = rows._jdf.queryExecution().analyzed()
    ignores = ignores or any(_relation_ignores_unreadable_files(node) for node in _nodes(plan))
    if delta_path:
        # Read from the exact files of one snapshot: Delta's own scan, whatever plan reads them.
        return SourceTraits(True, True, ignores, calls_udf=False)
    return SourceTraits(
        reads_only_delta=not _has_non_delta_leaf(plan),
        deterministic=_is_deterministic(spark, plan),
        ignores_unreadable_files=ignores,
        calls_udf=any(_calls_udf(spark, e) for node in _nodes(plan) for e in _seq(node.expressions())),
    )


def reads_source_once(spark: SparkSession, plan: MergePlan, source: DataFrame) -> bool:
    """Delta's insert-only exemption: only the insert-only executor reads the source once, and only when
    pruning needs no source keys (Delta has no such pruning; here it is one more read)."""
    return plan.executor == "insert_only" and not reads_source(spark, plan, source)


def materialization(
    spark: SparkSession, plan: MergePlan, loaded: DataFrame, rows: DataFrame, recorder: MetricsRecorder
) -> Materialization:
    """Whether the merge materializes its source ``rows`` (``loaded``, de-duplicated) by Delta's rules, and
    Delta's reason; timed into ``materializeSourceTimeMs``."""
    with recorder.timed(m.MATERIALIZE_SOURCE_TIME_MS):
        return should_materialize(
            spark.conf.get(MATERIALIZE_SOURCE, None) or "auto",
            read_once=reads_source_once(spark, plan, rows),
            traits=source_traits(spark, plan.spec.source, loaded),
        )


def prepare_merge_source(
    spark: SparkSession, rows: DataFrame, recorder: MetricsRecorder, *, decision: Materialization
) -> PreparedSource:
    """The source rows the executors read: ``rows``, materialized if the ``materialization`` ``decision``
    says so (timed into ``materializeSourceTimeMs``). The caller releases the result."""
    with recorder.timed(m.MATERIALIZE_SOURCE_TIME_MS):
        prepared = prepare_source(spark, rows, materialize=decision.materialize)
    log.info(
        "Source %s (%s)", "materialized" if decision.materialize else "not materialized", decision.reason
    )
    return prepared


class PreparedSource:
    """The source rows the merge reads; ``release`` frees what materializing them stored, if anything.

    ``row_count`` is the number of rows, counted while they were materialized; None when not materialized.
    ``held``: the rows themselves, where they are held on the driver too (``held.py``).
    """

    def __init__(
        self,
        rows: DataFrame,
        checkpoint: Any = None,
        row_count: int | None = None,
        held: pa.Table | None = None,
    ) -> None:
        self.rows = rows
        self.row_count = row_count
        self.held = held
        self._checkpoint = checkpoint  # the JVM RDD holding the materialized rows

    def release(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.unpersist(True)
            self._checkpoint = None


def prepare_source(spark: SparkSession, rows: DataFrame, *, materialize: bool) -> PreparedSource:
    """``rows``, materialized once when ``materialize`` says so.

    Raises:
        MergeExecutionError: the storage level conf names no Spark storage level.
    """
    if not materialize:
        return PreparedSource(rows)
    # Eager: a lazy checkpoint is written after the first job that uses it, which could still see
    # other rows than the checkpoint keeps. The rows are counted on the way (the phases choose their joins
    # by the source's size before they read it).
    counted, count = observe(rows, F.count(F.lit(1)).alias("rows"))
    checkpointed = counted.localCheckpoint(eager=True, storageLevel=_storage_level(spark))
    values = observed(count) or observed_by_command(counted, count)
    return PreparedSource(
        checkpointed,
        # Connect frees a checkpoint with its session (the job's own) or when the client drops the frame.
        None if is_connect(spark) else checkpointed._jdf.queryExecution().analyzed().rdd(),
        row_count=int(values["rows"]) if values is not None else None,
    )


def _storage_level(spark: SparkSession) -> StorageLevel:
    name = (spark.conf.get(STORAGE_LEVEL, None) or "DISK_ONLY").strip().upper()
    level = getattr(StorageLevel, name, None)
    if not isinstance(level, StorageLevel) or name == "NONE":
        known = sorted(
            n for n, v in vars(StorageLevel).items() if isinstance(v, StorageLevel) and n != "NONE"
        )
        raise MergeExecutionError(
            f"{STORAGE_LEVEL} is {name!r}, which is not a Spark storage level. Set it to one of "
            f"{', '.join(known)} (Delta's default is DISK_ONLY), or unset it.",
            error_class="INVALID_CONF_VALUE.REQUIREMENT",
        )
    return level


# --- The analyzed source plan, read through py4j -----------------------------------------------------------


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _kind(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def _nodes(plan: Any) -> list[Any]:
    """Every node of ``plan`` and of the plans of its subqueries."""
    found = [plan]
    for child in (*_seq(plan.children()), *_seq(plan.subqueries())):
        found += _nodes(child)
    return found


def _is_delta_scan(node: Any) -> bool:
    """A relation over a Delta log's file index (only in sessions that have Delta Lake's runtime), or the
    view over our reader's rows of a query's ``delta.`path```: one pinned snapshot's files, whatever plan
    (joins, local relations) reads them."""
    if _kind(node) == "View":
        return str(node.desc().identifier().table()).startswith(VIEW_PREFIX)
    if _kind(node) != "LogicalRelation" or _kind(node.relation()) != "HadoopFsRelation":
        return False
    return str(node.relation().location().getClass().getSimpleName()).startswith("Tahoe")


def _has_non_delta_leaf(plan: Any) -> bool:
    if _is_delta_scan(plan):
        return False
    children = _seq(plan.children())
    if not children and _kind(plan) != "OneRowRelation":
        return True
    return any(_has_non_delta_leaf(child) for child in (*children, *_seq(plan.subqueries())))


def _is_deterministic(spark: SparkSession, plan: Any) -> bool:
    """Delta's conservative check: deterministic projections and filters over Delta scans, nothing else."""
    if _is_delta_scan(plan) or _kind(plan) == "OneRowRelation":
        return True
    if _kind(plan) not in _PASS_THROUGH_NODES:
        return False
    jvm: Any = spark._jvm
    subquery = jvm.org.apache.spark.sql.catalyst.expressions.SubqueryExpression
    expressions_ok = all(
        e.deterministic() and not subquery.hasCorrelatedSubquery(e) for e in _seq(plan.expressions())
    )
    return (
        expressions_ok
        and all(_is_deterministic(spark, sub) for sub in _seq(plan.subqueries()))
        and all(_is_deterministic(spark, child) for child in _seq(plan.children()))
    )


def _calls_udf(spark: SparkSession, expression: Any) -> bool:
    jvm: Any = spark._jvm
    udf = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.expressions.UserDefinedExpression")
    pending = [expression]
    while pending:
        current = pending.pop()
        if udf.isInstance(current):
            return True
        pending += _seq(current.children())
    return False


def _relation_ignores_unreadable_files(node: Any) -> bool:
    if _kind(node) != "LogicalRelation" or _kind(node.relation()) != "HadoopFsRelation":
        return False
    options = node.relation().options()
    return any(str(options.get(key)) == "Some(true)" for key in _IGNORE_UNREADABLE_OPTIONS)
