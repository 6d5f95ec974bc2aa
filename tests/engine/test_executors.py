"""Executor choice, the insert-only and matched-only executors, the multiple-match rule, Delta's worked
metric examples, and the absence of Python UDFs from the plans the engine runs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.execute import joins
from airflow_provider_deltamerge.exceptions import MergeExecutionError, MergeSpecError
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    delete,
    delete_by_source,
    insert,
    insert_all,
    update,
    update_all,
    update_by_source,
)
from airflow_provider_deltamerge.spec.names import hidden_name
from bench.spark_work import last_execution_id
from tests.conftest import make_table, table_state
from tests.engine.conftest import executed_plans, python_udf_plans
from tests.oracle import sorted_rows

MULTIPLE_MATCH = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"


def rows(ids: list[int | None], values: list[int | None] | None = None) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "value": pa.array(values if values is not None else [i and i * 10 for i in ids], pa.int64()),
        }
    )


def source_file(tmp_path: Path, data: pa.Table, name: str = "source.parquet") -> PathSource:
    path = tmp_path / name
    pq.write_table(data, path)
    return PathSource(str(path))


def table_in_files(path: Path, *files: pa.Table, properties: dict[str, str] | None = None) -> str:
    """A Delta table with one data file per given table (each written by its own append), created with the
    given table properties."""
    for n, data in enumerate(files):
        write_deltalake(str(path), data, mode="append", configuration=properties if n == 0 else None)
    return str(path)


# --- executor choice -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("clauses", "executor"),
    [
        ((insert_all(condition="s.value > 0"), insert_all()), "insert_only"),
        ((update_all(condition="s.value > 0"), delete()), "matched_only"),
        ((update_all(), insert_all()), "classic"),
        ((delete_by_source(),), "classic"),
    ],
    ids=["insert-only", "matched-only", "upsert", "by-source-only"],
)
def test_executor_is_chosen_by_the_clause_mix(spark, tmp_path, clauses, executor):
    target = make_table(tmp_path / "t", rows([1, 2]))
    spec = MergeSpec(target, source_file(tmp_path, rows([2, 3])), "t.id = s.id", clauses)
    assert run_merge(spark, spec).executor == executor


@pytest.mark.parametrize(
    ("forced", "clauses", "named"),
    [
        ("insert_only", (update_all(), insert_all()), "clause 1 is WHEN MATCHED UPDATE"),
        ("matched_only", (update_all(), insert_all()), "clause 2 is WHEN NOT MATCHED INSERT"),
        ("matched_only", (delete_by_source(),), "clause 1 is WHEN NOT MATCHED BY SOURCE DELETE"),
    ],
)
def test_forced_executor_that_cannot_serve_the_clauses_is_refused(spark, tmp_path, forced, clauses, named):
    target = make_table(tmp_path / "t", rows([1, 2]))
    before = table_state(target)
    spec = MergeSpec(target, source_file(tmp_path, rows([2, 3])), "t.id = s.id", clauses)
    with pytest.raises(MergeSpecError, match=f"The {forced} executor serves .*{named}.*executor='classic'"):
        run_merge(spark, spec, executor=forced)
    assert table_state(target) == before


def test_unknown_executor_is_refused(spark, tmp_path):
    target = make_table(tmp_path / "t", rows([1]))
    spec = MergeSpec(target, source_file(tmp_path, rows([2])), "t.id = s.id", (insert_all(),))
    with pytest.raises(MergeSpecError, match="choose one of insert_only, matched_only, classic"):
        run_merge(spark, spec, executor="fast")  # type: ignore[arg-type]


# --- insert-only -----------------------------------------------------------------------------------------


def test_insert_only_appends_every_unmatched_duplicate_and_removes_no_file(spark, tmp_path):
    # Given: target ids 1, 2; source 2 (matches), 3 twice, 4 (filtered out by the clause), NULL
    target = make_table(tmp_path / "t", rows([1, 2]))
    source = source_file(tmp_path, rows([2, 3, 3, 4, None], [20, 30, 31, -4, 5]))
    spec = MergeSpec(target, source, "t.id = s.id", (insert_all(condition="s.value > 0"),))
    # When
    result = run_merge(spark, spec)
    # Then: both 3s and the NULL-key row are inserted; numSourceRows counts before the clause filter
    assert result.executor == "insert_only"
    assert sorted(((r["id"] or -1), r["value"]) for r in sorted_rows(target)) == [
        (-1, 5),
        (1, 10),
        (2, 20),
        (3, 30),
        (3, 31),
    ]
    assert result.metrics[m.NUM_SOURCE_ROWS] == 5
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 3
    assert result.metrics[m.NUM_TARGET_FILES_REMOVED] == result.metrics[m.NUM_TARGET_ROWS_COPIED] == 0
    assert len(DeltaTable(target).file_uris()) == 1 + result.metrics[m.NUM_TARGET_FILES_ADDED]


def test_classic_checks_multiple_matches_that_insert_only_tolerates(spark, tmp_path):
    # Delta with its insert-only optimisation off: a duplicated source key that matches is an error.
    target = make_table(tmp_path / "t", rows([1, 2]))
    before = table_state(target)
    spec = MergeSpec(target, source_file(tmp_path, rows([2, 2, 3])), "t.id = s.id", (insert_all(),))
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, spec, executor="classic")
    assert raised.value.error_class == MULTIPLE_MATCH
    assert table_state(target) == before


# --- matched-only ----------------------------------------------------------------------------------------


def test_matched_only_leaves_files_whose_matches_no_clause_acts_on(spark, tmp_path):
    # Given: ids 1-2 in one file, 3-4 in another; source matches 1 (acting) and 3 (no clause acts)
    target = table_in_files(tmp_path / "t", rows([1, 2]), rows([3, 4]))
    source = source_file(tmp_path, rows([1, 3], [100, -100]))
    spec = MergeSpec(target, source, "t.id = s.id", (update({"value": "s.value"}, condition="s.value > 0"),))
    # When
    result = run_merge(spark, spec)
    # Then: only the first file is rewritten
    assert result.executor == "matched_only"
    assert result.metrics[m.NUM_TARGET_FILES_REMOVED] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == result.metrics[m.NUM_TARGET_ROWS_COPIED] == 1
    assert [(r["id"], r["value"]) for r in sorted_rows(target)] == [(1, 100), (2, 20), (3, 30), (4, 40)]


def test_matched_only_refuses_multiple_matches_even_when_no_clause_acts_on_them(spark, tmp_path):
    # Delta counts matches on the ON condition only (reference section 1.4).
    target = make_table(tmp_path / "t", rows([1, 2]))
    before = table_state(target)
    source = source_file(tmp_path, rows([1, 1], [10, 11]))
    spec = MergeSpec(target, source, "t.id = s.id", (update_all(condition="s.value = 10"),))
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == MULTIPLE_MATCH
    assert table_state(target) == before


@pytest.mark.parametrize(
    ("source_values", "inserting"),
    [([None, None], False), ([None, 5], False), ([5, 6], False), ([None, None], True)],
    ids=["both-null", "one-null", "none-null", "with-an-insert-clause"],
)
def test_a_match_whose_matched_only_conditions_are_null_counts_as_delta_counts_it(
    spark, tmp_path, source_values, inserting
):
    # Given: two source rows matching target id 1, under a condition that is NULL where the source value is
    # NULL; the same statement run by Delta's MERGE on a copy of the table decides the outcome: Delta does not
    # count a match whose MATCHED conditions are NULL when the merge has MATCHED clauses alone
    ours = make_table(tmp_path / "ours", rows([1, 2]))
    theirs = make_table(tmp_path / "theirs", rows([1, 2]))
    source = source_file(tmp_path, rows([1, 1], source_values))
    clauses = "WHEN MATCHED AND s.value > 10 THEN UPDATE SET value = s.value" + (
        " WHEN NOT MATCHED THEN INSERT *" if inserting else ""
    )
    try:
        spark.sql(
            f"MERGE INTO delta.`{theirs}` AS t USING parquet.`{source.path}` AS s ON t.id = s.id {clauses}"
        ).collect()
        delta_refused = False
    except (PySparkException, Py4JJavaError) as err:
        assert MULTIPLE_MATCH in str(err)
        delta_refused = True
    spec = MergeSpec(
        ours,
        source,
        "t.id = s.id",
        (update({"value": "s.value"}, condition="s.value > 10"), *((insert_all(),) if inserting else ())),
    )
    # When
    try:
        run_merge(spark, spec)
        refused = False
    except MergeExecutionError as err:
        assert err.error_class == MULTIPLE_MATCH
        refused = True
    # Then: refused where Delta refuses, and the same rows where it does not
    assert refused is delta_refused
    assert delta_refused is (source_values == [5, 6] or inserting)
    assert sorted_rows(ours) == sorted_rows(theirs)


# --- the multiple-match rule without MATCHED clauses (reference section 3.1) -------------------------------


@pytest.mark.parametrize(
    "clauses",
    [
        (insert_all(), delete_by_source()),
        (update_by_source({"value": "0"}),),
        (delete(condition="s.value > 0"), insert_all()),
        (update({"value": "s.value"}, condition="s.value > 100"), delete()),
    ],
    ids=["insert+by-source", "by-source-only", "conditional-delete", "update+delete"],
)
def test_multiple_matches_fail_whatever_the_clause_mix(spark, tmp_path, clauses):
    target = make_table(tmp_path / "t", rows([1, 2]))
    before = table_state(target)
    spec = MergeSpec(target, source_file(tmp_path, rows([2, 2, 3])), "t.id = s.id", clauses)
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == MULTIPLE_MATCH
    assert table_state(target) == before


def test_unconditional_delete_with_insert_tolerates_multiple_matches(spark, tmp_path):
    target = make_table(tmp_path / "t", rows([1, 2]))
    spec = MergeSpec(target, source_file(tmp_path, rows([2, 2, 3])), "t.id = s.id", (delete(), insert_all()))
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_TARGET_ROWS_DELETED] == result.metrics[m.NUM_TARGET_ROWS_MATCHED_DELETED] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    assert [r["id"] for r in sorted_rows(target)] == [1, 3]


@pytest.mark.parametrize(
    ("source_ids", "counted_per_row"),
    [([2, 3, 4], False), ([2, 3, 4, 4], True), ([2, 3, None, None], True)],
    ids=["unique-keys", "repeated-unmatched-key", "repeated-null-key"],
)
@pytest.mark.usefixtures("two_phases")
def test_phase_one_counts_matches_per_target_row_only_where_source_keys_repeat(
    spark, tmp_path, source_ids, counted_per_row
):
    # Given: target ids 1-3 in two files; a source updating 2 and 3 whose other rows match nothing, their
    # keys repeated or not (pruning sees every source key: with none repeated, no target row can match two
    # source rows, and phase 1 needs no count of matches per target row)
    target = table_in_files(tmp_path / "t", rows([1, 2]), rows([3]))
    values = [100 * (n + 2) for n in range(len(source_ids))]
    source = source_file(tmp_path, rows(source_ids, values))
    spec = MergeSpec(target, source, "t.id = s.id", (update_all(), insert_all()))
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, spec)
    # Then: the rows and counts are the same either way; only a repeated key brings the per-row count
    new_rows = [(i, v) for i, v in zip(source_ids, values, strict=True) if i not in (2, 3)]
    assert sorted(
        (r["id"] if r["id"] is not None else -1, r["value"]) for r in sorted_rows(target)
    ) == sorted([(1, 10), (2, 200), (3, 300), *((-1 if i is None else i, v) for i, v in new_rows)])
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 2
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == len(new_rows)
    assert result.metrics[m.NUM_TARGET_FILES_REMOVED] == 2
    # The per-row count: count(the match flag) grouped by file and row index.
    counted = f"count({hidden_name('match')}"
    per_row = [plan for plan in executed_plans(spark, since) if counted in plan]
    assert bool(per_row) == counted_per_row, executed_plans(spark, since)


def test_row_counts_are_observed_on_the_output_columns_not_on_the_joined_rows(spark, tmp_path):
    # Given: a rewrite that updates, copies and inserts (Spark observes outside whole-stage code generation:
    # every row crossing the observation is copied whole, and a joined row holds both sides)
    target = table_in_files(tmp_path / "t", rows([1, 2]), rows([3]))
    source = source_file(tmp_path, rows([2, 4], [200, 400]))
    spec = MergeSpec(target, source, "t.id = s.id", (update_all(), insert_all()))
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, spec)
    # Then: the counts are right, and each observation of them reads the table's two columns and the action
    assert [(r["id"], r["value"]) for r in sorted_rows(target)] == [(1, 10), (2, 200), (3, 30), (4, 400)]
    assert (result.metrics[m.NUM_TARGET_ROWS_UPDATED], result.metrics[m.NUM_TARGET_ROWS_COPIED]) == (1, 1)
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    observed = re.compile(r"\(\d+\) CollectMetrics\nInput \[(\d+)\]: [^\n]*\nArguments: [^\n]*numTarget")
    # (Adaptive execution describes each observation twice: in its final plan and its initial one.)
    widths = {int(n) for plan in executed_plans(spark, since) for n in observed.findall(plan)}
    assert widths == {3}, executed_plans(spark, since)


def test_deleting_every_row_of_a_partitioned_table_with_an_empty_source_counts_the_deletes(spark, tmp_path):
    # Found by test_differential: here Spark's adaptive execution loses the observed counts, and the
    # record-count check refused the merge.
    data = pa.table({"id": pa.array([None], pa.int64()), "name": ["a"]})
    target = make_table(tmp_path / "t", data, partition_by=["name"])
    spec = MergeSpec(
        target,
        source_file(tmp_path, data.slice(0, 0)),
        "t.id = s.id",
        (delete_by_source(condition="t.id IS NULL"),),
    )
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_TARGET_ROWS_DELETED] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_DELETED] == 1
    assert sorted_rows(target) == []


# --- Delta's worked metric examples (reference section 1.11) ----------------------------------------------


@pytest.fixture
def hundred_rows_in_five_files(tmp_path):
    """Target ids 0..99 in 5 files of 20 rows; source ids 50..149."""
    target = table_in_files(tmp_path / "t", *(rows(list(range(k, k + 20))) for k in range(0, 100, 20)))
    source = source_file(tmp_path, rows(list(range(50, 150)), [-i for i in range(50, 150)]))
    return target, source


@pytest.mark.parametrize(
    ("clauses", "executors", "expected", "files_read"),
    [
        # The source's key range (50..149) lets pruning skip the two files of ids 0..39, except when a
        # NOT MATCHED BY SOURCE clause must see every target row.
        ((update_all(),), ["matched_only", "classic"], (100, 0, 50, 0, 10, 60, 3), 3),
        ((update_all(), insert_all()), ["classic"], (100, 50, 50, 0, 10, 110, 3), 3),
        ((update_all(), insert_all(), delete_by_source()), ["classic"], (100, 50, 50, 50, 0, 100, 5), 5),
    ],
    ids=["update", "upsert", "upsert+delete-by-source"],
)
def test_delta_worked_metric_examples(
    spark, hundred_rows_in_five_files, tmp_path, clauses, executors, expected, files_read
):
    target, source = hundred_rows_in_five_files
    names = (
        m.NUM_SOURCE_ROWS,
        m.NUM_TARGET_ROWS_INSERTED,
        m.NUM_TARGET_ROWS_UPDATED,
        m.NUM_TARGET_ROWS_DELETED,
        m.NUM_TARGET_ROWS_COPIED,
        m.NUM_OUTPUT_ROWS,
        m.NUM_TARGET_FILES_REMOVED,
    )
    for executor in executors:
        copy = str(shutil.copytree(target, tmp_path / executor))
        spec = MergeSpec(copy, source, "t.id = s.id", clauses)
        metrics = run_merge(spark, spec, executor=executor).metrics
        assert tuple(metrics[name] for name in names) == expected, executor
        skipping = (metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING], metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING])
        assert skipping == (5, files_read), executor


# --- no Python on the executors ---------------------------------------------------------------------------


def test_udf_detector_sees_a_python_udf(spark):
    # The control for the test below: a plan with a Python UDF is caught.
    since = last_execution_id(spark)
    plus_one = F.udf(lambda x: x + 1, "long")
    spark.range(3).select(plus_one("id")).collect()
    assert python_udf_plans(spark, since=since)


@pytest.mark.parametrize(
    "clauses",
    [
        (insert({"id": "s.id", "value": "s.value * 2"}, condition="s.value > 0"),),
        (update({"value": "s.value"}, condition="s.value > 0"), delete()),
        (update_all(), insert_all(), update_by_source({"value": "t.value + 1"}, condition="t.id > 0")),
    ],
    ids=["insert_only", "matched_only", "classic"],
)
def test_merge_plans_evaluate_no_python(spark, tmp_path, clauses):
    target = make_table(tmp_path / "t", rows([1, 2, 3]))
    spec = MergeSpec(target, source_file(tmp_path, rows([2, 3, 4])), "t.id = s.id", clauses)
    since = last_execution_id(spark)
    run_merge(spark, spec)
    assert last_execution_id(spark) > since  # the merge's queries were recorded
    assert python_udf_plans(spark, since=since) == []


# --- inserts with no candidate file ----------------------------------------------------------------------


def write_plans(spark, since: int) -> list[str]:
    """The physical plans Spark ran after execution ``since`` that wrote files."""
    return [plan for plan in executed_plans(spark, since) if "InsertIntoHadoopFsRelationCommand" in plan]


@pytest.mark.parametrize(
    ("executor", "clauses"), [("insert_only", (insert_all(),)), ("classic", (update_all(), insert_all()))]
)
def test_inserts_with_no_candidate_file_are_written_straight_from_the_source_scan(
    spark, tmp_path, executor, clauses
):
    # Given: an unpartitioned table (ids 1-3) and a source whose keys rule out its only file
    target = table_in_files(tmp_path / "t", rows([1, 2, 3]))
    spec = MergeSpec(target, source_file(tmp_path, rows([100, 101])), "t.id = s.id", clauses)
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, spec, executor=executor)
    # Then: the rows are inserted by one write with no join and no shuffle (not even a rebalance)
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 0
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 2
    assert sorted(r["id"] for r in sorted_rows(target)) == [1, 2, 3, 100, 101]
    (plan,) = write_plans(spark, since)
    assert "Join" not in plan and "Exchange" not in plan, plan


# --- the rewrite -----------------------------------------------------------------------------------------


@pytest.fixture(params=[None, 0], ids=["default-budget", "no-broadcast"])
def broadcast_budget(request, monkeypatch) -> int | None:
    """None: the default memory budget for broadcasting a source; 0: a budget no source fits in."""
    if request.param is not None:
        monkeypatch.setattr(joins, "MAX_BROADCAST_BYTES", request.param)
    return request.param


def shuffles(plan: str) -> list[str]:
    """The plan's exchanges that move rows between tasks (a broadcast only copies the small side)."""
    return [line for line in plan.splitlines() if "Exchange" in line and "BroadcastExchange" not in line]


