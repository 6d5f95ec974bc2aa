"""The append path (engine/execute/append.py): a source whose keys' bounds reach no file of the table is
written as read, not materialized, and falls back to the usual path when a second read leaves the bounds. A
small source held in the plan (engine/source/held.py) takes the usual path, at no cost of materializing."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.execute import append
from airflow_provider_deltamerge.engine.source import held as held_source
from airflow_provider_deltamerge.engine.source import materialize as ms
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    QuerySource,
    insert,
    insert_all,
    update_all,
)
from tests.oracle import sorted_rows

APPENDED = "No file can hold the source's keys: its rows were appended"
CLAUSES = {"insert-only": (insert_all(),), "upsert": (update_all(), insert_all())}


def rows(ids: list[int | None], values: list[int] | None = None) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "value": pa.array(values if values is not None else [(i or 0) * 10 for i in ids], pa.int64()),
        }
    )


def two_files(path: Path) -> str:
    """Target ids 1-3 and 4-6, a file each (their stats bound the ids)."""
    for ids in ([1, 2, 3], [4, 5, 6]):
        write_deltalake(str(path), rows(ids), mode="append")
    return str(path)


def parquet_source(tmp_path: Path, data: pa.Table) -> PathSource:
    path = tmp_path / "source.parquet"
    pq.write_table(data, path)
    return PathSource(str(path), format="parquet")  # not a Delta scan: Delta's rules materialize it


def stray_files(table: str) -> set[str]:
    """Parquet files under the table's folder that its current version does not hold."""
    held = {Path(uri.removeprefix("file://")).resolve() for uri in DeltaTable(table).file_uris()}
    found = {p.resolve() for p in Path(table).rglob("*.parquet")}
    return {str(p) for p in found - held}


@pytest.mark.parametrize("held", [True, False], ids=["held", "not-held"])
@pytest.mark.parametrize("clauses", CLAUSES.values(), ids=CLAUSES.keys())
def test_new_keys_are_appended_from_one_read_of_the_source(
    spark, tmp_path, clauses, caplog, monkeypatch, held
):
    # Given: a table of ids 1-6; a parquet source (materialized by Delta's rules) of new ids 7 and 8 and a
    # NULL id, none of which any file's [min, max] can hold; small enough to be held in the plan, or not
    target = two_files(tmp_path / "t")
    source = parquet_source(tmp_path, rows([7, None, 8], [70, 0, 80]))
    if not held:
        monkeypatch.setattr(held_source, "HELD_ROWS", 2)
    # When
    with caplog.at_level(logging.INFO, logger="airflow_provider_deltamerge"):
        result = run_merge(spark, MergeSpec(target, source, "t.id = s.id", clauses))
    # Then: every source row is inserted (a NULL id matches nothing), no file is read or removed, and the
    # source is written as read (held, or not materialized)
    assert sorted((r["id"] or -1, r["value"]) for r in sorted_rows(target)) == [
        (-1, 0),
        *((i, i * 10) for i in range(1, 9)),
    ]
    # A held source needs no append path: pruning reads its keys where it is held, and leaves no file
    assert (f"{APPENDED}, not materialized" in caplog.text) is not held
    materialized = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("Source materialized")
    ]
    reason = ms.NON_DETERMINISTIC_SOURCE_NON_DELTA
    assert materialized == (
        [f"Source materialized ({reason}): 3 rows held in the plan, read once"] if held else []
    )
    metrics = result.metrics
    assert metrics[m.NUM_SOURCE_ROWS] == metrics[m.NUM_TARGET_ROWS_INSERTED] == 3
    assert metrics[m.NUM_SOURCE_ROWS_IN_SECOND_SCAN] == (3 if len(clauses) == 2 else 0)
    assert (metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING], metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING]) == (2, 0)
    assert (metrics[m.NUM_TARGET_FILES_REMOVED], metrics[m.NUM_TARGET_FILES_ADDED]) == (0, 1)
    assert result.executor == ("insert_only" if len(clauses) == 1 else "classic")


