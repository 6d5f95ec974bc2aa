"""What a merge may check between writing its files and committing them: metric bounds and dry runs.

Only this engine holds a merge's metrics before the commit: a merge whose metrics break the author's
bounds ("never delete more than 1 % of the table") commits nothing, and a dry run reports what it would
commit without committing. In both cases the files it wrote are deleted by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_deltamerge.delta.commit.added_files import WrittenFile
from airflow_provider_deltamerge.delta.log.commit_match import MetricBounds
from airflow_provider_deltamerge.delta.log.snapshot import DataFile
from airflow_provider_deltamerge.exceptions import MergeGuardError

BOUNDS_BROKEN = "DELTAMERGE_METRIC_BOUNDS_BROKEN"


def check_bounds(bounds: MetricBounds | None, metrics: Mapping[str, Any], target: str) -> None:
    """Raise if ``metrics`` break any of ``bounds``; every broken bound is listed.

    Raises:
        MergeGuardError: DELTAMERGE_METRIC_BOUNDS_BROKEN, a final error (the same source breaks them again).
    """
    broken = bounds.broken(metrics) if bounds is not None else []
    if not broken:
        return
    listed = "\n".join(f"  {n}. {reason}" for n, reason in enumerate(broken, start=1))
    raise MergeGuardError(
        f"The merge into {target} breaks {len(broken)} of its {len(bounds.bounds) if bounds else 0} metric "
        f"bounds, so nothing was committed and its files were deleted:\n{listed}\n"
        "Look at the merge's source, or widen the bounds if this change is expected.",
        error_class=BOUNDS_BROKEN,
    )


def dry_run_report(
    *,
    executor: str,
    removed: Sequence[DataFile],
    added: Sequence[WrittenFile],
    new_columns: Sequence[str],
    marked: Sequence[DataFile] = (),
) -> dict[str, Any]:
    """What a merge would commit: the files it would rewrite (or, writing deletion vectors, remove whole) and
    their bytes, the files it would keep under a new deletion vector (``marked``), the partitions it would
    touch, the executor it chose and the columns schema evolution would add."""
    touched = {f.partition_values for f in removed if f.partition_values} | {
        f.partition_values for f in added if f.partition_values
    }
    kept = {f.log_path for f in marked}
    rewritten = [f for f in removed if f.log_path not in kept]
    return {
        "executor": executor,
        "filesToRewrite": sorted(f.log_path for f in rewritten),
        "bytesToRewrite": sum(f.size for f in rewritten),
        "filesToMarkWithDeletionVectors": sorted(kept),
        "filesToAdd": len(added),
        "bytesToAdd": sum(f.size for f in added),
        "partitionsToTouch": _partitions(touched),
        "newColumns": list(new_columns),
    }


def _partitions(touched: set[tuple[tuple[str, str | None], ...]]) -> list[dict[str, str | None]]:
    return [dict(values) for values in sorted(touched, key=lambda v: [(k, x or "") for k, x in v])]
