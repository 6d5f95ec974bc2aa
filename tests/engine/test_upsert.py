"""The classic executor's upsert on a real SparkSession, checked against deltalake's own merge."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.files.writer import STAGING_PREFIX
from airflow_provider_deltamerge.delta.log.merge_commits import find_merge_commit
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import MergeExecutionError, SourceError
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    delete,
    insert,
    insert_all,
    update,
    update_all,
)
from airflow_provider_deltamerge.spec.json_form import spec_hash
from tests.conftest import make_table, table_state
from tests.oracle import merge_with_deltalake, sorted_rows

SOURCE = pa.table(
    {
        "id": pa.array([3, 4, 20, 21], pa.int64()),
        "qty": pa.array([1, 2, 3, None], pa.int32()),
        "region": pa.array(["us", "eu", "eu", None]),
    }
)


def write_source(tmp_path: Path, data: pa.Table = SOURCE) -> str:
    path = tmp_path / "source.parquet"
    pq.write_table(data, path)
    return str(path)


@pytest.mark.parametrize("partition_by", [None, ["region"]], ids=["unpartitioned", "partitioned"])
def test_upsert_matches_oracle(spark, tmp_path, partition_by):
    # Given: two identical targets (ids 0-9) and a source updating ids 3, 4 and inserting 20, 21
    ours = make_table(tmp_path / "ours", partition_by=partition_by)
    oracle = make_table(tmp_path / "oracle", partition_by=partition_by)
    spec = MergeSpec(
        target=ours,
        source=PathSource(write_source(tmp_path)),
        condition="t.id = s.id",
        clauses=(update_all(), insert_all()),
    )
    # When: our engine and deltalake's merge run on the same inputs
    result = run_merge(spark, spec)
    expected = merge_with_deltalake(oracle, spec, SOURCE)
    # Then: same rows, same counts, one new version
    assert sorted_rows(ours) == sorted_rows(oracle)
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == expected["num_target_rows_inserted"] == 2
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == expected["num_target_rows_updated"] == 2
    assert result.metrics[m.NUM_SOURCE_ROWS] == expected["num_source_rows"] == 4
    assert result.committed and result.version == DeltaTable(ours).version() == 1
    # Partitions as Delta counts them: both region files are rewritten; eu, us and NULL receive files.
    partitions = (
        result.metrics[m.NUM_TARGET_PARTITIONS_REMOVED_FROM],
        result.metrics[m.NUM_TARGET_PARTITIONS_ADDED_TO],
    )
    assert partitions == ((2, 3) if partition_by else (0, 0))


def test_metrics_reach_the_commit_and_follow_delta_definitions(spark, tmp_path):
    target = make_table(tmp_path / "t")
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path)),
        condition="t.id = s.id",
        clauses=(update_all(), insert_all()),
    )
    result = run_merge(spark, spec, provenance={"dagId": "d", "runId": "r"})
    metrics = result.metrics
    # One target file of 10 rows is touched: 2 updated, 8 copied; 2 inserted.
    assert metrics[m.NUM_TARGET_ROWS_COPIED] == 8
    assert metrics[m.NUM_OUTPUT_ROWS] == 2 + 2 + 8
    assert metrics[m.NUM_TARGET_FILES_REMOVED] == metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 1
    assert metrics[m.NUM_TARGET_FILES_ADDED] >= 1
    commit = DeltaTable(target).history(1)[0]
    assert {k: int(v) for k, v in commit["operationMetrics"].items()} == dict(metrics)
    assert commit["deltamerge"]["specHash"] == spec_hash(spec)
    assert commit["deltamerge"]["dagId"] == "d"
    assert commit["operationParameters"]["predicate"] == '["t.id = s.id"]'


def test_added_files_carry_stats_and_leave_no_litter(spark, tmp_path):
    target = make_table(tmp_path / "t", partition_by=["region"])
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path)),
        condition="t.id = s.id",
        clauses=(insert_all(),),
    )
    run_merge(spark, spec)
    adds = pa.table(DeltaTable(target).get_add_actions(flatten=True)).to_pylist()
    assert sum(a["num_records"] for a in adds) == 12
    assert all(a["min.id"] is not None and a["max.id"] >= a["min.id"] for a in adds)
    leftovers = [
        p.name for p in Path(target).rglob("*") if p.name.startswith((STAGING_PREFIX, ".part", "_SUCCESS"))
    ]
    assert leftovers == []


def test_conditional_clauses_and_delete_match_oracle(spark, tmp_path):
    ours, oracle = make_table(tmp_path / "ours"), make_table(tmp_path / "oracle")
    spec = MergeSpec(
        target=ours,
        source=PathSource(write_source(tmp_path)),
        condition="t.id = s.id",
        clauses=(
            delete(condition="s.qty < 2"),
            update({"qty": "t.qty + s.qty"}),
            insert_all(condition="s.region IS NOT NULL"),
        ),
    )
    result = run_merge(spark, spec)
    expected = merge_with_deltalake(oracle, spec, SOURCE)
    assert sorted_rows(ours) == sorted_rows(oracle)
    for ours_name, oracle_name in [
        (m.NUM_TARGET_ROWS_DELETED, "num_target_rows_deleted"),
        (m.NUM_TARGET_ROWS_UPDATED, "num_target_rows_updated"),
        (m.NUM_TARGET_ROWS_INSERTED, "num_target_rows_inserted"),
        (m.NUM_TARGET_ROWS_COPIED, "num_target_rows_copied"),
    ]:
        assert result.metrics[ours_name] == expected[oracle_name], ours_name


def test_merge_into_empty_table_inserts_everything(spark, tmp_path):
    target = make_table(tmp_path / "t", SOURCE.slice(0, 0))
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path)),
        condition="t.id = s.id",
        clauses=(update_all(), insert_all()),
    )
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_SOURCE_ROWS] == 4
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 4
    assert sorted_rows(target) == sorted(
        SOURCE.to_pylist(), key=lambda r: [(v is None, str(v)) for v in r.values()]
    )


def test_merge_that_changes_nothing_makes_no_commit(spark, tmp_path):
    target = make_table(tmp_path / "t")
    source = SOURCE.filter(pa.compute.greater(SOURCE["id"], 10))  # no match
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path, source)),
        condition="t.id = s.id",
        clauses=(update_all(),),
    )
    before = table_state(target)
    result = run_merge(spark, spec)
    assert not result.committed
    assert result.version == 0
    assert table_state(target) == before


def test_missing_source_fails_naming_the_path_and_changes_nothing(spark, tmp_path):
    target = make_table(tmp_path / "t")
    before = table_state(target)
    missing = str(tmp_path / "no-such-extract.parquet")
    spec = MergeSpec(
        target=target, source=PathSource(missing), condition="t.id = s.id", clauses=(insert_all(),)
    )
    with pytest.raises(SourceError, match=r"no-such-extract\.parquet"):
        run_merge(spark, spec)
    assert table_state(target) == before


def test_multiple_matches_fail_with_delta_error_and_change_nothing(spark, tmp_path):
    target = make_table(tmp_path / "t")
    before = table_state(target)
    duplicated = pa.table(
        {
            "id": pa.array([3, 3], pa.int64()),
            "qty": pa.array([1, 2], pa.int32()),
            "region": pa.array(["eu", "eu"]),
        }
    )
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path, duplicated)),
        condition="t.id = s.id",
        clauses=(update_all(),),
    )
    with pytest.raises(MergeExecutionError, match="multiple source rows matched") as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    assert "id=3" in str(raised.value)
    assert table_state(target) == before


def test_unconditional_delete_tolerates_multiple_matches(spark, tmp_path):
    # Delta's one exception to the multiple-match rule, with the deleted count corrected.
    target = make_table(tmp_path / "t")
    duplicated = pa.table(
        {
            "id": pa.array([3, 3, 5], pa.int64()),
            "qty": pa.array([1, 2, 3], pa.int32()),
            "region": pa.array(["eu", "eu", "us"]),
        }
    )
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path, duplicated)),
        condition="t.id = s.id",
        clauses=(delete(),),
    )
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_TARGET_ROWS_DELETED] == 2
    assert sorted(r["id"] for r in sorted_rows(target)) == [0, 1, 2, 4, 6, 7, 8, 9]


def test_overflow_during_the_write_fails_and_leaves_no_files(spark, tmp_path):
    # The failure comes after files were written: they must be gone, and the log untouched.
    target = make_table(tmp_path / "t", partition_by=["region"])
    before = table_state(target)
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path)),
        condition="t.id = s.id",
        clauses=(update({"qty": "s.qty * 10000000000"}), insert_all()),
    )
    with pytest.raises(MergeExecutionError, match=r"CAST_OVERFLOW|overflow"):
        run_merge(spark, spec)
    assert table_state(target) == before
    on_disk = {p.relative_to(target).as_posix() for p in Path(target).rglob("*.parquet")}
    in_log = pa.table(DeltaTable(target).get_add_actions(flatten=True))["path"].to_pylist()
    assert on_disk == {unquote(path) for path in in_log}


def test_commit_is_found_by_submission_id(spark, tmp_path):
    target = make_table(tmp_path / "t")
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path)),
        condition="t.id = s.id",
        clauses=(insert_all(),),
    )
    result = run_merge(spark, spec, provenance={"submissionId": "job-42"})
    commit = find_merge_commit(target, submission_id="job-42")
    assert commit is not None
    assert commit.version == result.version
    assert commit.metrics == result.metrics
    assert find_merge_commit(target, submission_id="another-job") is None


def test_source_deduplication_keeps_the_latest_change(spark, tmp_path):
    # A CDC feed with two changes for id 3: without de-duplication this is a multiple match.
    target = make_table(tmp_path / "t")
    changes = pa.table(
        {
            "id": pa.array([3, 3, 42], pa.int64()),
            "qty": pa.array([100, 300, 7], pa.int32()),
            "region": pa.array(["eu", "us", "eu"]),
            "changed_at": pa.array([1, 2, 1], pa.int64()),
        }
    )
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path, changes)),
        condition="t.id = s.id",
        clauses=(update({"qty": "s.qty", "region": "s.region"}), insert({"id": "s.id", "qty": "s.qty"})),
        deduplicate_source_by=("id",),
        deduplicate_order_by=("changed_at",),
    )
    result = run_merge(spark, spec)
    rows = {r["id"]: r for r in sorted_rows(target)}
    assert rows[3] == {"id": 3, "qty": 300, "region": "us"}
    assert rows[42] == {"id": 42, "qty": 7, "region": None}
    assert result.metrics[m.NUM_SOURCE_ROWS] == 2


def test_source_deduplication_breaks_ties_on_a_map_column(spark, tmp_path):
    # Two changes for id 3 at the same time, differing only in a map (a type Spark cannot sort by): the
    # tie is broken by the map's JSON text, the greatest kept, where sorting by the map itself fails.
    target = make_table(tmp_path / "t")
    changes = pa.table(
        {
            "id": pa.array([3, 3], pa.int64()),
            "qty": pa.array([100, 100], pa.int32()),
            "attrs": pa.array([[("k", 1)], [("k", 2)]], pa.map_(pa.string(), pa.int64())),
            "changed_at": pa.array([1, 1], pa.int64()),
        }
    )
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path, changes)),
        condition="t.id = s.id",
        clauses=(update({"qty": "s.qty + s.attrs['k']"}),),
        deduplicate_source_by=("id",),
        deduplicate_order_by=("changed_at",),
    )
    result = run_merge(spark, spec)
    assert {r["id"]: r["qty"] for r in sorted_rows(target)}[3] == 102
    assert result.metrics[m.NUM_SOURCE_ROWS] == 1
