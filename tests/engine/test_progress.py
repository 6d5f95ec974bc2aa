"""Progress lines while a merge's Spark job runs: the phase, and Spark's task and row counts so far."""

from __future__ import annotations

import logging
import time

from pyspark.sql import functions as F

from airflow_provider_deltamerge.engine.progress import ProgressReporter, enter_phase


def test_progress_lines_name_the_phase_and_count_spark_tasks_while_a_job_runs(spark, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge.engine.progress")
    # A write of 8 tasks, slow enough on any machine for several lines at a 0.5 s interval
    rows = spark.range(0, 2_000_000, numPartitions=8).select("id", F.sha2(F.col("id").cast("string"), 512))

    with ProgressReporter(interval_s=0.5) as progress:
        enter_phase("rewrite of the touched files and the inserts", files=8)
        progress.watch(spark)
        rows.write.parquet(str(tmp_path / "out"))

    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Progress: ")]
    assert len(lines) >= 2, lines
    assert all(
        line.startswith("Progress: rewrite of the touched files and the inserts (8 files), ")
        for line in lines
    )
    with_counts = [line for line in lines if "Spark tasks " in line]
    assert with_counts and all(" of 8 done" in line for line in with_counts)
    assert any(" rows read, " in line and line.endswith(" written so far") for line in with_counts), lines


def test_progress_before_spark_runs_gives_the_phase_alone(caplog):
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge.engine.progress")

    with ProgressReporter(interval_s=0.2):
        enter_phase("starting Spark")
        time.sleep(0.7)

    lines = [r.getMessage() for r in caplog.records]
    assert lines and all(
        line.startswith("Progress: starting Spark, ") and "Spark tasks" not in line for line in lines
    )
