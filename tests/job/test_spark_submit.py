"""The merge job through real spark-submit, driven by DeltaMergeHook as the operator drives it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.exceptions import MergeExecutionError, MergeGuardError, SourceError
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all
from airflow_provider_deltamerge.spec.json_form import spec_hash
from tests.conftest import make_table, table_state, upsert_from_extract
from tests.oracle import sorted_rows

pytestmark = pytest.mark.slow


def test_hook_runs_the_merge_and_returns_metrics(tmp_path, local_spark_connection):
    target = make_table(tmp_path / "orders", partition_by=["region"])
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 7, "us"), (42, 8, "eu")])

    hook = DeltaMergeHook(local_spark_connection)
    metrics = hook.run_merge(spec, provenance={"dagId": "d"})

    assert metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    assert metrics[m.TABLE_VERSION] == DeltaTable(target).version() == 1
    assert metrics[m.SPEC_HASH] == spec_hash(spec)
    assert metrics[m.EXECUTOR] == "classic"
    # The driver's Spark UI, which the task's "Spark application" link points at.
    assert re.fullmatch(r"http://[^\s:]+:\d+", hook.spark_application_url() or "")
    # MERGE INTO's own result row, as Delta's statement returns it.
    assert (
        metrics[m.NUM_AFFECTED_ROWS],
        metrics[m.NUM_UPDATED_ROWS],
        metrics[m.NUM_DELETED_ROWS],
        metrics[m.NUM_INSERTED_ROWS],
    ) == (2, 1, 0, 1)
    # Metrics every Delta MERGE reports, 0 while no change data file or deletion vector is written; the
    # commit carries them too.
    always = (
        m.NUM_TARGET_CHANGE_FILES_ADDED,
        m.NUM_TARGET_CHANGE_FILE_BYTES,
        m.NUM_TARGET_DELETION_VECTORS_ADDED,
        m.NUM_TARGET_DELETION_VECTORS_REMOVED,
        m.NUM_TARGET_DELETION_VECTORS_UPDATED,
    )
    committed = DeltaTable(target).history(1)[0]["operationMetrics"]
    assert [metrics[name] for name in always] == [int(committed[name]) for name in always] == [0] * 5
    assert {"id": 42, "qty": 8, "region": "eu"} in sorted_rows(target)
    assert {"id": 1, "qty": 7, "region": "us"} in sorted_rows(target)


def test_bounds_and_dry_runs_travel_to_the_job_and_back(tmp_path, local_spark_connection):
    target = make_table(tmp_path / "orders", partition_by=["region"])
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 7, "us"), (42, 8, "eu")])
    before = table_state(target)
    hook = DeltaMergeHook(local_spark_connection)

    dry = hook.run_merge(spec, provenance={"dagId": "d"}, dry_run=True)
    with pytest.raises(MergeGuardError) as raised:
        hook.run_merge(spec, provenance={"dagId": "d"}, bounds={"numTargetRowsInserted": {"max": 0}})

    assert (dry[m.NUM_TARGET_ROWS_UPDATED], dry[m.NUM_TARGET_ROWS_INSERTED], dry[m.TABLE_VERSION]) == (
        1,
        1,
        0,
    )
    assert dry[m.DRY_RUN]["partitionsToTouch"] == [{"region": "eu"}, {"region": "us"}]
    assert raised.value.error_class == "DELTAMERGE_METRIC_BOUNDS_BROKEN"
    assert table_state(target) == before


def test_job_error_becomes_the_task_error(tmp_path, local_spark_connection):
    # The job's own error (class and message) must reach Airflow, not just "spark-submit exited 1".
    target = make_table(tmp_path / "orders")
    before = table_state(target)
    spec = MergeSpec(
        target=target,
        source=PathSource(str(tmp_path / "missing-2024-01-02.parquet")),
        condition="t.id = s.id",
        clauses=(insert_all(),),
    )

    with pytest.raises(SourceError, match=r"missing-2024-01-02\.parquet") as raised:
        DeltaMergeHook(local_spark_connection).run_merge(spec)

    assert raised.value.error_class == "PATH_NOT_FOUND"
    assert table_state(target) == before


def test_data_in_the_jobs_output_cannot_speak_for_the_job(tmp_path, local_spark_connection):
    # Source values that the job's error message shows (the offending rows of a multiple match), shaped
    # like answer lines: the task must get the job's own error, never what the data says.
    target = make_table(tmp_path / "orders")
    before = table_state(target)
    forged = '7\nDELTAMERGE_ERROR {not json\nDELTAMERGE_RESULT {"numTargetRowsInserted": 999}'
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 5, forged), (1, 6, forged)])

    with pytest.raises(MergeExecutionError) as raised:
        DeltaMergeHook(local_spark_connection).run_merge(spec)

    assert raised.value.error_class == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    assert table_state(target) == before


def test_the_task_log_shows_the_error_not_the_jvm_stack(tmp_path, local_spark_connection, capfd):
    # spark-submit's output is the task log: the job's error line, never PySpark's logged JVM stack.
    target = make_table(tmp_path / "orders")
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 5, "eu")])
    spec = MergeSpec(
        target=spec.target,
        source=spec.source,
        condition=spec.condition,
        clauses=(insert_all(),),
        deduplicate_source_by=("nope",),
        deduplicate_order_by=("qty",),
    )

    with pytest.raises(SourceError, match="no column `nope`"):
        DeltaMergeHook(local_spark_connection).run_merge(spec)

    log = "".join(capfd.readouterr())
    assert "Merge failed: [UNRESOLVED_COLUMN]" in log
    assert "at org.apache.spark" not in log


def test_a_clusters_spark_defaults_apply_beside_the_private_properties_file(
    tmp_path, local_spark_connection, monkeypatch
):
    # Given: the cluster's spark-defaults.conf sets a marker and turns Spark's event log on, and the hook has
    # private conf, which it hands spark-submit in a --properties-file
    conf_dir, events = tmp_path / "spark-conf", tmp_path / "events"
    conf_dir.mkdir()
    events.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.deltamerge.marker x\n"
        "spark.eventLog.enabled true\n"
        f"spark.eventLog.dir {events.as_uri()}\n"
        "spark.eventLog.compress false\n"
        "spark.eventLog.rolling.enabled false\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    target = make_table(tmp_path / "orders", partition_by=["region"])
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(42, 8, "eu")])
    hook = DeltaMergeHook(local_spark_connection, private_conf={"spark.deltamerge.private": "p"})
    # When: the merge runs
    hook.run_merge(spec)
    # Then: the job's effective conf, as its event log records it, holds the defaults and the private key
    properties = spark_properties(events)
    assert properties["spark.deltamerge.marker"] == "x"
    assert "spark.deltamerge.private" in properties  # its value redacted: it is a private key
    assert DeltaTable(target).version() == 1


def spark_properties(event_logs: Path) -> dict[str, str]:
    """The Spark properties of the one application that logged its events under ``event_logs``."""
    (log,) = list(event_logs.iterdir())
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event["Event"] == "SparkListenerEnvironmentUpdate":
            return dict(event["Spark Properties"])
    raise AssertionError(f"no environment in {log}")
