"""The provider as Airflow sees it, and the import boundary between the Airflow side and Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from airflow_provider_deltamerge import PACKAGE_NAME, __version__, get_provider_info

AIRFLOW_SIDE_MODULES = [
    "airflow_provider_deltamerge.operators.delta_merge",
    "airflow_provider_deltamerge.operators.delta_merge_check",
    "airflow_provider_deltamerge.sensors.delta_table",
    "airflow_provider_deltamerge.triggers.delta_table",
    "airflow_provider_deltamerge.delta.commit_match",
    "airflow_provider_deltamerge.hooks.delta_merge",
    "airflow_provider_deltamerge.delta.history",
    "airflow_provider_deltamerge.engine.metrics",
]


def test_airflow_lists_the_provider(tmp_path):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    result = subprocess.run(
        ["airflow", "providers", "list", "--output", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    providers = {p["package_name"]: p for p in json.loads(result.stdout)}
    assert providers[PACKAGE_NAME]["version"] == __version__


def test_provider_info_names_importable_modules():
    info = get_provider_info()
    kinds = ("operators", "hooks", "sensors", "triggers")
    modules = [m for kind in kinds for entry in info[kind] for m in entry["python-modules"]]
    assert set(modules) <= set(AIRFLOW_SIDE_MODULES)
    assert info["name"] and info["description"]


def test_airflow_side_imports_without_pyspark():
    # A scheduler or API server without Spark must parse DAGs that use the operator.
    code = (
        "import sys\n"
        "sys.modules['pyspark'] = None  # any import of pyspark now fails\n"
        f"for name in {AIRFLOW_SIDE_MODULES!r}:\n"
        "    __import__(name)\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"
