"""A small merge's two phases in one Spark query (engine/execute/one_query.py): the same table and metrics as
the two phases give, one query reading the table's files instead of two, and the two phases wherever one
query cannot settle the merge (multiple matches, errors, files too large)."""

from __future__ import annotations

import json
import logging
from functools import partial
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.execute import one_query
from airflow_provider_deltamerge.engine.session_confs import OPTIMIZE_INSERT_ONLY
from airflow_provider_deltamerge.exceptions import DeltaMergeError
from airflow_provider_deltamerge.session_kind import session_confs_set
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    delete,
    delete_by_source,
    insert,
    insert_all,
    update,
    update_all,
    update_by_source,
)
from bench.spark_work import last_execution_id
from tests.engine.conftest import executed_plans
from tests.engine.test_executors import rows, source_file, table_in_files
from tests.oracle import sorted_rows

# What the two runs need not share: times, and how the writer cuts the rows into files (one query's rows come
# out of its shuffle, the two phases' out of the touched files' splits and the inserts' own task).
_LAYOUT = (
    m.NUM_TARGET_FILES_ADDED,
    m.NUM_TARGET_BYTES_ADDED,
    m.NUM_TARGET_CHANGE_FILES_ADDED,
    m.NUM_TARGET_CHANGE_FILE_BYTES,
)


def _copies(tmp_path: Path, *files: pa.Table, properties: dict[str, str] | None = None) -> tuple[str, str]:
    return (
        table_in_files(tmp_path / "one", *files, properties=properties),
        table_in_files(tmp_path / "two", *files, properties=properties),
    )


def _table_file_scans(spark, since: int, table: str) -> int:
    """The queries after ``since`` that read the data files of ``table``."""
    return sum(f"Location: InMemoryFileIndex [file:{table}/" in plan for plan in executed_plans(spark, since))


def _files_on_disk(table: str) -> set[str]:
    return {str(p.relative_to(table)) for p in Path(table).rglob("*.parquet")}


def _committed_files(table: str) -> set[str]:
    """Every data and change file the table's log names (removed files stay on disk until a vacuum)."""
    return {
        action[kind]["path"]
        for entry in Path(table, "_delta_log").glob("*.json")
        for action in map(json.loads, entry.read_text().splitlines())
        for kind in ("add", "remove", "cdc")
        if kind in action
    }


def _comparable_metrics(metrics) -> dict:
    """The metrics the two ways must agree on: all but times and the writer's layout (its file and byte
    counts), of which whether files were added stays."""
    kept = {k: v for k, v in metrics.items() if not k.endswith("TimeMs") and k not in _LAYOUT}
    return {**kept, **{name: bool(metrics[name]) for name in _LAYOUT}}


def _change_rows(table: str) -> list[tuple]:
    """The change data feed's rows of the table's last commit."""
    version = DeltaTable(table).version()
    changes = DeltaTable(table).load_cdf(starting_version=version, ending_version=version).read_all()
    return sorted((r["id"], r["value"], r["_change_type"]) for r in pa.table(changes).to_pylist())


CLAUSE_MIXES = {
    "upsert": (update_all(), insert_all()),
    "conditional-upsert": (update_all(condition="s.value > t.value"), insert_all(condition="s.id > 5")),
    "matched-only": (update(set={"value": "s.value + 1"}, condition="s.value > 100"), delete()),
    "full-sync": (update_all(condition="s.value <> t.value"), insert_all(), delete_by_source()),
    "by-source-update": (update_by_source(set={"value": "t.value * -1"}, condition="t.id > 4"),),
}


