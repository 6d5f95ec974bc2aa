"""Our merges into tables with checkpoint protection (writer feature ``checkpointProtection``, issue 39
item 5).

Delta adds the feature when it drops a reader-writer feature (here deletion vectors): commits and
checkpoints before ``delta.requireCheckpointProtectionBeforeVersion`` may then be cleaned up only together
with all history up to it. Our merge checkpoints when due, and with every log file expired its cleanup
deletes the history Delta's own MERGE deletes on a copy, of a protected table as of a plain one; the rows
equal those of Delta's merge, and Delta reads the table and merges next.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import SparkSession

from airflow_provider_deltamerge.delta.commit.checkpoints import PROTECTED_BEFORE_KEY
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from tests.delta.helpers import age_log
from tests.delta.test_clustered_tables import STATEMENTS
from tests.delta.test_delta_reads_our_merges import (
    NEXT,
    copy_of,
    delta_merge,
    delta_rows,
    delta_table,
    log_actions,
    ours,
    source,
)

# A checkpoint after every commit, and commit files expire after an hour (Delta keeps a day's files until the
# next day whatever the retention, so the tests age the log). Delta wants deleted files kept at least as long
# as the log.
EAGER = {
    "delta.checkpointInterval": "1",
    "delta.logRetentionDuration": "interval 1 hours",
    "delta.deletedFileRetentionDuration": "interval 1 hours",
}


def protected_table(spark: SparkSession, path: Path) -> str:
    """Delta's table with deletion vectors, a DELETE, then the feature dropped, which adds
    checkpointProtection; then the eager log settings."""
    table = delta_table(spark, path, {"delta.enableDeletionVectors": "true"})
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 6").collect()
    spark.sql(f"ALTER TABLE delta.`{table}` DROP FEATURE deletionVectors").collect()
    return eager(spark, table)


def eager(spark: SparkSession, table: str) -> str:
    props = ", ".join(f"'{k}' = '{v}'" for k, v in EAGER.items())
    spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ({props})").collect()
    return table


def commit_files(table: str) -> list[str]:
    return sorted(p.name for p in (Path(table) / "_delta_log").glob("*.json"))


def test_merge_cleans_up_a_protected_tables_history_as_deltas_merge_does(spark, tmp_path):
    # Given: a table Delta protected and a plain table with the same log settings, each log file 80 hours
    # old, and an identical copy of each
    target = protected_table(spark, tmp_path / "ours")
    before = read_snapshot(target)
    assert "checkpointProtection" in before.protocol.writer_features
    assert int(before.setting(PROTECTED_BEFORE_KEY) or 0) >= 1
    version = before.version + 1
    plain = eager(spark, delta_table(spark, tmp_path / "plain"))
    now = time.time()
    for table in (target, plain):
        age_log(Path(table), [80.0], now)
    theirs, plain_theirs = copy_of(target, "theirs"), copy_of(plain, "plain-theirs")
    history = commit_files(target)
    src = source(tmp_path)
    # When: our engine merges into both tables, and Delta runs the same statement on the copies
    result = ours(spark, STATEMENTS["classic"], target, src)
    ours(spark, STATEMENTS["classic"], plain, src)
    delta_merge(spark, STATEMENTS["classic"], theirs, src)
    delta_merge(spark, STATEMENTS["classic"], plain_theirs, src)
    # Then: the protected table has its checkpoint; each log kept the commits Delta's kept: those before the
    # merge expired, and on the protected table they reach the protected version, so they may go
    assert result.version == version
    assert (Path(target) / "_delta_log" / f"{version:020d}.checkpoint.parquet").exists()
    assert commit_files(target) == commit_files(theirs) == [f"{version:020d}.json"]
    assert len(history) > 1
    assert commit_files(plain) == commit_files(plain_theirs)
    assert f"{0:020d}.json" not in commit_files(plain)
    # Delta reads our rows as it reads its own merge's, and merges next; the protocol is unchanged
    assert delta_rows(spark, target) == delta_rows(spark, theirs)
    assert log_actions(target, version, "protocol") == []
    delta_merge(spark, NEXT, target)
    delta_merge(spark, NEXT, theirs)
    assert delta_rows(spark, target) == delta_rows(spark, theirs)
