"""Our merges into tables with checkpoint protection (writer feature ``checkpointProtection``, issue 39
item 5).

Delta adds the feature when it drops a reader-writer feature (here deletion vectors): commits and
checkpoints before ``delta.requireCheckpointProtectionBeforeVersion`` may then be cleaned up only together
with all history up to it. Our merge checkpoints when due but leaves the log's history alone on such a table,
while on a table without the feature the same merge's checkpoint cleans up expired commit files; the rows
equal those of Delta's own MERGE on a copy, and Delta reads the table and merges next.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import SparkSession

from airflow_provider_deltamerge.delta.commit.checkpoints import PROTECTED_BEFORE_KEY
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
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

# A checkpoint after every commit, and commit files expire at once (deltalake's cleanup then removes them).
# Delta wants deleted files kept at least as long as the log.
EAGER = {
    "delta.checkpointInterval": "1",
    "delta.logRetentionDuration": "interval 1 seconds",
    "delta.deletedFileRetentionDuration": "interval 1 seconds",
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


def test_merge_keeps_a_protected_tables_history_and_checkpoints(spark, tmp_path):
    # Given: a table Delta protected, an identical copy, and a plain table with the same log settings
    target = protected_table(spark, tmp_path / "ours")
    before = read_snapshot(target)
    assert "checkpointProtection" in before.protocol.writer_features
    assert int(before.setting(PROTECTED_BEFORE_KEY) or 0) >= 1
    version = before.version + 1
    theirs = copy_of(target, "theirs")
    plain = eager(spark, delta_table(spark, tmp_path / "plain"))
    history = commit_files(target)
    time.sleep(2)  # every commit so far is past its retention
    src = source(tmp_path)
    # When: our engine merges into both tables, and Delta runs the same statement on the copy
    result = ours(spark, STATEMENTS["classic"], target, src)
    ours(spark, STATEMENTS["classic"], plain, src)
    delta_merge(spark, STATEMENTS["classic"], theirs, src)
    # Then: the protected table has its checkpoint and keeps every commit file; the plain one lost its expired
    # ones to the cleanup that came with the checkpoint
    assert result.version == version
    assert (Path(target) / "_delta_log" / f"{version:020d}.checkpoint.parquet").exists()
    assert commit_files(target) == [*history, f"{version:020d}.json"]
    assert (Path(plain) / "_delta_log" / f"{2:020d}.checkpoint.parquet").exists()
    assert f"{0:020d}.json" not in commit_files(plain)
    # Delta reads our rows as it reads its own merge's, and merges next; the protocol is unchanged
    assert delta_rows(spark, target) == delta_rows(spark, theirs)
    assert log_actions(target, version, "protocol") == []
    delta_merge(spark, NEXT, target)
    delta_merge(spark, NEXT, theirs)
    assert delta_rows(spark, target) == delta_rows(spark, theirs)
