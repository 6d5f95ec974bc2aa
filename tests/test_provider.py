"""The provider as Airflow sees it, and the import boundary between the Airflow side and Spark."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from itertools import chain
from pathlib import Path

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


def provider_distribution(module: str) -> str:
    """The distribution of provider module ``module``: its package root holds ``get_provider_info.py``."""
    parts = module.split(".")
    for n in range(len(parts), 2, -1):
        spec = importlib.util.find_spec(".".join(parts[:n]))
        locations = spec.submodule_search_locations if spec else None
        if locations and any((Path(place) / "get_provider_info.py").exists() for place in locations):
            return "apache-airflow-providers-" + "-".join(parts[2:n])
    raise AssertionError(f"{module} belongs to no installed provider")


def test_every_airflow_provider_imported_is_declared():
    # A provider imported but not declared works only where something else happened to install it.
    root = Path(__file__).parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *chain(*project["optional-dependencies"].values())]
    declared = {re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0] for requirement in requirements}
    imported = {
        node.module
        for path in (root / "airflow_provider_deltamerge").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("airflow.providers.")
    }
    distributions = {provider_distribution(module) for module in imported}
    assert "apache-airflow-providers-common-compat" in distributions  # the scan sees the imports
    assert distributions - declared == set()