@pytest.mark.usefixtures("two_phases")
def test_a_rewrite_without_inserts_streams_the_touched_files_past_a_broadcast_source(
    spark, tmp_path, broadcast_budget
):
    # Given: two files (ids 1-3, 4-6) and a source deleting id 2
    target = table_in_files(tmp_path / "t", rows([1, 2, 3]), rows([4, 5, 6]))
    spec = MergeSpec(target, source_file(tmp_path, rows([2])), "t.id = s.id", (delete(),))
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, spec)
    # Then: the same rows either way; within the budget the write shuffles nothing (no rebalance: the
    # touched file's scan sizes the output), beyond it the rows are rebalanced before the write
    assert sorted(r["id"] for r in sorted_rows(target)) == [1, 3, 4, 5, 6]
    assert result.metrics[m.NUM_TARGET_ROWS_DELETED] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_COPIED] == 2
    (plan,) = write_plans(spark, since)
    if broadcast_budget is None:
        assert "BroadcastHashJoin" in plan and shuffles(plan) == [], plan
    else:
        assert shuffles(plan) != [], plan


@pytest.mark.parametrize("source_ids", [[2], list(range(2, 60))], ids=["within-the-share", "beyond-it"])
def test_the_broadcast_budget_is_a_share_of_the_heap(spark, tmp_path, monkeypatch, source_ids):
    # Given: a heap share that leaves room for a source of about 40 rows (of id and value), no floor, and a
    # source deleting one row or 58 rows
    heap = spark._jvm.java.lang.Runtime.getRuntime().maxMemory()
    monkeypatch.setattr(joins, "MIN_BROADCAST_BYTES", 0)
    monkeypatch.setattr(joins, "_HEAP_SHARE", heap // 2_000)
    budget = joins.broadcast_budget(spark)
    target = table_in_files(tmp_path / "t", rows(list(range(1, 31))), rows(list(range(31, 61))))
    spec = MergeSpec(target, source_file(tmp_path, rows(source_ids)), "t.id = s.id", (delete(),))
    since = last_execution_id(spark)
    # When
    run_merge(spark, spec)
    # Then: the budget is the heap's share, and the source is broadcast only while it fits in it
    assert 1_900 <= budget <= 2_100
    assert sorted(r["id"] for r in sorted_rows(target)) == sorted(set(range(1, 61)) - set(source_ids))
    (plan,) = write_plans(spark, since)
    join = "BroadcastHashJoin" if len(source_ids) == 1 else "ShuffledHashJoin"
    assert join in plan, plan


@pytest.mark.usefixtures("two_phases")
def test_an_upsert_streams_the_touched_files_and_finds_inserts_without_shuffling_them(
    spark, tmp_path, broadcast_budget
):
    # Given: two files (ids 1-3, 4-6); the source updates 2, and brings 7 twice (matching nothing) and a
    # NULL key
    target = table_in_files(tmp_path / "t", rows([1, 2, 3]), rows([4, 5, 6]))
    source = source_file(tmp_path, rows([2, 7, 7, None], [99, 70, 71, 5]))
    spec = MergeSpec(target, source, "t.id = s.id", (update_all(), insert_all()))
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, spec)
    # Then: the same rows and counts either way; within the budget the rewrite and the inserts come from
    # broadcast joins and nothing is shuffled, beyond it one full outer join shuffles both sides, and
    # hashes the source instead of sorting both
    assert sorted((r["id"] or -1, r["value"]) for r in sorted_rows(target)) == [
        (-1, 5),
        (1, 10),
        (2, 99),
        (3, 30),
        (4, 40),
        (5, 50),
        (6, 60),
        (7, 70),
        (7, 71),
    ]
    counts = (
        m.NUM_SOURCE_ROWS,
        m.NUM_SOURCE_ROWS_IN_SECOND_SCAN,
        m.NUM_TARGET_ROWS_UPDATED,
        m.NUM_TARGET_ROWS_INSERTED,
        m.NUM_TARGET_ROWS_COPIED,
        m.NUM_TARGET_FILES_REMOVED,
        m.NUM_TARGET_FILES_ADDED,
    )
    # one file added: the touched file is read in one task, and the inserts are written by it (broadcast), or
    # the write is rebalanced (shuffled); not into a small file of their own
    assert tuple(result.metrics[name] for name in counts) == (4, 4, 1, 3, 2, 1, 1)
    (plan,) = write_plans(spark, since)
    if broadcast_budget is None:
        assert "ShuffledHashJoin" not in plan and "SortMergeJoin" not in plan and shuffles(plan) == [], plan
        # the inserts are the source rows without the keys phase 1 matched (held in Spark's cache): the
        # matched file is not read again to find them
        assert "BroadcastHashJoin LeftAnti" in plan and "InMemoryTableScan" in plan, plan
        assert "LeftSemi" not in plan, plan
    else:
        assert "ShuffledHashJoin FullOuter" in plan and "SortMergeJoin" not in plan, plan


