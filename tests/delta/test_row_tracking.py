"""Our merges into tables with row tracking (writer feature ``rowTracking``, issue 39 item 1).

Delta made each table with ``delta.enableRowTracking=true`` (alone, or with deletion vectors, the change
data feed or column mapping) and updated one row itself, so some rows already have materialized ids and
commit versions. After our merge (one statement per executor), Delta's ``_metadata.row_id`` and
``_metadata.row_commit_version`` give for every row that was in the table what they give after Delta's own
MERGE of the same statement on an identical copy, and the same commit versions for every row; inserted
rows get fresh ids above the old high-water mark, which the commit moves. (Which fresh id an inserted row
gets depends on the order of rows in the files written, so it is not compared.) Delta's next MERGE and
OPTIMIZE keep every id. A concurrent commit that assigned row ids before ours makes our commit take ids
above its mark.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.delta.commit import transaction as commit_module
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.row_tracking import high_water_mark
from tests.delta.helpers import (
    STATEMENTS,
    assert_merges_agree,
    assert_next_merges_agree,
    log_actions,
    ours,
)
from tests.delta.test_delta_reads_our_merges import (
    COLUMN_MAPPING,
    DELETION_VECTORS,
    FEED,
    change_rows,
    delta_table,
    source,
)
from tests.run_profile import pairing_of_the_day

ROW_TRACKING = {"delta.enableRowTracking": "true"}
TABLES: dict[str, Mapping[str, str]] = {
    "row-tracking": ROW_TRACKING,
    "row-tracking-deletion-vectors": {**ROW_TRACKING, **DELETION_VECTORS},
    "row-tracking-change-data-feed": {**ROW_TRACKING, **FEED},
    "row-tracking-column-mapping": {**ROW_TRACKING, **COLUMN_MAPPING},
}


def tracked_table(spark: SparkSession, path: Path, properties: Mapping[str, str]) -> str:
    """Rows 1-6 (id, qty, region) in two files at version 0, then Delta's own UPDATE of row 4 at version 1
    (its id and version 1 materialized, or kept under a deletion vector)."""
    table = delta_table(spark, path, properties)
    spark.sql(f"UPDATE delta.`{table}` SET qty = qty + 1 WHERE id = 4").collect()
    return table


def row_ids(spark: SparkSession, table: str) -> dict[int, tuple[int, int]]:
    """Each row's (row id, row commit version) as Delta reads them, by the row's id column."""
    rows = spark.sql(
        f"SELECT id, _metadata.row_id AS row_id, _metadata.row_commit_version AS version FROM delta.`{table}`"
    ).collect()
    return {row["id"]: (row["row_id"], row["version"]) for row in rows}


def assert_row_ids_agree(
    ours_ids: dict[int, tuple[int, int]], theirs_ids: dict[int, tuple[int, int]], old: set[int]
) -> None:
    """Rows that were in the table keep the ids and get the versions Delta gives them; every row has the
    version Delta gives it; ids are unique."""
    assert ours_ids.keys() == theirs_ids.keys()
    assert {k: v for k, v in ours_ids.items() if k in old} == {
        k: v for k, v in theirs_ids.items() if k in old
    }
    assert {k: v[1] for k, v in ours_ids.items()} == {k: v[1] for k, v in theirs_ids.items()}
    assert len({v[0] for v in ours_ids.values()}) == len(ours_ids)


def domain_mark(table: str, version: int) -> int | None:
    marks = [
        json.loads(d["configuration"])["rowIdHighWaterMark"]
        for d in log_actions(table, version, "domainMetadata")
        if d["domain"] == "delta.rowTracking"
    ]
    return marks[-1] if marks else None


# Every pairing of executor and table kind locally; in CI one a day: the differential suite draws row
# tracking in every run (tests/run_profile.py)
@pytest.mark.parametrize(("executor", "table_kind"), pairing_of_the_day(sorted(STATEMENTS), sorted(TABLES)))
def test_our_merge_keeps_and_assigns_row_ids_as_deltas_merge_does(spark, tmp_path, table_kind, executor):
    # Given: a table Delta made with row tracking and updated once (version 1)
    target = tracked_table(spark, tmp_path / "ours", TABLES[table_kind])
    before = row_ids(spark, target)
    old_mark = high_water_mark(target, 1)
    assert old_mark >= 5 and before[4][1] == 1
    # When/Then: our engine merges with the statement's executor, committing version 2, and Delta reads from
    # our table the rows and counts its own MERGE gives on an identical copy
    agreed = assert_merges_agree(
        spark, target, STATEMENTS[executor], source(tmp_path), executor=executor, version=2
    )
    theirs = agreed.theirs
    if FEED.items() <= TABLES[table_kind].items():
        # The change rows Delta reads of our commit are those of its own merge's
        assert change_rows(spark, target, 2) == change_rows(spark, theirs, 2)
    # Row ids and commit versions: as Delta's own merge left them
    ours_ids, theirs_ids = row_ids(spark, target), row_ids(spark, theirs)
    assert_row_ids_agree(ours_ids, theirs_ids, set(before))
    # Every added file took fresh ids above the old mark, with this commit's version; the new mark is the
    # last id given
    added = [a for a in log_actions(target, 2, "add") if a["dataChange"] and "deletionVector" not in a]
    readded = [a for a in log_actions(target, 2, "add") if "deletionVector" in a]
    bases = sorted((a["baseRowId"], json.loads(a["stats"])["numRecords"]) for a in added)
    assert all(a["defaultRowCommitVersion"] == 2 for a in added)
    assert bases[0][0] == old_mark + 1
    assert all(later[0] == base + count for (base, count), later in itertools.pairwise(bases))
    assert domain_mark(target, 2) == bases[-1][0] + bases[-1][1] - 1 == high_water_mark(target, 2)
    # Files re-added under a new deletion vector keep their ids
    assert all(a["defaultRowCommitVersion"] < 2 and a["baseRowId"] <= old_mark for a in readded)
    inserted = [k for k in ours_ids if k not in before]
    assert all(old_mark < ours_ids[k][0] <= domain_mark(target, 2) for k in inserted)
    # When/Then: Delta's own next merge, then its OPTIMIZE, keep every id on our table
    assert_next_merges_agree(spark, target, theirs)
    after_next = row_ids(spark, target)
    assert {k: after_next[k][0] for k in ours_ids} == {k: v[0] for k, v in ours_ids.items()}
    assert_row_ids_agree(after_next, row_ids(spark, theirs), set(before))
    spark.sql(f"OPTIMIZE delta.`{target}`").collect()
    assert row_ids(spark, target) == after_next


def test_a_concurrent_commit_that_assigned_row_ids_moves_ours_above_its_mark(spark, tmp_path, monkeypatch):
    # Given: a table with row tracking, and Delta's own INSERT of a far-away row committing (version 2)
    # just before our merge's first commit attempt
    target = tracked_table(spark, tmp_path / "ours", ROW_TRACKING)
    mark = high_water_mark(target, 1)
    real = commit_module._try_commit
    raced: list[int] = []

    def after_a_concurrent_insert(base: Any, actions: Any, store: Any) -> bool:
        if not raced:
            spark.sql(f"INSERT INTO delta.`{target}` VALUES (100L, 1000, 'eu'), (101L, 1010, 'us')").collect()
            raced.append(high_water_mark(target, 2))
        return real(base, actions, store)

    monkeypatch.setattr(commit_module, "_try_commit", after_a_concurrent_insert)
    # When: our upsert commits
    result = ours(spark, STATEMENTS["classic"], target, source(tmp_path))
    # Then: it was rebased over Delta's insert, and its files' ids start above the mark that insert set
    assert result.rebased_over == (2,) and result.version == 3
    assert raced[0] >= mark + 2
    bases = [a["baseRowId"] for a in log_actions(target, 3, "add")]
    assert bases and min(bases) == raced[0] + 1
    assert all(a["defaultRowCommitVersion"] == 3 for a in log_actions(target, 3, "add"))
    ids = row_ids(spark, target)
    assert len({row_id for row_id, _ in ids.values()}) == len(ids) == 8  # 2 deleted, 7 inserted
    assert ids[100][1] == ids[101][1] == 2
    assert {k: v for k, v in ids.items() if k in (1, 4, 6)} == {
        1: (ids[1][0], 0),
        4: (ids[4][0], 1),
        6: (ids[6][0], 0),
    }
    assert high_water_mark(target, 3) == domain_mark(target, 3) > raced[0]


def test_the_high_water_mark_is_read_from_delta_s_checkpoint_too(spark, tmp_path):
    # Given: a table Delta made with row tracking (its mark in version 0's commit), then Delta's checkpoint
    target = delta_table(spark, tmp_path / "t", ROW_TRACKING)
    written = domain_mark(target, 0)
    assert written is not None and high_water_mark(target, 0) == written
    jvm = spark.sparkContext._jvm
    jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, target).checkpoint()
    # When/Then: read at the checkpoint's version, the mark comes from the checkpoint file alone
    assert LogReader(target).last_checkpoint()["version"] == 0
    assert high_water_mark(target, 0) == written
