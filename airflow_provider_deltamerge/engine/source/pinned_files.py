"""The files a path source reads, pinned: a merge may read them twice instead of materializing them.

Spark lists a path source's files once, when the source is loaded, and every later read of that DataFrame
reads the same list. Its rows can then differ between the merge's reads only if a listed file is rewritten
in place, which its size or modification time shows. The engine records both for every file when the
source is loaded and compares them again once the merge has read the source for the last time: a changed
file fails the merge before anything is committed. Such a source need not be copied (Delta materializes
every source that is not a Delta table), and phase 1 reads only the columns it needs from the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.spec import MergeSource, PathSource

# Beyond this many files the statuses cost more round trips than materializing saves: the source is
# materialized as Delta does.
MAX_PINNED_FILES = 256
# File statuses are fetched in parallel: on an object store each is a request.
_STATUS_THREADS = 8


@dataclass(frozen=True)
class PinnedFiles:
    """Each file of a path source with its (size, modification time) when the source was loaded."""

    statuses: Mapping[str, tuple[int, int] | None]  # None: the file was gone already
    _spark: SparkSession

    def check_unchanged(self) -> None:
        """Fail when a file changed since the source was loaded (its reads may have seen other rows).

        Raises:
            MergeExecutionError: naming the changed files and what to do.
        """
        now = _statuses(self._spark, list(self.statuses))
        changed = sorted(path for path, status in self.statuses.items() if now[path] != status)
        if changed:
            raise MergeExecutionError(
                f"The merge source's files changed while the merge read them: {', '.join(changed[:3])}"
                f"{f' and {len(changed) - 3} more' if len(changed) > 3 else ''}. Its reads may have seen "
                "different rows, so nothing was committed. Run the merge again once the files are "
                "complete, or set spark.databricks.delta.merge.materializeSource to all to copy the source "
                "once before reading it."
            )


def pin_source_files(spark: SparkSession, source: MergeSource, rows: DataFrame) -> PinnedFiles | None:
    """The files ``rows`` (the loaded ``source``) reads, pinned; None when the source is not a path source
    of files (a query, a table, a Delta path), has more than ``MAX_PINNED_FILES`` files, or the session
    cannot see file statuses (Spark Connect)."""
    if not isinstance(source, PathSource) or source.format == "delta" or getattr(spark, "_jvm", None) is None:
        return None
    listed: Any = rows._jdf.inputFiles()
    if len(listed) > MAX_PINNED_FILES:
        return None
    return PinnedFiles(_statuses(spark, list(listed)), spark)


def _statuses(spark: SparkSession, paths: list[str]) -> dict[str, tuple[int, int] | None]:
    """(size, modification time) of each file as Spark's Hadoop file systems see it; None when gone."""
    jvm: Any = spark._jvm
    conf = spark._jsc.hadoopConfiguration()

    def status(path: str) -> tuple[int, int] | None:
        hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
        filesystem = hadoop_path.getFileSystem(conf)
        if not filesystem.exists(hadoop_path):
            return None
        found = filesystem.getFileStatus(hadoop_path)
        return int(found.getLen()), int(found.getModificationTime())

    with ThreadPoolExecutor(max_workers=_STATUS_THREADS) as pool:
        return dict(zip(paths, pool.map(status, paths), strict=True))