@pytest.mark.usefixtures("two_phases")
def test_a_full_sync_rewrites_only_the_files_a_clause_acts_on(spark, tmp_path, broadcast_budget):
    # Given: three files; the export has file 1's rows with id 2 changed, file 2's rows unchanged, file 3's
    # rows without id 8, and a new id 10
    target = table_in_files(tmp_path / "t", rows([1, 2, 3]), rows([4, 5, 6]), rows([7, 8, 9]))
    export = rows([1, 2, 3, 4, 5, 6, 7, 9, 10], [10, 21, 30, 40, 50, 60, 70, 90, 100])
    clauses = (update_all(condition="s.value <> t.value"), insert_all(), delete_by_source())
    spec = MergeSpec(target, source_file(tmp_path, export), "t.id = s.id", clauses)
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, spec)
    # Then: the table mirrors the export; file 2 is neither rewritten nor copied (Delta would rewrite all
    # three), and its matched rows are not inserted again
    assert sorted((r["id"], r["value"]) for r in sorted_rows(target)) == [
        (1, 10),
        (2, 21),
        (3, 30),
        (4, 40),
        (5, 50),
        (6, 60),
        (7, 70),
        (9, 90),
        (10, 100),
    ]
    counts = (
        m.NUM_TARGET_ROWS_UPDATED,
        m.NUM_TARGET_ROWS_INSERTED,
        m.NUM_TARGET_ROWS_DELETED,
        m.NUM_TARGET_ROWS_COPIED,
        m.NUM_TARGET_FILES_REMOVED,
    )
    assert tuple(result.metrics[name] for name in counts) == (1, 1, 1, 4, 2)
    assert result.metrics[m.NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_DELETED] == 1
    # and the rewritten files' rows are joined without sorting them (broadcast, else hashed source)
    (plan,) = write_plans(spark, since)
    assert "SortMergeJoin" not in plan, plan
    join = "BroadcastHashJoin RightOuter" if broadcast_budget is None else "ShuffledHashJoin RightOuter"
    assert join in plan, plan


