"""Cluster deploy mode, where no test can start a YARN cluster: only the spark-submit process is faked.

The fake plays the remote driver with the real job logic (decode the request, run the merge in a local
SparkSession, answer) and, like a real cluster, shows none of the driver's output: the hook must take the
answer from the report file the job leaves beside the table, or from the commit in the Delta log.
"""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.providers.common.compat.sdk import AirflowException

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.job_reports import report_path
from airflow_provider_deltamerge.delta.log.merge_commits import SUBMISSION_ID
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.job.answer import answer
from airflow_provider_deltamerge.job_contract import REQUEST_FILE_ARG
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all
from airflow_provider_deltamerge.spec.json_form import spec_hash
from airflow_provider_deltamerge.spec.transport import decode_request
from tests.conftest import make_table, table_state, upsert_from_extract


class RemoteDriver:
    """Stands in for spark-submit to a YARN cluster: records the command, runs the job's merge quietly."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.commands: list[list[str]] = []
        self.shipped: list[str] = []

    def __call__(self, command: list[str], **kwargs: Any) -> RemoteDriver:
        self.commands.append(command)
        self.environment = kwargs.get("env") or {}
        if "--properties-file" in command:
            properties = Path(command[command.index("--properties-file") + 1])
            self.properties = (properties.read_text(), properties.stat().st_mode & 0o777)
        py_files = command[command.index("--py-files") + 1]
        self.shipped = zipfile.ZipFile(py_files.split(",")[-1]).namelist()
        # As on a cluster: the request arrives only as a file shipped with --files, found by its name.
        name = command[command.index(REQUEST_FILE_ARG) + 1]
        [shipped] = [f for f in command[command.index("--files") + 1].split(",") if Path(f).name == name]
        request = decode_request(Path(shipped).read_text())
        self.request = request
        with contextlib.redirect_stdout(io.StringIO()):  # the driver's output stays on the cluster
            self.status = answer(self.spark, request)
        self.stdout = iter(
            ["INFO Client: Application report for application_1700000000000_0001 (FINISHED)\n"]
        )
        return self

    def wait(self) -> int:
        return self.status


@pytest.fixture
def yarn_cluster_connection(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_YARN",
        json.dumps({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}),
    )
    return "spark_yarn"


def test_cluster_mode_ships_the_package_and_reads_metrics_from_the_log(
    spark, tmp_path, mocker, yarn_cluster_connection
):
    target = make_table(tmp_path / "orders")
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 3, "eu"), (50, 4, "us")])
    driver = RemoteDriver(spark)
    mocker.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", side_effect=driver)

    metrics = DeltaMergeHook(yarn_cluster_connection, spark_submit_kwargs={"py_files": "deps.zip"}).run_merge(
        spec
    )

    [command] = driver.commands
    assert command[command.index("--master") + 1] == "yarn"
    assert command[command.index("--deploy-mode") + 1] == "cluster"
    assert command[command.index("--py-files") + 1].startswith("deps.zip,")
    assert "airflow_provider_deltamerge/job/main.py" in driver.shipped
    assert (metrics[m.NUM_TARGET_ROWS_UPDATED], metrics[m.NUM_TARGET_ROWS_INSERTED]) == (1, 1)
    assert metrics[m.TABLE_VERSION] == 1
    assert metrics[m.SPEC_HASH] == spec_hash(spec)
    assert not Path(command[command.index("--py-files") + 1].split(",")[-1]).exists()  # scratch cleaned up


def test_storage_credentials_travel_in_a_private_file_not_arguments(
    spark, tmp_path, mocker, monkeypatch, yarn_cluster_connection
):
    planted = "planted-S3CR3T-1234"
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "aws", "login": "AKIAPLANTED", "password": planted})
    )
    target = make_table(tmp_path / "orders")
    source = tmp_path / "extract.parquet"
    pq.write_table(
        pa.table({"id": pa.array([99], pa.int64()), "qty": pa.array([1], pa.int32()), "region": ["eu"]}),
        source,
    )
    spec = MergeSpec(
        target=target, source=PathSource(str(source)), condition="t.id = s.id", clauses=(insert_all(),)
    )
    driver = RemoteDriver(spark)
    mocker.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", side_effect=driver)

    DeltaMergeHook(yarn_cluster_connection, storage_conn_id="lake").run_merge(spec)

    [command] = driver.commands
    assert not any(planted in part for part in command)
    assert driver.environment["AWS_SECRET_ACCESS_KEY"] == planted
    assert driver.environment["AWS_ACCESS_KEY_ID"] == "AKIAPLANTED"


def test_a_merge_that_changes_nothing_answers_through_its_report_file(
    spark, tmp_path, mocker, yarn_cluster_connection
):
    target = make_table(tmp_path / "orders")
    version, rows = table_state(target)
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 5, "eu"), (2, 6, "us")])
    spec = replace(spec, clauses=(insert_all(),))  # both ids exist: no insert, no commit
    driver = RemoteDriver(spark)
    mocker.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", side_effect=driver)

    metrics = DeltaMergeHook(yarn_cluster_connection).run_merge(spec)

    assert driver.request.report_file
    assert (metrics[m.NUM_SOURCE_ROWS], metrics[m.NUM_TARGET_ROWS_INSERTED]) == (2, 0)
    assert metrics[m.TABLE_VERSION] == version
    assert table_state(target) == (version, rows)
    assert not (Path(target) / report_path(driver.request.provenance[SUBMISSION_ID])).exists()


def test_the_jobs_own_error_reaches_the_task_in_cluster_mode(
    spark, tmp_path, mocker, yarn_cluster_connection
):
    target = make_table(tmp_path / "orders")
    before = table_state(target)
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 5, "eu"), (1, 6, "us")])
    driver = RemoteDriver(spark)
    mocker.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", side_effect=driver)

    with pytest.raises(MergeExecutionError) as failure:
        DeltaMergeHook(yarn_cluster_connection).run_merge(spec)

    assert failure.value.error_class == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    assert table_state(target) == before


def test_a_catalog_name_is_refused_in_cluster_mode_before_submitting(mocker, yarn_cluster_connection):
    # The task could not find a cluster-mode job's answer: it sits in the table's folder, which only the
    # job can look up from the name.
    popen = mocker.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen")
    spec = MergeSpec(
        target="shop.orders",
        source=PathSource("/x.parquet"),
        condition="t.id = s.id",
        clauses=(insert_all(),),
    )

    with pytest.raises(AirflowException, match=r"shop\.orders is a catalog table name.*client mode"):
        DeltaMergeHook(yarn_cluster_connection).run_merge(spec)

    popen.assert_not_called()
