"""The Spark and Delta session confs that change what a MERGE does, read as Delta reads them.

A Delta user sets these in the Spark conf (the operator's ``conf=``); each one here changes the merge as
it changes Delta's (``DeltaSQLConf``, ``SQLConf``). A ``spark.databricks.delta.*`` conf that the engine
does not honour is named in a warning at the start of the merge, never ignored silently.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from airflow_provider_deltamerge.delta.log.auto_compaction import AUTO_COMPACT_CONF
from airflow_provider_deltamerge.session_kind import conf_keys
from airflow_provider_deltamerge.spec.preflight import AUTO_MERGE_CONF, CASE_SENSITIVE_CONF

log = logging.getLogger(__name__)

AUTO_MERGE = AUTO_MERGE_CONF
SKIP_EMPTY_COMMITS = "spark.databricks.delta.skipRecordingEmptyCommits"
OPTIMIZE_INSERT_ONLY = "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled"
CASTING_FOLLOWS_ANSI = "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag"
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"
MATERIALIZE_STORAGE_LEVEL = "spark.databricks.delta.merge.materializeSource.rddStorageLevel"
MATERIALIZE_UNREADABLE = "spark.databricks.delta.merge.forceSourceMaterializationWithUnreadableFilesConfig"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
CASE_SENSITIVE = CASE_SENSITIVE_CONF
ANSI_ENABLED = "spark.sql.ansi.enabled"
STORE_ASSIGNMENT_POLICY = "spark.sql.storeAssignmentPolicy"

# The spark.databricks.delta.* confs the engine honours (listed in docs/semantics.md, "Session confs").
HONOURED_DELTA_CONFS = frozenset(
    {
        AUTO_MERGE,
        SKIP_EMPTY_COMMITS,
        OPTIMIZE_INSERT_ONLY,
        CASTING_FOLLOWS_ANSI,
        MATERIALIZE_SOURCE,
        MATERIALIZE_STORAGE_LEVEL,
        MATERIALIZE_UNREADABLE,
        USER_METADATA,
        AUTO_COMPACT_CONF,  # false lets the engine merge into a table that asks for auto compaction
    }
)


# Confs Delta's own runtime writes into the session (after each of its commits), which no user sets: in a
# session where Delta also ran, they are its bookkeeping, not a setting the engine ignores.
DELTA_SESSION_RECORDS = frozenset({"spark.databricks.delta.lastCommitVersionInSession"})


def flag(spark: SparkSession, key: str, *, default: bool) -> bool:
    """A boolean conf of the session, ``default`` when it is not set."""
    value = spark.conf.get(key, None)
    return default if value is None else value.strip().lower() == "true"


def auto_merge(spark: SparkSession) -> bool:
    """Schema evolution for every merge of the session, as ``WITH SCHEMA EVOLUTION`` gives one merge."""
    return flag(spark, AUTO_MERGE, default=False)


def skip_empty_commits(spark: SparkSession) -> bool:
    """A merge that changes nothing makes no commit (Delta's default); false: it commits its metrics."""
    return flag(spark, SKIP_EMPTY_COMMITS, default=True)


def optimize_insert_only(spark: SparkSession) -> bool:
    """Merges with only NOT MATCHED clauses take the insert-only path (no multiple-match check)."""
    return flag(spark, OPTIMIZE_INSERT_ONLY, default=True)


def case_sensitive(spark: SparkSession) -> bool:
    """Column names match case-sensitively (Spark's ``spark.sql.caseSensitive``, false by default)."""
    return flag(spark, CASE_SENSITIVE, default=False)


def casting_follows_ansi(spark: SparkSession) -> bool:
    """UPDATE and MERGE cast as ``spark.sql.ansi.enabled`` says instead of the store assignment policy."""
    return flag(spark, CASTING_FOLLOWS_ANSI, default=False)


def ansi_enabled(spark: SparkSession) -> bool:
    return flag(spark, ANSI_ENABLED, default=True)


def warn_ignored_delta_confs(spark: SparkSession) -> list[str]:
    """Log a warning naming each ``spark.databricks.delta.*`` conf set on the session that the engine does
    not honour; the names warned about."""
    keys = conf_keys(spark)
    ignored = sorted(
        key
        for key in keys
        if key.startswith("spark.databricks.delta.")
        and key not in HONOURED_DELTA_CONFS
        and key not in DELTA_SESSION_RECORDS
    )
    for key in ignored:
        log.warning(
            "%s is set but this engine does not honour it; the merge runs as without it (the confs it "
            "honours: docs/semantics.md, Session confs)",
            key,
        )
    return ignored