@pytest.mark.parametrize("clauses", CLAUSE_MIXES.values(), ids=CLAUSE_MIXES)
@pytest.mark.parametrize("change_data_feed", [False, True], ids=["plain", "change-data-feed"])
def test_one_query_gives_the_tables_and_metrics_of_the_two_phases(
    spark, tmp_path, monkeypatch, clauses, change_data_feed
):
    # Given: three files (ids 1-3, 4-6, 7-9) on two copies of a table; a source updating 2 and 5 (the second
    # by a higher value), bringing 10 and 11
    properties = {"delta.enableChangeDataFeed": "true"} if change_data_feed else None
    one, two = _copies(tmp_path, rows([1, 2, 3]), rows([4, 5, 6]), rows([7, 8, 9]), properties=properties)
    source = source_file(tmp_path, rows([2, 5, 10, 11], [20, 500, 100, 110]))
    # When: the merge runs as one query on one copy, as two phases on the other
    since = last_execution_id(spark)
    in_one = run_merge(spark, MergeSpec(one, source, "t.id = s.id", clauses))
    one_query_scans = _table_file_scans(spark, since, one)
    monkeypatch.setattr(one_query, "MAX_BYTES", 0)
    since = last_execution_id(spark)
    in_two = run_merge(spark, MergeSpec(two, source, "t.id = s.id", clauses))
    two_phase_scans = _table_file_scans(spark, since, two)
    # Then: the same rows, metrics and change rows; one query read the table's files where the two phases
    # took two (a merge that touches no file reads them once either way)
    assert sorted_rows(one) == sorted_rows(two)
    assert _comparable_metrics(in_one.metrics) == _comparable_metrics(in_two.metrics)
    assert (in_one.version, in_one.committed) == (in_two.version, in_two.committed)
    if change_data_feed and in_one.committed:
        assert _change_rows(one) == _change_rows(two)
    assert one_query_scans == 1
    assert two_phase_scans == (2 if in_two.metrics[m.NUM_TARGET_FILES_REMOVED] else 1)
    assert _files_on_disk(one) == _committed_files(one)


def test_an_on_without_an_equality_counts_each_source_row_once(spark, tmp_path, monkeypatch, caplog):
    # Given: inserts by the classic executor (Delta's insert-only one off) into a one-file table, matched by
    # a range: Spark joins by a full outer nested loop, which reads the source twice (the differential suite
    # found the one query counting each source row twice)
    one, two = _copies(tmp_path, rows([1, 2, 3]))
    source = source_file(tmp_path, rows([2, 5, 10], [20, 500, 100]))
    spec = partial(MergeSpec, source=source, condition="t.id BETWEEN s.id AND s.id + 1")
    clauses = (insert(values={"id": "s.id"}, condition="s.value > 30"),)
    # When: as one query, and as two phases
    with session_confs_set(spark, {OPTIMIZE_INSERT_ONLY: "false"}):
        with caplog.at_level(logging.INFO, logger=one_query.__name__):
            in_one = run_merge(spark, spec(one, clauses=clauses))
        monkeypatch.setattr(one_query, "MAX_BYTES", 0)
        in_two = run_merge(spark, spec(two, clauses=clauses))
    # Then: the one query settled it, counting three source rows, as the two phases do
    assert "One query: 1 of 1 candidate files rewritten" in caplog.text
    assert in_one.metrics[m.NUM_SOURCE_ROWS] == in_one.metrics[m.NUM_SOURCE_ROWS_IN_SECOND_SCAN] == 3
    assert _comparable_metrics(in_one.metrics) == _comparable_metrics(in_two.metrics)
    assert sorted_rows(one) == sorted_rows(two)


def test_an_insert_only_effect_writes_no_change_data(spark, tmp_path):
    # Given: a table with the change data feed on, and an upsert whose source matches no row of the file
    # pruning keeps (its keys lie within the file's bounds)
    table = table_in_files(tmp_path / "t", rows([1, 3, 5]), properties={"delta.enableChangeDataFeed": "true"})
    source = source_file(tmp_path, rows([2, 4], [20, 40]))
    # When
    result = run_merge(spark, MergeSpec(table, source, "t.id = s.id", (update_all(), insert_all())))
    # Then: the inserts are added, no file is removed, and no change data file is written: readers take
    # added files as inserts (Delta's rule)
    assert (result.metrics[m.NUM_TARGET_ROWS_INSERTED], result.metrics[m.NUM_TARGET_FILES_REMOVED]) == (2, 0)
    assert result.metrics[m.NUM_TARGET_CHANGE_FILES_ADDED] == 0
    assert not list(Path(table).glob("_change_data/*"))
    assert _files_on_disk(table) == _committed_files(table)


