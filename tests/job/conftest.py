"""The job depth: merges submitted through real spark-submit on a local master."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def local_spark_connection(monkeypatch: pytest.MonkeyPatch) -> str:
    """``spark_default`` on a local master, set the way Airflow reads connections from the environment."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    return "spark_default"
