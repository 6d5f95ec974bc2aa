"""Delta's check of a merge's record counts before its commit (``validateNumRecords``): by the files' counts,
a merge without INSERT clauses adds no rows on balance, one without DELETE clauses removes none.

What Delta does in each case is judged against its runtime by the explicit examples of the differential
suite (tests/engine/differential_examples.py); here, what the engine leaves behind and what it says.
"""

from __future__ import annotations

import dataclasses
import logging

import pyarrow as pa
import pytest

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import merge, run_merge
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.spec import MergeSpec, delete, update_all
from tests.conftest import make_table, table_state
from tests.delta.helpers import files_on_disk_match_log
from tests.engine.test_executors import rows, source_file
from tests.oracle import sorted_rows

# Target row 3 lies in the ranges of source rows 2 and 3. No clause acts on the pair with source row 2 (its
# value is NULL), so neither side counts it as a multiple match, and the rewrite writes row 3 once per pair.
ON_A_RANGE = "t.id BETWEEN s.id AND s.id + 1"
SOURCE = pa.table({"id": pa.array([2, 3, 5], pa.int64()), "value": pa.array([None, 30, -1], pa.int64())})
UPDATES = (update_all(condition="s.id > t.id - 1"), update_all(condition="s.value = 1"))


def test_a_merge_without_insert_clauses_that_adds_rows_fails_and_changes_nothing(spark, tmp_path):
    target = make_table(tmp_path / "t", rows([0, 1, 3, 5]))
    before = table_state(target)
    spec = MergeSpec(target, source_file(tmp_path, SOURCE), ON_A_RANGE, UPDATES)
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_NUM_RECORDS_MISMATCH"
    assert str(raised.value).startswith(
        "[DELTA_NUM_RECORDS_MISMATCH] Failed to validate the number of records in MERGE without INSERT "
        "clauses. Added 5 records and removed 4 records."
    )
    assert "Make ON match at most one source row per target row" in str(raised.value)
    assert table_state(target) == before
    assert files_on_disk_match_log(target)


def test_a_merge_with_a_delete_clause_that_removes_more_commits_the_row_twice_as_delta_does(
    spark, tmp_path, caplog
):
    target = make_table(tmp_path / "t", rows([0, 1, 3, 5, 6]))
    clauses = (delete(condition="s.value < 0"), *UPDATES)
    spec = MergeSpec(target, source_file(tmp_path, SOURCE), ON_A_RANGE, clauses)
    with caplog.at_level(logging.WARNING, logger=merge.__name__):
        result = run_merge(spark, spec)
    assert result.committed
    assert [r["id"] for r in sorted_rows(target)] == [0, 1, 3, 3]
    # The metrics count row 3's pair with source row 2 as a copied row that was also removed.
    assert (result.metrics[m.NUM_TARGET_ROWS_COPIED], result.metrics[m.NUM_TARGET_ROWS_DELETED]) == (3, 2)
    assert "The files add 4 rows and remove 5; the merge metrics say 4 and 6" in caplog.text


def test_a_merge_without_delete_clauses_that_loses_rows_fails_and_changes_nothing(
    spark, tmp_path, monkeypatch
):
    target = make_table(tmp_path / "t", rows([1, 2, 3]))
    before = table_state(target)
    rewrite = merge.EXECUTORS["matched_only"]

    def losing_a_file(*args):
        changes = rewrite(*args)
        return dataclasses.replace(changes, added=changes.added[:-1])

    monkeypatch.setitem(merge.EXECUTORS, "matched_only", losing_a_file)
    spec = MergeSpec(target, source_file(tmp_path, rows([2])), "t.id = s.id", (update_all(),))
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, spec)
    assert str(raised.value).startswith(
        "[DELTA_NUM_RECORDS_MISMATCH] Failed to validate the number of records in MERGE without DELETE "
        "clauses. Added 0 records and removed 3 records."
    )
    assert str(raised.value).endswith("Nothing was committed. Please report it with the merge spec.")
    assert table_state(target) == before
