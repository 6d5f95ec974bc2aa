"""Idempotent retries, crash safety at every stage of a merge (a real SIGKILL in a separate process), and
checkpoints per delta.checkpointInterval."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import obstore
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.commit.log_store import object_store
from airflow_provider_deltamerge.delta.files.writer import STAGING_PREFIX
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update
from airflow_provider_deltamerge.spec.json_form import spec_to_json
from tests.conftest import make_table, table_state
from tests.delta import workers
from tests.delta.helpers import files_on_disk_match_log
from tests.faults import CRASH_ENV
from tests.oracle import sorted_rows
from tests.run_profile import of_the_day

CTX = multiprocessing.get_context("spawn")
# A disk and, in CI, one object store a day (every store in the local profile, tests/run_profile.py).
LAKES = ["disk", *of_the_day(["s3", "azure", "gcs"])]
RUN = {"dagId": "daily", "taskId": "merge", "runId": "scheduled__2024-01-01", "mapIndex": -1}
SOURCE = pa.table(
    {"id": pa.array([3, 42], pa.int64()), "qty": pa.array([1, 7], pa.int32()), "region": ["us", "eu"]}
)


def add_to_qty(tmp_path: Path, target: str) -> MergeSpec:
    path = tmp_path / f"{Path(target).name}-source.parquet"
    pq.write_table(SOURCE, path)
    return MergeSpec(
        target=target,
        source=PathSource(str(path)),
        condition="t.id = s.id",
        clauses=(update({"qty": "t.qty + s.qty"}), insert_all()),
    )


@pytest.mark.parametrize("lake_root", LAKES, indirect=True)
def test_retry_of_a_committed_run_returns_its_metrics_and_changes_nothing(request, tmp_path, lake_root):
    spark = session_for(request, lake_root)
    target = make_table(f"{lake_root}/t")
    DeltaTable(target).alter.set_table_properties({"delta.checkpointInterval": "1"})
    spec = add_to_qty(tmp_path, target)
    first = run_merge(spark, spec, provenance={**RUN, "tryNumber": 1})
    after_first = table_state(target)
    # A checkpoint is written at the interval by the commit's post-commit hook.
    checkpoint = f"_delta_log/{first.version:020d}.checkpoint.parquet"
    assert obstore.head(object_store(target), checkpoint)["size"] > 0
    # When: the task is retried (another try, same run and spec)
    retry = run_merge(spark, spec, provenance={**RUN, "tryNumber": 2})
    # Then: nothing merged twice; the recorded result comes back
    assert retry.already_committed and retry.version == first.version
    assert retry.metrics == first.metrics
    assert table_state(target) == after_first
    # A deliberate re-run applies the merge again
    again = run_merge(spark, spec, provenance={**RUN, "tryNumber": 3}, rerun="merge")
    assert not again.already_committed and again.version == first.version + 1
    assert again.metrics[m.NUM_TARGET_ROWS_UPDATED] == 2  # ids 3 and 42 now both exist


@pytest.mark.parametrize("rerun", ["always", "auto", "merge_again"])
def test_an_unknown_rerun_policy_is_refused_before_any_work(spark, tmp_path, rerun):
    # Given: a run that committed
    target = make_table(tmp_path / "t")
    spec = add_to_qty(tmp_path, target)
    run_merge(spark, spec, provenance={**RUN, "tryNumber": 1})
    after_first = table_state(target)
    # When: a retry names no policy the engine knows; Then: refused, not merged a second time
    with pytest.raises(MergeSpecError, match="DELTAMERGE_INVALID_RERUN") as raised:
        run_merge(spark, spec, provenance={**RUN, "tryNumber": 2}, rerun=rerun)  # type: ignore[arg-type]
    assert "'skip', 'merge'" in str(raised.value)
    assert table_state(target) == after_first


STAGES = ["after_snapshot", "after_write", "before_commit", "after_commit"]


@pytest.mark.slow
@pytest.mark.parametrize("lake_root", LAKES, indirect=True)
def test_a_merge_killed_at_any_stage_leaves_a_consistent_table(request, tmp_path, lake_root):
    spark = session_for(request, lake_root)
    # On a store the stages that leave something there (a process with the connector costs more).
    stages = STAGES[1:] if "://" in lake_root else STAGES
    targets = {stage: make_table(f"{lake_root}/{stage}") for stage in stages}
    before = {stage: table_state(t) for stage, t in targets.items()}
    results = CTX.Queue()
    processes = [
        CTX.Process(
            target=workers.merge_job,
            args=(spec_to_json(add_to_qty(tmp_path, targets[stage])), RUN, results),
            kwargs={"env": {CRASH_ENV: stage}},
        )
        for stage in stages
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(900)
    assert [p.exitcode for p in processes] == [-9] * len(stages)  # each killed itself with SIGKILL
    for stage, target in targets.items():
        version, rows = table_state(target)
        if stage == "after_commit":
            assert version == before[stage][0] + 1
            # The retry finds the commit and does not merge twice.
            retry = run_merge(spark, add_to_qty(tmp_path, target), provenance={**RUN, "tryNumber": 2})
            assert retry.already_committed
            assert table_state(target) == (version, rows)
            assert {r["id"]: r["qty"] for r in rows}[3] == 31
        else:
            assert (version, rows) == before[stage], stage
            # Spark reads the log's files only: same rows as delta-rs.
            ids = sorted(r["id"] for r in spark.read.parquet(*_log_files(target)).collect())
            assert ids == sorted(r["id"] for r in sorted_rows(target))
        # What a killed job wrote but never committed is reclaimed by VACUUM, like any unreferenced file.
        DeltaTable(target).vacuum(
            retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
        )
        assert files_on_disk_match_log(target), stage


def test_vacuum_reclaims_what_a_job_killed_while_writing_leaves_in_staging(tmp_path):
    # Spark's half-written output of a job killed during its write stays in the staging folder.
    target = make_table(tmp_path / "t")
    staging = Path(target) / f"{STAGING_PREFIX}0123abcd"
    staging.mkdir()
    pq.write_table(pa.table({"id": [1]}), staging / "part-00000-x.snappy.parquet")

    DeltaTable(target).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True)

    assert files_on_disk_match_log(target)


def session_for(request: pytest.FixtureRequest, lake_root: str) -> SparkSession:
    """The session's SparkSession, reaching the store where the tables are."""
    scheme = lake_root.split("://", 1)[0]
    store = {"s3": "spark_on_s3", "abfs": "spark_on_azure", "gs": "spark_on_gcs"}.get(scheme, "spark")
    return request.getfixturevalue(store)


def _log_files(table: str) -> list[str]:
    return list(DeltaTable(table).file_uris())
