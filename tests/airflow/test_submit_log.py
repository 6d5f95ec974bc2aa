"""spark-submit's lines in the task log at their own level: the lines below are a real merge job's output."""

from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace

import pytest
from airflow.models.taskinstancekey import TaskInstanceKey

from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.hooks.spark_setup import JobSubmitHook
from airflow_provider_deltamerge.hooks.submit_log import SubmitOutputLog
from airflow_provider_deltamerge.operators.links import SparkApplicationLink

START_UP = [
    "WARNING: Using incubator modules: jdk.incubator.vector",
    "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
    "26/11/24 06:15:55 WARN Utils: Your hostname, vm, resolves to a loopback address: 127.0.0.1",
    "26/11/24 06:15:58 INFO SparkContext: Running Spark version 4.2.0",
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
    for line in [*lines, "deltamerge INFO Spark started: Spark 4.2.0, master local[*]", START_UP[2]]:
        output.info(line)

    assert logged(caplog) == [
        ("DEBUG", START_UP[0]),
        ("INFO", "Progress: starting Spark, 10 s"),
        *(("DEBUG", line) for line in START_UP[1:]),
        ("INFO", "Spark started: Spark 4.2.0, master local[*]"),
        ("WARNING", START_UP[2]),
    ]


def test_after_start_up_spark_warnings_are_warnings_and_stack_frames_follow_their_record(output, caplog):
    lines = [
        "deltamerge INFO Spark started: Spark 4.2.0, master local[*]",
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
    output.info("deltamerge INFO Spark started: Spark 4.2.0, master local[*], UI at http://10.0.0.5:4041")
    assert output.spark_ui == "http://10.0.0.5:4041"


# What spark-submit prints for a YARN cluster-mode job (Client.formatReportDetails) and a Kubernetes one
# (KubernetesUtils.formatPodState), one detail per line.
YARN_REPORT = [
    "26/11/24 10:00:01 INFO Client: Submitting application application_1732440000000_0007 to ResourceManager",
    "26/11/24 10:00:02 INFO Client: Application report for application_1732440000000_0007 (state: ACCEPTED)",
    "26/11/24 10:00:02 INFO Client: ",
    "\t client token: N/A",
    "\t diagnostics: AM container is launched, waiting for AM container to Register with RM",
    "\t ApplicationMaster host: N/A",
    "\t queue: default",
    "\t final status: UNDEFINED",
    "\t tracking URL: http://rm.example:8088/proxy/application_1732440000000_0007/",
    "\t user: airflow",
]
POD_REPORT = [
    "26/11/24 10:00:05 INFO LoggingPodStatusWatcherImpl: State changed, new state: ",
    "\t pod name: deltamerge-orders-3f2a1b9c0d-driver",
    "\t namespace: spark-jobs",
    "\t labels: spark-app-selector -> spark-0a1b, spark-role -> driver",
    "\t phase: Running",
]


def submitted(monkeypatch, master: str, lines: list[str]) -> DeltaMergeHook:
    """A merge hook whose Spark submission (the Spark provider's hook, on a ``master`` connection) read
    ``lines`` from spark-submit, as it reads them from the process."""
    connection = {"conn_type": "spark", "host": master, "extra": {"deploy-mode": "cluster"}}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps(connection))
    submit = JobSubmitHook(conn_id="spark_cluster")
    submit._process_spark_submit_log(iter(lines))
    hook = DeltaMergeHook(spark_conn_id="spark_cluster")
    hook._submit = submit
    return hook


def test_a_yarn_job_links_to_its_tracking_url(monkeypatch):
    hook = submitted(monkeypatch, "yarn", [*START_UP, *YARN_REPORT])
    assert hook.spark_application_url() == "http://rm.example:8088/proxy/application_1732440000000_0007/"


def test_a_kubernetes_job_links_to_its_driver_pod_where_a_console_is_configured(monkeypatch):
    # A k8s:// master makes the Spark provider build a Kubernetes client (the cncf provider, not installed
    # here); the link comes from the pod report's lines alone.
    hook = submitted(monkeypatch, "spark://spark-master:7077", [*START_UP, *POD_REPORT])
    assert hook.spark_application_url() is None  # no console configured: no link
    monkeypatch.setenv(
        "AIRFLOW__DELTAMERGE__KUBERNETES_POD_URL", "https://console.example/k8s/ns/{namespace}/pods/{pod}"
    )
    expected = "https://console.example/k8s/ns/spark-jobs/pods/deltamerge-orders-3f2a1b9c0d-driver"
    assert hook.spark_application_url() == expected


def test_the_hook_notes_when_the_job_s_session_was_up(monkeypatch):
    # Spark's start-up lines say nothing of the job's session; its own start line does (bench/overhead.py).
    assert submitted(monkeypatch, "local[*]", START_UP).session_ready_at() is None
    before = time.monotonic()
    hook = submitted(monkeypatch, "local[*]", [*START_UP, "deltamerge INFO Spark started: Spark 4.2.0"])
    ready = hook.session_ready_at()
    assert ready is not None and before <= ready <= time.monotonic()


def test_a_client_mode_job_links_to_its_driver_s_ui(monkeypatch):
    start = "deltamerge INFO Spark started: Spark 4.2.0, master local[*], UI at http://10.0.0.5:4041"
    hook = submitted(monkeypatch, "local[*]", [*START_UP, start])
    assert hook.spark_application_url() == "http://10.0.0.5:4041"


def test_the_task_link_skips_a_driver_ui_that_ended_with_its_task(monkeypatch):
    # Airflow makes the link when the task ends: a client-mode driver's UI is gone then, YARN's page is not.
    link, key = SparkApplicationLink(), TaskInstanceKey("dag", "merge", "manual__1", 1, -1)
    start = "deltamerge INFO Spark started: Spark 4.2.0, master local[*], UI at http://10.0.0.5:4041"
    local = SimpleNamespace(_hook=submitted(monkeypatch, "local[*]", [*START_UP, start]))
    assert local._hook.driver_ui_url == "http://10.0.0.5:4041"
    assert link.get_link(local, ti_key=key) == ""
    on_yarn = SimpleNamespace(_hook=submitted(monkeypatch, "yarn", [*START_UP, *YARN_REPORT]))
    assert (
        link.get_link(on_yarn, ti_key=key) == "http://rm.example:8088/proxy/application_1732440000000_0007/"
    )


def test_spark_submits_report_of_a_failed_jobs_exit_and_its_stack_are_debug(output, caplog):
    # With spark.submit.callSystemExitOnMainExit (set for ABFS) spark-submit reports the job's exit itself.
    lines = [
        "deltamerge INFO Spark started: Spark 4.2.0, master local[*]",
        "deltamerge ERROR Merge failed: [UNRESOLVED_COLUMN] no column `nope`",
        "Calling System.exit() with exit code 1 because spark.submit.callSystemExitOnMainExit=true",
        "org.apache.spark.SparkUserAppException: User application exited with 1",
        "\tat org.apache.spark.deploy.PythonRunner$.main(PythonRunner.scala:127)",
    ]
    for line in lines:
        output.info(line)

    assert logged(caplog) == [
        ("INFO", "Spark started: Spark 4.2.0, master local[*]"),
        ("ERROR", "Merge failed: [UNRESOLVED_COLUMN] no column `nope`"),
        *(("DEBUG", line) for line in lines[2:]),
    ]