@pytest.mark.parametrize("clauses", CLAUSES.values(), ids=CLAUSES.keys())
def test_keys_a_file_may_hold_take_the_usual_path(spark, tmp_path, clauses, caplog):
    # Given: a source of ids 2 (in the first file) and 9: its bounds [2, 9] reach both files
    target = two_files(tmp_path / "t")
    source = parquet_source(tmp_path, rows([2, 9], [99, 90]))
    # When
    with caplog.at_level(logging.INFO, logger="airflow_provider_deltamerge"):
        result = run_merge(spark, MergeSpec(target, source, "t.id = s.id", clauses))
    # Then: the source is materialized, id 2 matches (updated by the upsert, left alone by the insert-only
    # merge) and 9 is inserted
    updated = len(clauses) == 2
    expected = {i: i * 10 for i in range(1, 7)} | {2: 99 if updated else 20, 9: 90}
    assert sorted((r["id"], r["value"]) for r in sorted_rows(target)) == sorted(expected.items())
    assert f"Source materialized ({ms.NON_DETERMINISTIC_SOURCE_NON_DELTA})" in caplog.text
    assert APPENDED not in caplog.text
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == (1 if updated else 0)


def test_a_source_that_leaves_its_bounds_on_the_second_read_falls_back(spark, tmp_path, caplog, monkeypatch):
    # Given: a parquet source (materialized by Delta's rules) whose id 100 reads as 2 (a key of the first
    # file) once a flag file exists, through a user function (Spark runs it in its Python workers, which see
    # the file system); the flag appears as the append starts writing, after the bounds [100, 101] were read
    target = two_files(tmp_path / "t")
    pq.write_table(rows([100, 101], [1000, 1010]), tmp_path / "source.parquet")
    flag = str(tmp_path / "flag")
    spark.udf.register("moved", lambda i: 2 if i == 100 and os.path.exists(flag) else i, "bigint")
    source = QuerySource(f"SELECT moved(id) AS id, value FROM parquet.`{tmp_path / 'source.parquet'}`")
    entered = append.enter_phase

    def flag_on_append(phase: str, **counts: int) -> None:
        if phase.startswith("append"):
            Path(flag).touch()
        entered(phase, **counts)

    monkeypatch.setattr(append, "enter_phase", flag_on_append)
    # When
    with caplog.at_level(logging.INFO, logger="airflow_provider_deltamerge"):
        result = run_merge(spark, MergeSpec(target, source, "t.id = s.id", (insert_all(),)))
    # Then: the append's write fails on the row that left the bounds and leaves no file behind; the merge
    # runs the usual way on the materialized source, whose id 2 matches (not inserted) and 101 does not
    assert "a key of its rows left the bounds it had at first" in caplog.text
    assert f"Source materialized ({ms.NON_DETERMINISTIC_SOURCE_NON_DELTA})" in caplog.text
    assert sorted((r["id"], r["value"]) for r in sorted_rows(target)) == [
        *((i, i * 10) for i in range(1, 7)),
        (101, 1010),
    ]
    assert result.metrics[m.NUM_SOURCE_ROWS] == 2
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    assert stray_files(target) == set()


@pytest.mark.parametrize(
    ("keys", "appended"),
    [([10**30, 10**30 + 1], True), ([2, 10**30], False)],
    ids=["beyond-every-file", "one-in-a-file"],
)
def test_decimal_source_keys_beyond_a_long_are_bounded_exactly(
    spark, tmp_path, caplog, monkeypatch, keys, appended
):
    # Given: a BIGINT target of ids 1-6; a source whose key is DECIMAL(38,0) (the ON condition compares
    # the two as decimals), with a key beyond any long, and its own BIGINT ids 7 and 8 to insert; too many
    # rows to be held (a held source takes no append path)
    monkeypatch.setattr(held_source, "HELD_ROWS", 1)
    target = two_files(tmp_path / "t")
    data = pa.table(
        {
            "key": pa.array(keys, pa.decimal128(38, 0)),
            "id": pa.array([7, 8], pa.int64()),
            "value": pa.array([70, 80], pa.int64()),
        }
    )
    source = parquet_source(tmp_path, data)
    clauses = (insert({"id": "s.id", "value": "s.value"}),)
    # When
    with caplog.at_level(logging.INFO, logger="airflow_provider_deltamerge"):
        result = run_merge(spark, MergeSpec(target, source, "t.id = s.key", clauses))
    # Then: a key no file can hold goes through the append path, a key 2 matches the first file's id 2 and
    # takes the usual path; the rows whose keys match nothing are inserted
    inserted = [(7, 70), (8, 80)] if appended else [(8, 80)]
    assert sorted((r["id"], r["value"]) for r in sorted_rows(target)) == [
        *((i, i * 10) for i in range(1, 7)),
        *inserted,
    ]
    assert (APPENDED in caplog.text) is appended
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == len(inserted)
