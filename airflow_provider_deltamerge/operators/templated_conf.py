"""The Spark conf keys whose value may come from a template: keys that tune a merge, never ones loading code.

``conf`` is a templated field, and a value rendered from run conf or params is set by whoever triggers the
DAG. Keys such as ``spark.jars``, ``spark.driver.extraJavaOptions``, ``spark.plugins`` or a catalog's class
run code of that user's choosing in the job, so only the keys below may be templated; any key may still be
set to a literal value in the DAG file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_deltamerge.exceptions import MergeSpecError

TEMPLATABLE_CONF_KEYS = frozenset(
    {
        "spark.app.name",
        "spark.driver.cores",
        "spark.driver.memory",
        "spark.executor.cores",
        "spark.executor.instances",
        "spark.executor.memory",
        "spark.dynamicAllocation.maxExecutors",
        "spark.dynamicAllocation.minExecutors",
        "spark.sql.ansi.enabled",
        "spark.sql.caseSensitive",
        "spark.sql.files.maxPartitionBytes",
        "spark.sql.session.timeZone",
        "spark.sql.shuffle.partitions",
        "spark.sql.storeAssignmentPolicy",
        "spark.sql.adaptive.enabled",
        "spark.sql.autoBroadcastJoinThreshold",
        "spark.databricks.delta.skipRecordingEmptyCommits",
        "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag",
    }
)
# Delta's merge and schema-evolution settings: flags and numbers. Not all of spark.databricks.delta.*: some
# of Delta's keys name classes (a log store, for one).
TEMPLATABLE_CONF_PREFIXES = ("spark.databricks.delta.merge.", "spark.databricks.delta.schema.autoMerge.")
TEMPLATED_CONF_REFUSED = "DELTAMERGE_TEMPLATED_CONF_REFUSED"
_MARKERS = ("{{", "{%")


def templated_keys(conf: Mapping[str, Any]) -> frozenset[str]:
    """The keys of ``conf`` (before rendering) whose value is a template."""
    return frozenset(k for k, v in conf.items() if isinstance(v, str) and any(m in v for m in _MARKERS))


def check_templated_conf(keys: frozenset[str]) -> None:
    """Refuse templated values for keys that are not known to be harmless.

    Raises:
        MergeSpecError: TEMPLATED_CONF_REFUSED, naming every such key.
    """
    refused = sorted(
        k for k in keys if k not in TEMPLATABLE_CONF_KEYS and not k.startswith(TEMPLATABLE_CONF_PREFIXES)
    )
    if refused:
        raise MergeSpecError(
            f"The Spark conf {', '.join(refused)} may not take a templated value: whoever triggers the DAG "
            "would set it, and it can load code into the job. Set it to a literal value in the DAG file.",
            error_class=TEMPLATED_CONF_REFUSED,
        )
