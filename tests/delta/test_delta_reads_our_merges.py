"""Delta Lake's own runtime reads the tables our merges write, and we merge into the tables Delta wrote
(issue 36, part 4).

One way: after our merge into a table with deletion vectors, the change data feed, column mapping or an
evolving schema, Delta reads the rows deltalake reads, its history shows our MERGE with our metrics, its
change feed equals the one its own MERGE of the same statement writes, and its VACUUM, OPTIMIZE, RESTORE and
next MERGE work. The other way: after Delta's DELETE with deletion vectors, its OPTIMIZE, or a column renamed
and dropped under column mapping, our merge gives the rows Delta's own MERGE gives on a copy made before it.

Every table is made by Delta itself (``CREATE TABLE delta.`path` ... AS SELECT``) in the tests' session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from tests.delta.helpers import (
    CHANGES,
    NEXT,
    UPSERT,
    assert_merges_agree,
    copy_of,
    delta_merge,
    delta_rows,
    last_history,
    log_actions,
    ours,
)
from tests.oracle import sorted_rows
from tests.run_profile import of_the_day

COLUMN_MAPPING = {
    "delta.columnMapping.mode": "name",
    "delta.minReaderVersion": "2",
    "delta.minWriterVersion": "5",
}
DELETION_VECTORS = {"delta.enableDeletionVectors": "true"}
FEED = {"delta.enableChangeDataFeed": "true"}
# Rows 1-6 (qty 10-60), in two files.
TARGET_ROWS = [(i, i * 10, "eu" if i % 2 else "us") for i in range(1, 7)]
# Deletes 2, updates 3 and 5, inserts 7.
SOURCE_ROWS = [(2, -1, "us"), (3, 31, "eu"), (5, 51, "eu"), (7, 70, "eu")]


def delta_table(
    spark: SparkSession,
    path: Path,
    properties: Mapping[str, str] | None = None,
    rows: list[tuple[int, int, str]] = TARGET_ROWS,
    *,
    partitioned: bool = False,
) -> str:
    """A table Delta creates at ``path`` with ``properties``: ``rows`` (id, qty, region) in two files,
    version 0 (1 with the change data feed under column mapping: Delta refuses a CREATE TABLE AS SELECT of
    both, so the feed is turned on after)."""
    properties = dict(properties or {})
    feed_after = "delta.columnMapping.mode" in properties and properties.pop(next(iter(FEED)), None)
    props = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    values = ", ".join(f"({i}L, {q}, '{r}')" for i, q, r in rows)
    spark.sql(
        f"CREATE TABLE delta.`{path}` USING delta {'PARTITIONED BY (region) ' if partitioned else ''}"
        f"{f'TBLPROPERTIES ({props}) ' if props else ''}"
        f"AS SELECT /*+ REPARTITION(2) */ id, CAST(qty AS INT) AS qty, region "
        f"FROM VALUES {values} AS v(id, qty, region)"
    ).collect()
    if feed_after:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{next(iter(FEED))}' = 'true')").collect()
    return str(path)


def source(tmp_path: Path, rows: list[tuple[int, int, str]] = SOURCE_ROWS, **extra: list[Any]) -> str:
    """A parquet source of ``rows`` (id, qty, region) and the ``extra`` columns (strings)."""
    ids, qtys, regions = zip(*rows, strict=True)
    data = {"id": pa.array(ids, pa.int64()), "qty": pa.array(qtys, pa.int32()), "region": pa.array(regions)}
    data.update({name: pa.array(values, pa.string()) for name, values in extra.items()})
    path = tmp_path / "source.parquet"
    pq.write_table(pa.table(data), path)
    return str(path)


def commit_info(table: str, version: int) -> dict[str, Any]:
    text = (Path(table) / "_delta_log" / f"{version:020d}.json").read_text()
    actions = [json.loads(line) for line in text.splitlines()]
    return next(a["commitInfo"] for a in actions if "commitInfo" in a)


def change_rows(spark: SparkSession, table: str, version: int) -> list[tuple[Any, ...]]:
    """The change feed from ``version`` on as Delta reads it, without the commit timestamps."""
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", version)
        .load(table)
        .drop("_commit_timestamp")
    )
    return sorted(tuple(row) for row in feed.collect())


@contextmanager
def session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


# --- Delta reads back what we merge -----------------------------------------------------------------------

FEATURES: dict[str, tuple[Mapping[str, str], bool]] = {
    "deletion-vectors": (DELETION_VECTORS, False),
    "change-data-feed": (FEED, False),
    "column-mapping": (COLUMN_MAPPING, False),
    "schema-evolution": ({}, True),
}

FEED_TABLES: dict[str, tuple[Mapping[str, str], bool]] = {
    "deletion-vectors-partitioned": ({**FEED, **DELETION_VECTORS}, True),
    "column-mapping": ({**FEED, **COLUMN_MAPPING}, False),
}


# Every feature locally; in CI one a day: the differential suite draws each of them in every run
# (tests/run_profile.py)
@pytest.mark.parametrize("feature", of_the_day(sorted(FEATURES)))
def test_delta_reads_our_merge_its_history_and_merges_next(spark, tmp_path, feature):
    # Given: a table Delta made with the feature, an identical copy, and an upsert (bringing a new column
    # `note` under schema evolution)
    properties, evolve = FEATURES[feature]
    target = delta_table(spark, tmp_path / "ours", properties)
    theirs = copy_of(target, "theirs")
    src = source(tmp_path, **({"note": ["a", "b", None, "d"]} if evolve else {}))
    statement = UPSERT.replace("MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO") if evolve else UPSERT
    # When: our engine merges, and Delta runs the same statement on the copy
    result = ours(spark, statement, target, src)
    delta_merge(spark, statement, theirs, src)
    # Then: Delta reads our rows as deltalake does, and as Delta's own merge left them
    expected = [
        {"id": 1, "qty": 10, "region": "eu"},
        {"id": 3, "qty": 31, "region": "eu"},
        {"id": 4, "qty": 40, "region": "us"},
        {"id": 5, "qty": 51, "region": "eu"},
        {"id": 6, "qty": 60, "region": "us"},
        {"id": 7, "qty": 70, "region": "eu"},
    ]
    if evolve:
        for row in expected:
            row["note"] = {3: "b", 5: None, 7: "d"}.get(row["id"])
    rows = delta_rows(spark, target)
    assert rows == sorted_rows(target) == delta_rows(spark, theirs)
    assert sorted(rows, key=lambda r: r["id"]) == expected
    assert all(list(row) == list(expected[0]) for row in rows)
    # Delta's history shows our commit: a MERGE with the metrics we recorded, counting what Delta counts
    entry = last_history(spark, target)
    assert (entry["version"], entry["operation"]) == (result.version, "MERGE") == (1, "MERGE")
    assert entry["operationMetrics"] == commit_info(target, 1)["operationMetrics"]
    recorded = {k: int(entry["operationMetrics"][k]) for k in CHANGES}
    delta_metrics = last_history(spark, theirs)["operationMetrics"]
    assert recorded == {k: int(delta_metrics[k]) for k in CHANGES} == {k: result.metrics[k] for k in CHANGES}
    if properties == FEED:
        # The change rows Delta reads of our commit are those of its own merge's
        assert change_rows(spark, target, 1) == change_rows(spark, theirs, 1)
    # Delta's own next merge works on our table
    delta_merge(spark, NEXT, target)
    after = delta_rows(spark, target)
    assert after == sorted_rows(target)
    assert {r["id"]: r["qty"] for r in after} == {1: 100, 3: 31, 4: 40, 5: 51, 6: 60, 7: 700, 8: 800}
    assert last_history(spark, target)["version"] == 2


# Both tables locally; in CI one a day: the differential suite compares the change data feed's rows with
# Delta's on such tables in every run (tests/run_profile.py)
@pytest.mark.parametrize("table", of_the_day(sorted(FEED_TABLES)))
def test_our_change_feed_equals_the_one_deltas_merge_writes(spark, tmp_path, table):
    properties, partitioned = FEED_TABLES[table]
    # Given: a table with the change data feed on, and an identical copy
    target = delta_table(spark, tmp_path / "ours", properties, partitioned=partitioned)
    theirs = copy_of(target, "theirs")
    src = source(tmp_path)
    # When: our engine and Delta run the same upsert
    version = ours(spark, UPSERT, target, src).version
    delta_merge(spark, UPSERT, theirs, src)
    # Then: Delta reads the same change rows of the merge's version from both, table_changes too
    assert last_history(spark, theirs)["version"] == version
    feed = change_rows(spark, target, version)
    assert feed == change_rows(spark, theirs, version)
    assert sorted((r[-2], r[0]) for r in feed) == [
        ("delete", 2),
        ("insert", 7),
        ("update_postimage", 3),
        ("update_postimage", 5),
        ("update_preimage", 3),
        ("update_preimage", 5),
    ]
    assert {r[-1] for r in feed} == {version}
    by_sql = spark.sql(f"SELECT * FROM table_changes('delta.`{target}`', {version})")
    assert sorted(tuple(r) for r in by_sql.drop("_commit_timestamp").collect()) == feed


def test_delta_restores_vacuums_and_optimizes_our_merge(spark, tmp_path):
    # Given: our merge (version 1) into a table Delta made (version 0) with deletion vectors and column
    # mapping
    target = delta_table(spark, tmp_path / "t", {**DELETION_VECTORS, **COLUMN_MAPPING})
    before = delta_rows(spark, target)
    ours(spark, UPSERT, target, source(tmp_path))
    merged = delta_rows(spark, target)
    assert {r["id"]: r["qty"] for r in merged} == {1: 10, 3: 31, 4: 40, 5: 51, 6: 60, 7: 70}
    # When: Delta restores version 0, then our merge's version 1
    spark.sql(f"RESTORE TABLE delta.`{target}` TO VERSION AS OF 0").collect()
    # Then: the rows of each
    assert delta_rows(spark, target) == before == sorted_rows(target)
    assert len(before) == len(TARGET_ROWS)
    spark.sql(f"RESTORE TABLE delta.`{target}` TO VERSION AS OF 1").collect()
    assert delta_rows(spark, target) == merged == sorted_rows(target)
    vectors = sorted(Path(target).glob("deletion_vector_*.bin"))
    assert vectors  # our merge hid its deleted and updated rows by vectors
    # When: Delta vacuums every file no longer in the table
    with (
        session_conf(spark, "spark.databricks.delta.retentionDurationCheck.enabled", "false"),
        # Delta lists the table's folder in this many tasks (10,000 by default)
        session_conf(spark, "spark.sql.sources.parallelPartitionDiscovery.parallelism", "2"),
    ):
        spark.sql(f"VACUUM delta.`{target}` RETAIN 0 HOURS").collect()
    # Then: every file our commit added is kept (deletion vectors included): the same rows
    assert sorted(Path(target).glob("deletion_vector_*.bin")) == vectors
    assert delta_rows(spark, target) == merged == sorted_rows(target)
    # When: Delta compacts the table
    spark.sql(f"OPTIMIZE delta.`{target}`").collect()
    # Then: our files are rewritten into one, with the same rows
    entry = last_history(spark, target)
    assert entry["operation"] == "OPTIMIZE"
    assert int(entry["operationMetrics"]["numAddedFiles"]) == 1
    assert delta_rows(spark, target) == merged == sorted_rows(target)


# --- we merge into what Delta wrote -----------------------------------------------------------------------


def test_we_merge_after_deltas_delete_wrote_deletion_vectors(spark, tmp_path):
    # Given: Delta deleted rows 1 and 4 of a table that writes deletion vectors
    target = delta_table(spark, tmp_path / "ours", DELETION_VECTORS)
    spark.sql(f"DELETE FROM delta.`{target}` WHERE id IN (1, 4)").collect()
    assert any(add.get("deletionVector") for add in log_actions(target, 1, "add"))
    # When/Then: an upsert that matches a hidden key (4) and visible ones gives Delta's rows
    src = source(tmp_path, [(2, -1, "us"), (3, 31, "eu"), (4, 41, "us"), (7, 70, "eu")])
    rows = assert_merges_agree(spark, target, UPSERT, src).rows
    assert {r["id"]: r["qty"] for r in rows} == {3: 31, 4: 41, 5: 50, 6: 60, 7: 70}


def test_we_merge_after_deltas_optimize(spark, tmp_path):
    # Given: a table of three small files that Delta compacted
    target = delta_table(spark, tmp_path / "ours", {}, TARGET_ROWS[:2])
    for rows in (TARGET_ROWS[2:4], TARGET_ROWS[4:]):
        values = ", ".join(f"({i}L, {q}, '{r}')" for i, q, r in rows)
        spark.sql(f"INSERT INTO delta.`{target}` VALUES {values}").collect()
    spark.sql(f"OPTIMIZE delta.`{target}`").collect()
    assert last_history(spark, target)["operation"] == "OPTIMIZE"
    # When/Then: our upsert gives Delta's rows
    rows = assert_merges_agree(spark, target, UPSERT, source(tmp_path)).rows
    assert {r["id"]: r["qty"] for r in rows} == {1: 10, 3: 31, 4: 40, 5: 51, 6: 60, 7: 70}


@pytest.mark.parametrize("evolve", [False, True], ids=["same-schema", "dropped-column-added-back"])
def test_we_merge_after_delta_renamed_and_dropped_mapped_columns(spark, tmp_path, evolve):
    # Given: Delta turned column mapping on, renamed qty to amount and dropped region
    target = delta_table(spark, tmp_path / "ours")
    props = ", ".join(f"'{k}' = '{v}'" for k, v in COLUMN_MAPPING.items())
    spark.sql(f"ALTER TABLE delta.`{target}` SET TBLPROPERTIES ({props})").collect()
    spark.sql(f"ALTER TABLE delta.`{target}` RENAME COLUMN qty TO amount").collect()
    spark.sql(f"ALTER TABLE delta.`{target}` DROP COLUMN region").collect()
    # When/Then: an upsert by the new name gives Delta's rows; with schema evolution, a source column named
    # like the dropped one comes back as a new column, NULL in the old rows (never the dropped values)
    src = tmp_path / "source.parquet"
    data = {
        "id": pa.array([2, 3, 7], pa.int64()),
        "amount": pa.array([-1, 31, 70], pa.int32()),
        "region": pa.array(["x", "y", "z"]),
    }
    pq.write_table(pa.table(data), src)
    statement = UPSERT.replace("s.qty", "s.amount")
    if evolve:
        statement = statement.replace("MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO")
    rows = assert_merges_agree(spark, target, statement, str(src)).rows
    if evolve:
        assert {r["id"]: (r["amount"], r["region"]) for r in rows} == {
            1: (10, None), 3: (31, "y"), 4: (40, None), 5: (50, None), 6: (60, None), 7: (70, "z")
        }  # fmt: skip
    else:
        assert [list(r) for r in rows] == [["id", "amount"]] * 6
        assert {r["id"]: r["amount"] for r in rows} == {1: 10, 3: 31, 4: 40, 5: 50, 6: 60, 7: 70}
