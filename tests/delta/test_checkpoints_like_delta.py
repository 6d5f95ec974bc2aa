"""Checkpoints of tables with row tracking or v2 checkpoints: the engine's merge checkpoints the version
Delta's MERGE checkpoints, and Delta's runtime reads the table from that checkpoint alone as it read it
before (row ids and commit versions included), then writes to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.spec import parse_merge_sql
from tests.delta.helpers import PLAIN_UPSERT, copy_of, delta_merge
from tests.run_profile import of_the_day

FEATURES = {
    "rowTracking": "'delta.enableRowTracking' = 'true'",
    "v2Checkpoint": "'delta.feature.v2Checkpoint' = 'supported', 'delta.checkpointPolicy' = 'v2'",
}


def delta_table(spark: SparkSession, folder: Path, feature: str) -> str:
    """A table Delta made with ``feature``, checkpointed every 3 versions, at version 2 after two inserts."""
    target = str(folder / "orders")
    spark.sql(
        f"CREATE TABLE delta.`{target}` (id BIGINT, qty INT) USING delta "
        f"TBLPROPERTIES ({FEATURES[feature]}, 'delta.checkpointInterval' = '3')"
    ).collect()
    for first in (0, 10):
        spark.sql(f"INSERT INTO delta.`{target}` VALUES ({first}, 1), ({first + 1}, 2)").collect()
    return target


def last_checkpoint(table: str) -> int | None:
    found = LogReader(table).last_checkpoint()
    return None if found is None else int(found["version"])


def rows_by_delta(spark: SparkSession, table: str, feature: str) -> list[tuple[Any, ...]]:
    """The rows as Delta's reader reads them, with their row ids and commit versions where tracked."""
    tracked = ("_metadata.row_id", "_metadata.row_commit_version") if feature == "rowTracking" else ()
    frame = spark.read.format("delta").load(table).select("id", "qty", *tracked)
    return sorted(tuple(row) for row in frame.collect())


# Every feature locally; in CI one a day: the differential suite draws checkpoint intervals, row tracking
# and v2 checkpoints in every run (tests/run_profile.py)
@pytest.mark.parametrize("feature", of_the_day(sorted(FEATURES)))
def test_the_merge_checkpoints_where_delta_does_and_delta_reads_the_table_from_it(spark, tmp_path, feature):
    target = delta_table(spark, tmp_path, feature)
    source = str(tmp_path / "extract.parquet")
    extract = pa.table({"id": pa.array([1, 50], pa.int64()), "qty": pa.array([9, 9], pa.int32())})
    pq.write_table(extract, source)
    theirs = copy_of(target, "theirs")

    delta_merge(spark, PLAIN_UPSERT, theirs, source)
    result = run_merge(spark, parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source)))

    # Both checkpoint the merge's version, 3
    assert result.version == 3
    assert last_checkpoint(target) == last_checkpoint(theirs) == 3
    # Delta reads the table from the engine's checkpoint alone, as it read it with the commits
    before = rows_by_delta(spark, target, feature)
    # (Delta's merge gives the same rows; a new row's id may differ, both above the old mark)
    assert [row[:2] for row in before] == [row[:2] for row in rows_by_delta(spark, theirs, feature)]
    alone = copy_of(target, "from-the-checkpoint")
    for version in range(3):
        (Path(alone) / "_delta_log" / f"{version:020d}.json").unlink()
    assert rows_by_delta(spark, alone, feature) == before
    assert len(before) == 5 and before[1][:2] == (1, 9)
    # ... and writes to it
    spark.sql(f"INSERT INTO delta.`{alone}` VALUES (99, 1)").collect()
    assert len(rows_by_delta(spark, alone, feature)) == 6
