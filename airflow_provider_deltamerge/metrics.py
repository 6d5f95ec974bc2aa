"""Delta's MERGE metrics: names and meanings declared once, and the recorder the engine fills.

Names and one-line descriptions are Delta Lake's (``MergeIntoCommandBase.baseMetrics``). Downstream tasks
read these keys from XCom: renaming one is a breaking change.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

NUM_SOURCE_ROWS = "numSourceRows"
NUM_SOURCE_ROWS_IN_SECOND_SCAN = "numSourceRowsInSecondScan"
NUM_TARGET_ROWS_INSERTED = "numTargetRowsInserted"
NUM_TARGET_ROWS_UPDATED = "numTargetRowsUpdated"
NUM_TARGET_ROWS_MATCHED_UPDATED = "numTargetRowsMatchedUpdated"
NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_UPDATED = "numTargetRowsNotMatchedBySourceUpdated"
NUM_TARGET_ROWS_DELETED = "numTargetRowsDeleted"
NUM_TARGET_ROWS_MATCHED_DELETED = "numTargetRowsMatchedDeleted"
NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_DELETED = "numTargetRowsNotMatchedBySourceDeleted"
NUM_TARGET_ROWS_COPIED = "numTargetRowsCopied"
NUM_OUTPUT_ROWS = "numOutputRows"
NUM_TARGET_FILES_BEFORE_SKIPPING = "numTargetFilesBeforeSkipping"
NUM_TARGET_FILES_AFTER_SKIPPING = "numTargetFilesAfterSkipping"
NUM_TARGET_BYTES_BEFORE_SKIPPING = "numTargetBytesBeforeSkipping"
NUM_TARGET_BYTES_AFTER_SKIPPING = "numTargetBytesAfterSkipping"
NUM_TARGET_PARTITIONS_AFTER_SKIPPING = "numTargetPartitionsAfterSkipping"
NUM_TARGET_PARTITIONS_REMOVED_FROM = "numTargetPartitionsRemovedFrom"
NUM_TARGET_PARTITIONS_ADDED_TO = "numTargetPartitionsAddedTo"
NUM_TARGET_FILES_REMOVED = "numTargetFilesRemoved"
NUM_TARGET_BYTES_REMOVED = "numTargetBytesRemoved"
NUM_TARGET_FILES_ADDED = "numTargetFilesAdded"
NUM_TARGET_BYTES_ADDED = "numTargetBytesAdded"
NUM_TARGET_CHANGE_FILES_ADDED = "numTargetChangeFilesAdded"
NUM_TARGET_CHANGE_FILE_BYTES = "numTargetChangeFileBytes"
NUM_TARGET_DELETION_VECTORS_ADDED = "numTargetDeletionVectorsAdded"
NUM_TARGET_DELETION_VECTORS_REMOVED = "numTargetDeletionVectorsRemoved"
NUM_TARGET_DELETION_VECTORS_UPDATED = "numTargetDeletionVectorsUpdated"
EXECUTION_TIME_MS = "executionTimeMs"
MATERIALIZE_SOURCE_TIME_MS = "materializeSourceTimeMs"
SCAN_TIME_MS = "scanTimeMs"
REWRITE_TIME_MS = "rewriteTimeMs"

METRIC_DESCRIPTIONS: Mapping[str, str] = {
    NUM_SOURCE_ROWS: "number of source rows",
    NUM_SOURCE_ROWS_IN_SECOND_SCAN: "number of source rows (during repeated scan)",
    NUM_TARGET_ROWS_INSERTED: "number of inserted rows",
    NUM_TARGET_ROWS_UPDATED: "number of updated rows",
    NUM_TARGET_ROWS_MATCHED_UPDATED: "number of rows updated by a matched clause",
    NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_UPDATED: "number of rows updated by a not matched by source clause",
    NUM_TARGET_ROWS_DELETED: "number of deleted rows",
    NUM_TARGET_ROWS_MATCHED_DELETED: "number of rows deleted by a matched clause",
    NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_DELETED: "number of rows deleted by a not matched by source clause",
    NUM_TARGET_ROWS_COPIED: "number of target rows rewritten unmodified",
    NUM_OUTPUT_ROWS: "number of output rows (inserted + updated + copied)",
    NUM_TARGET_FILES_BEFORE_SKIPPING: "number of target files before skipping",
    NUM_TARGET_FILES_AFTER_SKIPPING: "number of target files after skipping",
    NUM_TARGET_BYTES_BEFORE_SKIPPING: "number of target bytes before skipping",
    NUM_TARGET_BYTES_AFTER_SKIPPING: "number of target bytes after skipping",
    NUM_TARGET_PARTITIONS_AFTER_SKIPPING: "number of target partitions after skipping",
    NUM_TARGET_PARTITIONS_REMOVED_FROM: "number of target partitions from which files were removed",
    NUM_TARGET_PARTITIONS_ADDED_TO: "number of target partitions to which files were added",
    NUM_TARGET_FILES_REMOVED: "number of files removed to target",
    NUM_TARGET_BYTES_REMOVED: "number of target bytes removed",
    NUM_TARGET_FILES_ADDED: "number of files added to target",
    NUM_TARGET_BYTES_ADDED: "number of target bytes added",
    NUM_TARGET_CHANGE_FILES_ADDED: "number of change data capture files generated",
    NUM_TARGET_CHANGE_FILE_BYTES: "total size of change data capture files generated",
    NUM_TARGET_DELETION_VECTORS_ADDED: "number of deletion vectors added",
    NUM_TARGET_DELETION_VECTORS_REMOVED: "number of deletion vectors removed",
    NUM_TARGET_DELETION_VECTORS_UPDATED: "number of deletion vectors updated",
    EXECUTION_TIME_MS: "time taken to execute the entire operation",
    MATERIALIZE_SOURCE_TIME_MS: "time taken to materialize source (or determine it's not needed)",
    SCAN_TIME_MS: "time taken to scan the files for matches",
    REWRITE_TIME_MS: "time taken to rewrite the matched files",
}

# Not Delta metrics: what the operator adds next to them in its XCom value.
TABLE_VERSION = "tableVersion"
EXECUTOR = "executor"
SPEC_HASH = "specHash"
DRY_RUN = "dryRun"  # a dry run's report of what it would have committed

# The row a MERGE INTO statement returns (MergeIntoCommand.output), also in the XCom value.
NUM_AFFECTED_ROWS = "num_affected_rows"
NUM_UPDATED_ROWS = "num_updated_rows"
NUM_DELETED_ROWS = "num_deleted_rows"
NUM_INSERTED_ROWS = "num_inserted_rows"


# A metric's value: None where the backend that ran the merge did not measure it (Delta's own MERGE keeps
# some metrics in its Spark SQL metrics only, never in its commit), so no consumer reads a made-up 0.
MetricValue = int | None


def declared_metrics(values: Mapping[str, Any]) -> dict[str, MetricValue]:
    """``values`` (ints, or strings as a commit's ``operationMetrics`` holds them) as the declared metrics:
    every declared name, None where ``values`` says None (not measured), 0 where it has no value (a commit
    made before the metric was declared); others left out; ``numOutputRows`` derived."""
    recorder = MetricsRecorder()
    not_measured = []
    for name, value in values.items():
        if name not in METRIC_DESCRIPTIONS:
            continue
        if value is None:
            not_measured.append(name)
        else:
            recorder.set(name, int(value))
    return {**recorder.freeze(), **dict.fromkeys(not_measured)}


def merge_result(
    metrics: Mapping[str, MetricValue],
    *,
    version: int,
    executor: Any,
    spec_hash: Any,
    runs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The operator's XCom value for a merge: Delta's metrics, the statement's result row (affected =
    updated + deleted + inserted, as ``MergeIntoCommand`` returns it), the table version, executor and spec
    hash, and the attempts (``attempts_report`` of ``runs``, the job's count or the commit's record). The
    same keys whether the job just merged or a retry found the commit, whichever backend made it
    (``declared_metrics``)."""
    declared = declared_metrics(metrics)
    # Both backends measure the row counts (they are in every MERGE commit), so none of these is None.
    updated, deleted, inserted = (
        declared[NUM_TARGET_ROWS_UPDATED] or 0,
        declared[NUM_TARGET_ROWS_DELETED] or 0,
        declared[NUM_TARGET_ROWS_INSERTED] or 0,
    )
    return {
        **declared,
        NUM_AFFECTED_ROWS: updated + deleted + inserted,
        NUM_UPDATED_ROWS: updated,
        NUM_DELETED_ROWS: deleted,
        NUM_INSERTED_ROWS: inserted,
        TABLE_VERSION: version,
        EXECUTOR: executor,
        SPEC_HASH: spec_hash,
        **attempts_report(declared, runs or {}),
    }


# Runs of the merge (more than 1 after conflicting concurrent commits), and the time from the start of the
# first to the end of the last; ``executionTimeMs`` is the last run's alone, as in Delta.
MERGE_ATTEMPTS = "attempts"
ALL_ATTEMPTS_TIME_MS = "allAttemptsTimeMs"
# In commitInfo, next to the attempt number: from the start of the first run to the start of the last.
EARLIER_ATTEMPTS_TIME_MS = "earlierAttemptsTimeMs"
# The headline a person reads first: row counts, files, duration (``readable``).
SUMMARY = "summary"
HEADLINE = (
    SUMMARY,
    NUM_TARGET_ROWS_INSERTED,
    NUM_TARGET_ROWS_UPDATED,
    NUM_TARGET_ROWS_DELETED,
    NUM_TARGET_ROWS_COPIED,
    NUM_TARGET_FILES_REMOVED,
    NUM_TARGET_FILES_ADDED,
    EXECUTION_TIME_MS,
    MERGE_ATTEMPTS,
    ALL_ATTEMPTS_TIME_MS,
    TABLE_VERSION,
)


def count_partitions(partition_values: Iterable[Hashable]) -> int:
    """Distinct partitions among files' partition values (empty for an unpartitioned table's files), as
    Delta's ``totalBytesAndDistinctPartitionValues`` counts them: 0 for an unpartitioned table."""
    return len({values for values in partition_values if values})


class MetricsRecorder:
    """Collects one merge's metrics; every metric starts at 0 so the XCom value always has every key."""

    def __init__(self) -> None:
        self._values: dict[str, int] = dict.fromkeys(METRIC_DESCRIPTIONS, 0)

    def set(self, name: str, value: int) -> None:
        self._check(name)
        self._values[name] = int(value)

    def add(self, name: str, value: int) -> None:
        self._check(name)
        self._values[name] += int(value)

    def __getitem__(self, name: str) -> int:
        return self._values[name]

    def absorb(self, other: MetricsRecorder) -> None:
        """Add every metric ``other`` recorded (a part of the merge recorded apart until it was kept)."""
        for name, value in other._values.items():
            self._values[name] += value

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Add the wall-clock milliseconds of the ``with`` block to ``name`` (at least 1 when it ran)."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(name, max(1, round((time.monotonic() - start) * 1000)))

    def freeze(self) -> dict[str, int]:
        """The final metrics, with ``numOutputRows`` derived as Delta derives it."""
        values = dict(self._values)
        values[NUM_OUTPUT_ROWS] = (
            values[NUM_TARGET_ROWS_INSERTED]
            + values[NUM_TARGET_ROWS_UPDATED]
            + values[NUM_TARGET_ROWS_COPIED]
        )
        return values

    @staticmethod
    def _check(name: str) -> None:
        if name not in METRIC_DESCRIPTIONS:
            raise KeyError(f"{name} is not a declared merge metric (see metrics.py)")


def attempts_report(metrics: Mapping[str, Any], runs: Mapping[str, Any]) -> dict[str, int]:
    """``attempts`` and ``allAttemptsTimeMs`` of a merge from the record of its runs (its commitInfo, or the
    job's count); a merge recorded before attempts were (or by Delta's own MERGE) counts as one run."""
    return {
        MERGE_ATTEMPTS: int(runs.get(MERGE_ATTEMPTS) or 1),
        ALL_ATTEMPTS_TIME_MS: int(runs.get(EARLIER_ATTEMPTS_TIME_MS) or 0)
        + int(metrics.get(EXECUTION_TIME_MS) or 0),
    }


def summary_line(report: Mapping[str, Any]) -> str:
    """One line a person reads first: rows inserted, updated, deleted, copied; files rewritten; duration.

    E.g. ``100 inserted, 100 updated, 0 deleted, 900 copied rows; 1 file rewritten, 1 added; 4.2 s``, with
    ``(2 attempts, 9.8 s in all)`` after a conflict made the merge run again.
    """

    def count(name: str) -> int:
        return int(report.get(name) or 0)

    def seconds(name: str) -> str:
        return f"{count(name) / 1000:.1f} s"

    rewritten = count(NUM_TARGET_FILES_REMOVED)
    line = (
        f"{count(NUM_TARGET_ROWS_INSERTED)} inserted, {count(NUM_TARGET_ROWS_UPDATED)} updated, "
        f"{count(NUM_TARGET_ROWS_DELETED)} deleted, {count(NUM_TARGET_ROWS_COPIED)} copied rows; "
        f"{rewritten} file{'' if rewritten == 1 else 's'} rewritten, {count(NUM_TARGET_FILES_ADDED)} added; "
        f"{seconds(EXECUTION_TIME_MS)}"
    )
    if count(MERGE_ATTEMPTS) > 1:
        line += f" ({count(MERGE_ATTEMPTS)} attempts, {seconds(ALL_ATTEMPTS_TIME_MS)} in all)"
    return line


def readable(report: Mapping[str, Any]) -> dict[str, Any]:
    """``report`` with its ``summary`` line and the headline metrics first, then the others by name."""
    ordered = {SUMMARY: summary_line(report)}
    ordered.update({name: report[name] for name in HEADLINE if name in report})
    ordered.update({name: report[name] for name in sorted(report) if name not in ordered})
    return ordered