@pytest.mark.usefixtures("two_phases")
def test_a_full_sync_too_big_to_broadcast_joins_only_the_source_rows_of_touched_files(
    spark, tmp_path, monkeypatch
):
    # Given: the full sync above, plus a file of 300 unchanged rows, under a broadcast budget the export
    # (302 rows) exceeds and the touched files' keys (6 ids) and their matching source rows do not
    monkeypatch.setattr(joins, "MAX_BROADCAST_BYTES", 2_000)
    unchanged = list(range(100, 400))
    target = table_in_files(
        tmp_path / "t", rows([1, 2, 3]), rows([4, 5, 6]), rows([7, 8, 9]), rows(unchanged)
    )
    ids = [1, 2, 3, 4, 5, 6, 7, 9, 10, *unchanged]
    export = rows(ids, [21 if i == 2 else i * 10 for i in ids])
    clauses = (update_all(condition="s.value <> t.value"), insert_all(), delete_by_source())
    spec = MergeSpec(target, source_file(tmp_path, export), "t.id = s.id", clauses)
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, spec)
    # Then: the table mirrors the export; the rewrite joins the touched files with the few source rows
    # that match them (a semi join against their keys, both broadcast) instead of hashing the whole export,
    # and takes the inserts from the export by the one key phase 1 found unmatched (its full outer join kept
    # unmatched source rows), not from a join of the export with every matched target row
    assert sorted((r["id"], r["value"]) for r in sorted_rows(target)) == sorted(
        (i, 21 if i == 2 else i * 10) for i in ids
    )
    counts = (m.NUM_TARGET_ROWS_UPDATED, m.NUM_TARGET_ROWS_INSERTED, m.NUM_TARGET_ROWS_DELETED)
    assert tuple(result.metrics[name] for name in counts) == (1, 1, 1)
    assert result.metrics[m.NUM_SOURCE_ROWS] == result.metrics[m.NUM_SOURCE_ROWS_IN_SECOND_SCAN] == len(ids)
    (plan,) = write_plans(spark, since)
    assert "BroadcastHashJoin LeftSemi" in plan and "BroadcastHashJoin RightOuter" in plan, plan
    assert "ShuffledHashJoin RightOuter" not in plan and "SortMergeJoin" not in plan, plan
    assert "LeftAnti" not in plan, plan
    assert any("FullOuter" in p for p in executed_plans(spark, since)), executed_plans(spark, since)


