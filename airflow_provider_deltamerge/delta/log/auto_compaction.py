"""Delta's auto compaction, which the engine does not do.

On a table that asks for it, Delta 4.4 follows every write that commits (a MERGE too) with an OPTIMIZE
commit of its own (``"auto": "true"`` in its parameters) that compacts the small files of the partitions
the write added to: its ``Auto Compact`` post-commit hook. The engine writes no such commit, so it refuses
the merge before any work (``check_no_auto_compaction``), and ``backend="auto"`` runs it on Delta's runtime
where the session has it (``engine/backends/delta_spark.py``). With the session conf set to false Delta
skips the compaction too, and so the engine may merge.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_provider_deltamerge.delta.log.protocol import is_true
from airflow_provider_deltamerge.exceptions import TargetTableError

AUTO_COMPACT_CONF = "spark.databricks.delta.autoCompact.enabled"
AUTO_COMPACT_KEY = "delta.autoOptimize.autoCompact"
# The deprecated table property that turned auto compaction on before AUTO_COMPACT_KEY
# (DeltaConfigs.AUTO_OPTIMIZE).
LEGACY_AUTO_OPTIMIZE_KEY = "delta.autoOptimize"
ERROR_CLASS = "DELTAMERGE_AUTO_COMPACTION_UNSUPPORTED"
# How the table's need is named beside the features only Delta's runtime writes.
AUTO_COMPACTION = "auto compaction"


def compacts_after_writes(configuration: Mapping[str, str | None], session_value: str | None) -> bool:
    """Whether Delta compacts after a write to a table with ``configuration``, in a session whose
    ``spark.databricks.delta.autoCompact.enabled`` is ``session_value`` (None: not set).

    Delta's order (``AutoCompactBase.getAutoCompactType``): the session conf when set, else the deprecated
    ``delta.autoOptimize`` when true, else ``delta.autoOptimize.autoCompact``; disabled when none is set.
    """
    if session_value is not None:
        return is_true(session_value)
    return any(is_true(configuration.get(key)) for key in (LEGACY_AUTO_OPTIMIZE_KEY, AUTO_COMPACT_KEY))


def check_no_auto_compaction(
    table_uri: str, configuration: Mapping[str, str | None], session_value: str | None
) -> None:
    """Refuse a merge that Delta would follow with an auto compaction, naming the way out.

    Raises:
        TargetTableError: DELTAMERGE_AUTO_COMPACTION_UNSUPPORTED.
    """
    if not compacts_after_writes(configuration, session_value):
        return
    asked_by = f"{AUTO_COMPACT_CONF}=true" if session_value is not None else _asking_property(configuration)
    raise TargetTableError(
        f"The merge into {table_uri} was refused before reading any data: auto compaction is on "
        f"({asked_by}). Delta's runtime follows a merge that commits with an OPTIMIZE commit of the small "
        "files in the partitions it wrote, which this engine does not write. Run the merge on "
        'Delta\'s own runtime: backend="delta-spark" (backend="auto" chooses it where the session has '
        f"Delta's runtime); or set {AUTO_COMPACT_CONF}=false in the merge's Spark conf, with which Delta "
        "skips the compaction too, and compact with OPTIMIZE when it suits you.",
        error_class=ERROR_CLASS,
    )


def _asking_property(configuration: Mapping[str, str | None]) -> str:
    key = next(k for k in (LEGACY_AUTO_OPTIMIZE_KEY, AUTO_COMPACT_KEY) if is_true(configuration.get(k)))
    return f"{key}={configuration[key]}"
