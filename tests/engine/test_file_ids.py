"""Phase 1 names files by a long in its shuffles (``engine/execute/file_ids.py``)."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.files.reader import FILE_COLUMN
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.execute import file_ids as file_ids_module
from airflow_provider_deltamerge.engine.execute.file_ids import FILE_ID, file_ids
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.spec import MergeSpec, delete, delete_by_source, insert_all, update_all
from bench.spark_work import last_execution_id
from tests.conftest import table_state
from tests.engine.conftest import executed_plans
from tests.engine.test_executors import rows, source_file, table_in_files
from tests.oracle import sorted_rows

MULTIPLE_MATCH = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"


def ids_of_rows(spark, ids, uris):
    """The ids ``FileIds.column`` gives rows whose file is each of ``uris``, in order."""
    frame = spark.createDataFrame(pa.table({FILE_COLUMN: pa.array(uris, pa.string())}))
    return [row[0] for row in frame.select(ids.column()).collect()]


@settings(max_examples=25, deadline=None)
@given(uris=st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=30, unique=True))
def test_each_file_gets_an_id_of_its_own_that_its_rows_carry(spark, uris):
    # When
    ids = file_ids(spark, uris)
    # Then: distinct ids, each mapping back to its file, and each row of a file computes its file's id
    assert len(ids.uris) == len(uris)
    assert sorted(ids.uris.values()) == sorted(uris)
    carried = ids_of_rows(spark, ids, uris)
    assert [ids.uri(file_id) for file_id in carried] == uris


def test_ids_that_collide_are_salted_again(spark, monkeypatch):
    # Given: a hash of 4 values, so that 3 files often share one
    hashed = file_ids_module._id_of
    monkeypatch.setattr(file_ids_module, "_id_of", lambda uri, salt: F.pmod(hashed(uri, salt), F.lit(4)))
    uris = ["file:/t/a.parquet", "file:/t/b.parquet", "file:/t/c.parquet"]
    salts = set()
    for start in range(8):
        # When
        ids = file_ids(spark, [*uris[start % 3 :], *uris[: start % 3]])
        salts.add(ids.salt)
        # Then: still one id per file, and the rows carry the salted one
        assert sorted(ids.uris.values()) == uris
        assert [ids.uri(i) for i in ids_of_rows(spark, ids, uris)] == uris
    assert salts != {0}  # some order needed a second salt (fixed values: xxhash64 is deterministic)


def test_an_id_of_no_file_is_an_error(spark):
    ids = file_ids(spark, ["file:/t/a.parquet"])
    with pytest.raises(MergeExecutionError, match="cannot find in the table's log"):
        ids.uri(next(iter(ids.uris)) + 1)


def exchanged_columns(plans: list[str]) -> list[str]:
    """The input columns of every shuffle in ``plans``."""
    shuffles = re.compile(r"\(\d+\) (?:Exchange|ShuffleQueryStage)[^\n]*\nInput \[\d+\]: \[([^\]]*)\]")
    return [column for plan in plans for inputs in shuffles.findall(plan) for column in inputs.split(", ")]


@pytest.mark.usefixtures("two_phases")
def test_a_full_sync_shuffles_file_ids_not_file_names(spark, tmp_path):
    # Given: a full sync (a NOT MATCHED BY SOURCE clause: every file's rows are counted per row)
    target = table_in_files(tmp_path / "t", rows([1, 2]), rows([3, 4]), rows([5, 6]))
    source = source_file(tmp_path, rows([2, 3, 4, 7], [200, 30, 40, 70]))
    spec = MergeSpec(target, source, "t.id = s.id", (update_all(), insert_all(), delete_by_source()))
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, spec)
    # Then: Delta's outcome
    assert [(r["id"], r["value"]) for r in sorted_rows(target)] == [(2, 200), (3, 30), (4, 40), (7, 70)]
    assert (result.metrics[m.NUM_TARGET_ROWS_UPDATED], result.metrics[m.NUM_TARGET_ROWS_DELETED]) == (3, 3)
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    # and phase 1 shuffled its rows by file id, never with the file's name
    phase_1 = [plan for plan in executed_plans(spark, since) if "multiply_matched" in plan]
    shuffled = exchanged_columns(phase_1)
    assert any(column.startswith(FILE_ID) for column in shuffled), phase_1
    assert not any(column.startswith(FILE_COLUMN) for column in shuffled), phase_1


def test_a_target_row_two_source_rows_match_is_found_by_its_file_id(spark, tmp_path):
    # Given: source ids 3 twice; the row of id 3 is in the second of two files
    target = table_in_files(tmp_path / "t", rows([1, 2]), rows([3, 4]))
    before = table_state(target)
    source = source_file(tmp_path, rows([1, 3, 3]))
    spec = MergeSpec(target, source, "t.id = s.id", (update_all(), delete_by_source()))
    # When / Then: refused, naming the one target row, and nothing is committed
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == MULTIPLE_MATCH
    assert "1 target row(s) matched more than one source row" in str(raised.value)
    assert "id=3" in str(raised.value)
    assert table_state(target) == before


def test_an_unconditional_delete_two_source_rows_match_counts_its_row_once(spark, tmp_path):
    # Delta's exemption: the row is deleted once, and counted once (the surplus is taken from the counts)
    target = table_in_files(tmp_path / "t", rows([1, 2]), rows([3, 4]))
    source = source_file(tmp_path, rows([3, 3, 4]))
    result = run_merge(spark, MergeSpec(target, source, "t.id = s.id", (delete(),)))
    assert [r["id"] for r in sorted_rows(target)] == [1, 2]
    assert result.metrics[m.NUM_TARGET_ROWS_DELETED] == 2
    assert result.metrics[m.NUM_TARGET_FILES_REMOVED] == 1