@pytest.mark.parametrize(
    "condition",
    ["t.id = s.id", "t.id <=> s.id", "t.id = s.id AND s.value > 0"],
    ids=["equality", "null-safe", "source-only-conjunct"],
)
def test_unmatched_source_rows_are_all_inserted(spark, tmp_path, condition, broadcast_budget):
    # Given: target ids 1-6 in two files; a source updating 2, bringing new id 7 twice, two NULL ids and a
    # row of id 3 with a value the source-only conjunct rejects (-1); within the budget phase 1 keeps the
    # matches' keys for the insert branch (not with the source-only conjunct), beyond it the unmatched ones
    target = table_in_files(tmp_path / "t", rows([1, 2, 3]), rows([4, 5, 6]))
    source = rows([2, 7, 7, None, None, 3, *range(100, 140)], [99, 70, 71, 5, 6, -1, *range(100, 140)])
    spec = MergeSpec(target, source_file(tmp_path, source), condition, (update_all(), insert_all()))
    # When
    result = run_merge(spark, spec)
    # Then: every source row that matches no target row is inserted, duplicates and NULL keys included (a
    # NULL matches NULL under <=> only, and the target has none); the rejected row of id 3 too, as Delta does
    rejected = [(3, -1)] if "s.value > 0" in condition else []
    new_rows = [(7, 70), (7, 71), (-1, 5), (-1, 6), *((i, i) for i in range(100, 140)), *rejected]
    kept = {1: 10, 2: 99, 3: 30 if rejected else -1, 4: 40, 5: 50, 6: 60}
    expected = sorted([*kept.items(), *new_rows])
    assert (
        sorted((r["id"] if r["id"] is not None else -1, r["value"]) for r in sorted_rows(target)) == expected
    )
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == len(new_rows)
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == (1 if rejected else 2)


