"""Concurrent writers in real separate processes ('spawn', each with its own local[1] SparkSession).

Each racer waits, just before its first commit attempt, until every racer has read its snapshot, so the
race is certain to happen: one commits first and the others meet its commit.
"""

from __future__ import annotations

import datetime
import multiprocessing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge.delta.log.merge_commits import find_merge_commit_where
from airflow_provider_deltamerge.hooks.delta_merge import commit_result
from airflow_provider_deltamerge.metrics import summary_line
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update, update_all
from airflow_provider_deltamerge.spec.json_form import spec_to_json
from tests.conftest import make_table
from tests.delta import workers
from tests.engine.test_identity_columns import high_water_mark, identity_table, insert_new
from tests.oracle import sorted_rows
from tests.run_profile import of_the_day

pytestmark = pytest.mark.slow
CTX = multiprocessing.get_context("spawn")
TIMEOUT = 900
# A disk and, in CI, one object store a day (every store in the local profile, tests/run_profile.py).
LAKES = ["disk", *of_the_day(["s3", "azure", "gcs"])]


def run_all(jobs: list[tuple[Any, tuple[Any, ...], dict[str, Any]]]) -> None:
    processes = [CTX.Process(target=target, args=args, kwargs=kwargs) for target, args, kwargs in jobs]
    for process in processes:
        process.start()
    for process in processes:
        process.join(TIMEOUT)
        assert process.exitcode == 0, f"a racer failed (exit code {process.exitcode})"


def collect(results: Any, count: int) -> dict[str, dict[str, Any]]:
    return dict(results.get(timeout=60) for _ in range(count))


def source_file(tmp_path: Path, name: str, data: pa.Table) -> str:
    path = tmp_path / f"{name}.parquet"
    pq.write_table(data, path)
    return str(path)


@pytest.mark.parametrize("lake_root", LAKES, indirect=True)
def test_racing_insert_only_merges_of_the_same_new_key_leave_one_row(tmp_path, lake_root):
    # On a store the two processes' commits race as conditional puts of one commit file: the server decides.
    target = make_table(f"{lake_root}/t")
    new_key = pa.table({"id": pa.array([42], pa.int64()), "qty": pa.array([1], pa.int32()), "region": ["eu"]})
    spec = MergeSpec(
        target=target,
        source=PathSource(source_file(tmp_path, "s", new_key)),
        condition="t.id = s.id",
        clauses=(insert_all(),),
    )
    results, barrier = CTX.Queue(), CTX.Barrier(2)
    run_all(
        [
            (workers.merge_job, (spec_to_json(spec), {"taskId": name}, results), {"barrier": barrier})
            for name in ("a", "b")
        ]
    )
    outcomes = collect(results, 2)
    assert [r["id"] for r in sorted_rows(target)].count(42) == 1
    # One inserted on its first run; the other met that commit, ran again, and found the key there.
    assert sorted(o["attempts"] for o in outcomes.values()) == [1, 2]
    assert sorted(o["metrics"]["numTargetRowsInserted"] for o in outcomes.values()) == [0, 1]


def test_racing_inserts_into_an_identity_column_get_unique_values(tmp_path):
    """Both merges generate identity values from the same high-water mark and record a new one in their
    commit's metaData. A winning metaData change makes the other merge re-run on the new mark (Delta's
    ConflictChecker.checkNoMetadataUpdates fails it too: both transactions change the metadata)."""
    target = identity_table(tmp_path)
    results, barrier = CTX.Queue(), CTX.Barrier(2)
    jobs = []
    for name, first in (("a", 1), ("b", 11)):
        rows = pa.table(
            {"id": pa.array([first, first + 1, first + 2], pa.int64()), "qty": pa.array([1, 2, 3])}
        )
        spec = insert_new(target, source_file(tmp_path, name, rows))
        jobs.append(
            (workers.merge_job, (spec_to_json(spec), {"taskId": name}, results), {"barrier": barrier})
        )
    run_all(jobs)
    outcomes = collect(results, 2)
    assert sorted(o["attempts"] for o in outcomes.values()) == [1, 2]
    assert all(o["metrics"]["numTargetRowsInserted"] == 3 for o in outcomes.values())
    values = {r["id"]: r["sk"] for r in sorted_rows(target)}
    assert len(values) == 6 and len(set(values.values())) == 6
    # The first to commit took 1-3 from the empty column; the other, run again, went on from its mark.
    (first,) = [name for name, o in outcomes.items() if o["attempts"] == 1]
    base = 1 if first == "a" else 11
    assert sorted(values[i] for i in range(base, base + 3)) == [1, 2, 3]
    assert sorted(v for i, v in values.items() if not base <= i < base + 3) == [4, 5, 6]
    assert high_water_mark(target) == 6


