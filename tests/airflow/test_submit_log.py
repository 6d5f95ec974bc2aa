"""spark-submit's lines in the task log at their own level: the lines below are a real merge job's output."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_deltamerge.hooks.submit_log import SubmitOutputLog

START_UP = [
    "WARNING: Using incubator modules: jdk.incubator.vector",
    "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
    "26/11/24 06:15:55 WARN Utils: Your hostname, vm, resolves to a loopback address: 127.0.0.1",
    "26/11/24 06:15:58 INFO SparkContext: Running Spark version 4.2.1",
    "26/11/24 06:16:00 INFO BlockManager: Initialized BlockManager: BlockManagerId(driver, 192.0.2.2, None)",
]


@pytest.fixture
def output(caplog: pytest.LogCaptureFixture) -> SubmitOutputLog:
    caplog.set_level(logging.DEBUG, logger="submit")
    return SubmitOutputLog(logging.getLogger("submit"))


def logged(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(record.levelname, record.getMessage()) for record in caplog.records]


def test_spark_start_up_goes_to_debug_and_the_job_keeps_its_levels(output, caplog):
    # A progress line of the job while Spark starts does not end the start-up; the job's word does.
    lines = [START_UP[0], "deltamerge INFO Progress: starting Spark, 10 s", *START_UP[1:]]
    for line in [*lines, "deltamerge INFO Spark started: Spark 4.2.1, master local[*]", START_UP[2]]:
        output.info(line)

    assert logged(caplog) == [
        ("DEBUG", START_UP[0]),
        ("INFO", "Progress: starting Spark, 10 s"),
        *(("DEBUG", line) for line in START_UP[1:]),
        ("INFO", "Spark started: Spark 4.2.1, master local[*]"),
        ("WARNING", START_UP[2]),
    ]


def test_after_start_up_spark_warnings_are_warnings_and_stack_frames_follow_their_record(output, caplog):
    lines = [
        "deltamerge INFO Spark started: Spark 4.2.1, master local[*]",
        "26/11/24 06:16:15 WARN TaskSetManager: Lost task 0.0 in stage 3.0: java.io.IOException: disk full",
        "\tat org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:620)",
        "26/11/24 06:16:16 INFO DAGScheduler: Job 3 finished",
        "deltamerge ERROR Merge failed: [DELTA_CONCURRENT_MODIFICATION] concurrent commits",
        "  versions 4 (a conflicting update)",
    ]
    for line in lines:
        output.info(line)

    assert [level for level, _ in logged(caplog)] == ["INFO", "WARNING", "WARNING", "DEBUG", "ERROR", "ERROR"]


def test_an_error_while_spark_starts_is_an_error(output, caplog):
    output.info("26/11/24 06:15:58 ERROR SparkContext: Error initializing SparkContext.")
    output.info("java.net.BindException: Cannot assign requested address")

    assert [level for level, _ in logged(caplog)] == ["ERROR", "ERROR"]


def test_the_hooks_own_messages_are_untouched(output, caplog):
    output.info("Spark-Submit cmd: %s", "spark-submit --master local[*] job.py")
    output.warning("Post-submit command timed out (30s): %s", "cleanup")

    assert logged(caplog) == [
        ("INFO", "Spark-Submit cmd: spark-submit --master local[*] job.py"),
        ("WARNING", "Post-submit command timed out (30s): cleanup"),
    ]


def test_the_job_s_start_line_names_the_spark_ui(output):
    assert output.spark_ui is None
    output.info("deltamerge INFO Spark started: Spark 4.2.1, master local[*], UI at http://10.0.0.5:4041")
    assert output.spark_ui == "http://10.0.0.5:4041"