@pytest.mark.usefixtures("two_phases")
def test_two_integer_keys_are_not_packed_into_one_badly_hashed_long(spark, tmp_path):
    # Given: a target and a source keyed by two INT columns (Spark would pack them into one long, whose
    # hash folds the halves together: (ticket, item) keys then crowd a few slots)
    def keyed(tickets: list[int], items: list[int], values: list[int]) -> pa.Table:
        return pa.table(
            {
                "ticket": pa.array(tickets, pa.int32()),
                "item": pa.array(items, pa.int32()),
                "value": pa.array(values, pa.int64()),
            }
        )

    target = table_in_files(tmp_path / "t", keyed([1, 1, 2], [1, 2, 1], [10, 20, 30]))
    source = source_file(tmp_path, keyed([1, 3], [2, 1], [99, 40]))
    condition = "t.ticket = s.ticket AND t.item = s.item"
    spec = MergeSpec(target, source, condition, (update_all(), insert_all()))
    since = last_execution_id(spark)
    # When
    run_merge(spark, spec)
    # Then: the rows are right, and no join of the merge hashes a packed key
    assert sorted((r["ticket"], r["item"], r["value"]) for r in sorted_rows(target)) == [
        (1, 1, 10),
        (1, 2, 99),
        (2, 1, 30),
        (3, 1, 40),
    ]
    hashed = [plan for plan in executed_plans(spark, since) if "HashJoin" in plan]
    assert hashed and not any("shiftleft" in plan for plan in hashed), hashed
