"""Which Spark connection and spark-submit a merge uses when Airflow has none set."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from airflow.providers.common.compat.sdk import AirflowException

from airflow_provider_deltamerge.hooks.spark_setup import (
    LOCAL_MASTER,
    is_local_default,
    spark_connection,
    spark_submit_binary,
)


def test_undefined_default_connection_runs_spark_on_this_worker(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)

    connection = spark_connection("spark_default")

    assert connection.host == LOCAL_MASTER and is_local_default(connection)


def test_defined_default_connection_is_used_as_it_is(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "spark://master:7077"}')

    connection = spark_connection("spark_default")

    assert connection.host == "spark://master:7077" and not is_local_default(connection)


def test_undefined_named_connection_says_how_to_define_it(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_MY_SPARK", raising=False)

    with pytest.raises(AirflowException, match="AIRFLOW_CONN_MY_SPARK=") as raised:
        spark_connection("my_spark")

    assert "Admin > Connections" in str(raised.value)


def test_spark_submit_on_path_is_left_to_the_spark_provider(monkeypatch):
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))

    assert spark_submit_binary(None) is None


def test_spark_submit_off_path_is_the_one_installed_with_pyspark(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")

    found = spark_submit_binary(None)

    assert found is not None and found.endswith("/pyspark/bin/spark-submit") and Path(found).is_file()


def test_no_spark_submit_anywhere_says_where_to_put_it(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")

    with pytest.raises(AirflowException, match="spark_binary") as raised:
        spark_submit_binary("spark3-submit")

    assert "not on this worker's PATH" in str(raised.value)