@pytest.mark.parametrize(
    "clauses",
    [(update_all(), insert_all()), (delete(),), (delete(), insert_all())],
    ids=["upsert", "unconditional-delete", "unconditional-delete-and-insert"],
)
def test_target_rows_matched_twice_get_the_two_phases_answer(spark, tmp_path, monkeypatch, caplog, clauses):
    # Given: a source that brings id 2 twice
    one, two = _copies(tmp_path, rows([1, 2, 3]), rows([4, 5]))
    source = source_file(tmp_path, rows([2, 2, 7], [20, 21, 70]))

    def merge(table: str):
        try:
            return run_merge(spark, MergeSpec(table, source, "t.id = s.id", clauses))
        except DeltaMergeError as err:
            return err.error_class, err.message

    # When: as one query where it can, and as two phases
    with caplog.at_level(logging.INFO, logger=one_query.__name__):
        in_one = merge(one)
    monkeypatch.setattr(one_query, "MAX_BYTES", 0)
    in_two = merge(two)
    # Then: the same error and message (an upsert), or the same table and metrics (an unconditional DELETE
    # tolerates the repeats and counts the row once); the one query's files are gone
    if isinstance(in_two, tuple):
        assert in_one == in_two
        assert in_two[0] == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    else:
        assert _comparable_metrics(in_one.metrics) == _comparable_metrics(in_two.metrics)
        assert in_one.metrics[m.NUM_TARGET_ROWS_DELETED] == 1
    assert "A target row may match several source rows: running the merge's two phases" in caplog.text
    assert sorted_rows(one) == sorted_rows(two)
    assert _files_on_disk(one) == _committed_files(one)


def test_an_error_in_the_one_query_is_the_two_phases_error(spark, tmp_path, monkeypatch, caplog):
    # Given: an update whose value fails a cast on one row (ANSI), in a table of two files
    one, two = _copies(tmp_path, rows([1, 2, 3]), rows([4, 5]))
    source = source_file(tmp_path, rows([2, 4], [20, 40]))
    failing = update(set={"value": "CAST(CONCAT('x', s.value) AS BIGINT)"}, condition="s.id = 4")
    clauses = (failing, insert_all())

    def merge(table: str) -> tuple[str | None, str]:
        with pytest.raises(DeltaMergeError) as raised:
            run_merge(spark, MergeSpec(table, source, "t.id = s.id", clauses))
        return raised.value.error_class, raised.value.message

    # When
    with caplog.at_level(logging.INFO, logger=one_query.__name__):
        in_one = merge(one)
    monkeypatch.setattr(one_query, "MAX_BYTES", 0)
    in_two = merge(two)
    # Then: the same error, the table unchanged, and no file left behind
    assert "One query did not settle the merge" in caplog.text
    assert in_one == in_two
    assert DeltaTable(one).version() == 1
    assert _files_on_disk(one) == _committed_files(one)


def test_candidate_files_past_the_limit_run_as_two_phases(spark, tmp_path, monkeypatch):
    # Given: a table of two files, and a limit below their size
    table = table_in_files(tmp_path / "t", rows([1, 2, 3]), rows([4, 5, 6]))
    monkeypatch.setattr(one_query, "MAX_BYTES", sum(f.size for f in read_snapshot(table).files) - 1)
    source = source_file(tmp_path, rows([2, 5, 10], [20, 50, 100]))
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, MergeSpec(table, source, "t.id = s.id", (update_all(), insert_all())))
    # Then: phase 1 and the rewrite each read the table's files
    assert result.metrics[m.NUM_TARGET_FILES_REMOVED] == 2
    assert _table_file_scans(spark, since, table) == 2


def test_a_source_with_nested_columns_runs_in_one_query_too(spark, tmp_path):
    # Given: a table and a source with a struct column (no size guess: the source is not broadcast) and an
    # update-only merge (the right outer join, which could build on a broadcast source)
    point = pa.struct([("x", pa.int64()), ("y", pa.string())])
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": pa.array([{"x": 1, "y": "a"}] * 3, point)})
    table = table_in_files(tmp_path / "t", data)
    source = source_file(tmp_path, data.slice(1, 1).set_column(1, "p", pa.array([{"x": 9, "y": "b"}], point)))
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, MergeSpec(table, source, "t.id = s.id", (update_all(),)))
    # Then: one query read the table's files, the source hashed into the join
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert [r["p"]["x"] for r in sorted_rows(table)] == [1, 9, 1]
    assert _table_file_scans(spark, since, table) == 1
    assert any("ShuffledHashJoin RightOuter" in plan for plan in executed_plans(spark, since))