@pytest.mark.parametrize("lake_root", LAKES, indirect=True)
def test_concurrent_update_is_never_lost(tmp_path, lake_root):
    # Given: a merge adding 1 to id 3's qty, and delta-rs adding 100 to it after the merge read the table
    target = make_table(f"{lake_root}/t")
    row = pa.table({"id": pa.array([3], pa.int64()), "qty": pa.array([1], pa.int32()), "region": ["us"]})
    spec = MergeSpec(
        target=target,
        source=PathSource(source_file(tmp_path, "s", row)),
        condition="t.id = s.id",
        clauses=(update({"qty": "t.qty + s.qty"}),),
    )
    results, ready, go = CTX.Queue(), CTX.Event(), CTX.Event()
    run_all(
        [
            (
                workers.merge_job,
                (spec_to_json(spec), {"taskId": "merge"}, results),
                {"ready": ready, "go": go},
            ),
            (workers.deltalake_update, (target, "id = 3", {"qty": "qty + 100"}, ready, go), {}),
        ]
    )
    outcome = collect(results, 1)["merge"]
    # Then: both changes are in the table (30 + 100 + 1); the merge ran again on the updated snapshot
    assert {r["id"]: r["qty"] for r in sorted_rows(target)}[3] == 131
    assert outcome["attempts"] == 2
    # The first run's time (it waited for delta-rs) counts in the whole, not in Delta's executionTimeMs; the
    # commit records both, so a task that finds it later in the log reports the same.
    assert outcome["earlier_attempts_ms"] > 0
    report = commit_result(find_merge_commit_where(target, lambda info: True))
    assert report["attempts"] == 2
    assert report["allAttemptsTimeMs"] == outcome["earlier_attempts_ms"] + report["executionTimeMs"]
    assert "(2 attempts, " in summary_line(report)


def test_merges_into_four_date_partitions_all_commit_without_rerun(tmp_path):
    days = [datetime.date(2024, 1, d) for d in (1, 2, 3, 4)]
    target = str(tmp_path / "t")
    for n, day in enumerate(days):
        rows = {"id": pa.array([n * 10, n * 10 + 1], pa.int64()), "day": pa.array([day] * 2), "qty": [1, 1]}
        write_deltalake(target, pa.table(rows), partition_by=["day"], mode="append")
    start = DeltaTable(target).version()
    results, barrier = CTX.Queue(), CTX.Barrier(4)
    jobs = []
    for n, day in enumerate(days):
        source = pa.table(
            {"id": pa.array([n * 10, 99 + n], pa.int64()), "day": pa.array([day] * 2), "qty": [7, 7]}
        )
        spec = MergeSpec(
            target=target,
            source=PathSource(source_file(tmp_path, f"s{n}", source)),
            condition="t.id = s.id AND t.day = s.day",
            clauses=(update_all(), insert_all()),
        )
        jobs.append(
            (workers.merge_job, (spec_to_json(spec), {"taskId": f"day{n}"}, results), {"barrier": barrier})
        )
    run_all(jobs)
    outcomes = collect(results, 4)
    assert all(o.get("attempts") == 1 for o in outcomes.values()), outcomes
    assert sorted(o["version"] for o in outcomes.values()) == [start + 1, start + 2, start + 3, start + 4]
    assert sum(len(o["rebased_over"]) for o in outcomes.values()) == 0 + 1 + 2 + 3
    rows = sorted_rows(target)
    assert len(rows) == 12
    assert sum(r["qty"] == 7 for r in rows) == 8
