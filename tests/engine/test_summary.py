"""The headline of a merge's metrics: what a person reads first in the task log, the XCom and the demo."""

from __future__ import annotations

from airflow_provider_deltamerge import metrics as m


def report(**values: int) -> dict[str, int]:
    return {**dict.fromkeys(m.METRIC_DESCRIPTIONS, 0), m.TABLE_VERSION: 3, **values}


def test_summary_names_rows_files_and_duration():
    values = report(
        numTargetRowsInserted=5,
        numTargetRowsUpdated=2,
        numTargetRowsDeleted=1,
        numTargetRowsCopied=40,
        numTargetFilesRemoved=1,
        numTargetFilesAdded=2,
        executionTimeMs=4240,
    )

    assert m.summary_line(values) == (
        "5 inserted, 2 updated, 1 deleted, 40 copied rows; 1 file rewritten, 2 added; 4.2 s"
    )


def test_summary_after_a_conflict_gives_every_attempt():
    values = report(executionTimeMs=1500, numTargetFilesRemoved=3)
    values.update(m.attempts_report(values, {m.MERGE_ATTEMPTS: 2, m.EARLIER_ATTEMPTS_TIME_MS: 6000}))

    assert values[m.ALL_ATTEMPTS_TIME_MS] == 7500
    assert m.summary_line(values).endswith("3 files rewritten, 0 added; 1.5 s (2 attempts, 7.5 s in all)")


def test_a_commit_without_attempts_counts_one_run():
    assert m.attempts_report({m.EXECUTION_TIME_MS: 900}, {}) == {
        m.MERGE_ATTEMPTS: 1,
        m.ALL_ATTEMPTS_TIME_MS: 900,
    }


def test_readable_puts_the_headline_first_and_keeps_every_metric():
    values = report(numTargetRowsInserted=5)

    ordered = m.readable(values)

    assert list(ordered)[:3] == [m.SUMMARY, m.NUM_TARGET_ROWS_INSERTED, m.NUM_TARGET_ROWS_UPDATED]
    assert ordered[m.SUMMARY].startswith("5 inserted")
    assert {k: v for k, v in ordered.items() if k != m.SUMMARY} == values
