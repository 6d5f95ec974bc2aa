"""Metric bounds checked before the commit, and dry runs: nothing committed, nothing left on disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.commit_match import MetricBounds
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import MergeGuardError, is_final
from airflow_provider_deltamerge.spec import MergeSpec, delete, insert_all, update_all
from tests.conftest import make_table, table_state
from tests.delta.helpers import files_on_disk_match_log
from tests.engine.test_executors import rows, source_file

# Source rows 2..5 against target rows 1..4: ids 2-4 match (the negative value marks a delete), 5 is new.
SOURCE = pa.table({"id": pa.array([2, 3, 4, 5], pa.int64()), "value": pa.array([-1, 30, 40, 50], pa.int64())})
CLAUSES = (delete(condition="s.value < 0"), update_all(), insert_all())


def log_paths(table: str) -> set[str]:
    return set(pa.table(DeltaTable(table).get_add_actions(flatten=True))["path"].to_pylist())


def parquet_files(table: str) -> set[str]:
    return {p.relative_to(table).as_posix() for p in Path(table).rglob("*.parquet")}


@pytest.fixture
def upsert(spark, tmp_path) -> tuple[str, MergeSpec]:
    target = make_table(tmp_path / "t", rows([1, 2, 3, 4]), partition_by=None)
    return target, MergeSpec(target, source_file(tmp_path, SOURCE), "t.id = s.id", CLAUSES)


@pytest.mark.parametrize(
    ("bounds", "broken"),
    [
        ({"numTargetRowsDeleted": {"max": 0}}, ["numTargetRowsDeleted"]),
        (
            {"numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.5}, "numTargetRowsInserted": {"min": 2}},
            ["numTargetRowsDeleted / numTargetRowsCopied", "numTargetRowsInserted"],
        ),
    ],
    ids=["deletes", "ratio-and-inserts"],
)
def test_a_breached_bound_commits_nothing_and_leaves_no_file(spark, upsert, bounds, broken):
    target, spec = upsert
    before, files = table_state(target), parquet_files(target)
    with pytest.raises(MergeGuardError) as raised:
        run_merge(spark, spec, bounds=MetricBounds(bounds))
    assert raised.value.error_class == "DELTAMERGE_METRIC_BOUNDS_BROKEN"
    assert is_final(raised.value)  # the same source breaks them again: no retry
    message = str(raised.value)
    assert f"breaks {len(broken)} of its {len(bounds)} metric bounds" in message
    assert all(name in message for name in broken)
    assert table_state(target) == before
    assert parquet_files(target) == files


def test_a_merge_within_its_bounds_commits(spark, upsert):
    target, spec = upsert
    bounds = MetricBounds({"numTargetRowsDeleted": {"max": 1}, "numTargetRowsInserted": {"min": 1, "max": 1}})
    result = run_merge(spark, spec, bounds=bounds)
    assert result.committed and result.version == DeltaTable(target).version() == 1
    assert (result.metrics[m.NUM_TARGET_ROWS_DELETED], result.metrics[m.NUM_TARGET_ROWS_INSERTED]) == (1, 1)


def test_a_dry_run_reports_what_a_real_run_commits_and_changes_nothing(spark, upsert, tmp_path):
    target, spec = upsert
    copy = str(shutil.copytree(target, tmp_path / "copy"))
    before, files = table_state(target), parquet_files(target)

    dry = run_merge(spark, spec, dry_run=True)

    assert not dry.committed and dry.version == 0
    assert table_state(target) == before and parquet_files(target) == files
    real = run_merge(spark, MergeSpec(copy, spec.source, spec.condition, spec.clauses))
    rows_and_files = [
        m.NUM_SOURCE_ROWS,
        m.NUM_TARGET_ROWS_INSERTED,
        m.NUM_TARGET_ROWS_UPDATED,
        m.NUM_TARGET_ROWS_DELETED,
        m.NUM_TARGET_ROWS_COPIED,
        m.NUM_TARGET_FILES_REMOVED,
        m.NUM_TARGET_FILES_ADDED,
        m.NUM_TARGET_BYTES_REMOVED,
    ]
    assert [dry.metrics[k] for k in rows_and_files] == [real.metrics[k] for k in rows_and_files]
    assert dry.dry_run is not None
    # The files the real run removed: the table's before it, less the copy's after it.
    assert set(dry.dry_run["filesToRewrite"]) == log_paths(target) - log_paths(copy)
    assert len(dry.dry_run["filesToRewrite"]) == real.metrics[m.NUM_TARGET_FILES_REMOVED]
    assert dry.dry_run["bytesToRewrite"] == real.metrics[m.NUM_TARGET_BYTES_REMOVED]
    assert dry.dry_run["filesToAdd"] == real.metrics[m.NUM_TARGET_FILES_ADDED]
    assert (dry.dry_run["executor"], dry.dry_run["partitionsToTouch"], dry.dry_run["newColumns"]) == (
        "classic",
        [],
        [],
    )
    assert files_on_disk_match_log(target)


def test_a_dry_run_names_the_partitions_and_new_columns_it_would_touch(spark, tmp_path):
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "region": ["eu", "us", "us"]})
    target = make_table(tmp_path / "t", data, partition_by=["region"])
    source = source_file(
        tmp_path, pa.table({"id": pa.array([2], pa.int64()), "region": ["us"], "note": ["moved"]})
    )
    spec = MergeSpec(target, source, "t.id = s.id", (update_all(),), schema_evolution=True)
    before = table_state(target)
    report = run_merge(spark, spec, dry_run=True).dry_run
    assert report is not None
    assert (report["partitionsToTouch"], report["newColumns"]) == ([{"region": "us"}], ["note"])
    assert table_state(target) == before
    assert [f.name for f in DeltaTable(target).schema().fields] == ["id", "region"]
