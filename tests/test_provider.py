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
import zipfile
from itertools import chain
from pathlib import Path

import pytest

from airflow_provider_deltamerge import PACKAGE_NAME, __version__, get_provider_info

ROOT = Path(__file__).parents[1]
AIRFLOW_SIDE_MODULES = [
    "airflow_provider_deltamerge.operators.delta_merge",
    "airflow_provider_deltamerge.operators.delta_merge_check",
    "airflow_provider_deltamerge.sensors.delta_table",
    "airflow_provider_deltamerge.triggers.delta_table",
    "airflow_provider_deltamerge.delta.log.commit_match",
    "airflow_provider_deltamerge.hooks.delta_merge",
    "airflow_provider_deltamerge.hooks.storage_connection",
    "airflow_provider_deltamerge.delta.log.merge_commits",
    "airflow_provider_deltamerge.metrics",
    "airflow_provider_deltamerge.history.plugin",
    "airflow_provider_deltamerge.history.routes",
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


def test_airflow_loads_the_history_plugin_from_the_provider_info(tmp_path):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    result = subprocess.run(
        ["airflow", "plugins", "--output", "json"], env=env, capture_output=True, text=True, check=True
    )
    (plugin,) = [p for p in json.loads(result.stdout) if p["name"] == "deltamerge_history"]
    assert PACKAGE_NAME in str(plugin["source"])
    assert {view["destination"] for view in plugin["external_views"]} == {"nav"}  # no tab on every DAG
    assert "/deltamerge" in str(plugin["fastapi_apps"])


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


# What a DAG file imports and builds: the operators and the sensor, a merge given as Python clauses and one as
# MERGE INTO text (parsed when the DAG is), bounds (checked then too).
DAG_PARSE_CODE = """
import json, sys
from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.operators.delta_merge_check import DeltaMergeCheckOperator
from airflow_provider_deltamerge.sensors.delta_table import DeltaTableSensor
from airflow_provider_deltamerge.spec import insert_all, update_all

DeltaMergeOperator(task_id="python_form", target="/lake/orders", source="/staging/orders",
                   condition="t.id = s.id", clauses=[update_all(), insert_all()],
                   bounds={"numTargetRowsDeleted": {"max": 0}})
DeltaMergeOperator(task_id="sql_form", merge_sql="MERGE INTO delta.`/lake/orders` AS t "
                   "USING parquet.`/staging/orders` AS s ON t.id = s.id "
                   "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
DeltaMergeCheckOperator(task_id="check", merge_task_id="sql_form", bounds={"numSourceRows": {"min": 1}})
DeltaTableSensor(task_id="wait", table="/lake/orders", metrics={"numTargetRowsInserted": {"min": 1}})
print(json.dumps(sorted(sys.modules)))
"""
# Imported only when a task runs: seconds of imports that every parse of a DAG file would pay otherwise. The
# hook too: it brings the Spark provider's hooks (and requests with them).
RUN_TIME_ONLY = (
    "pyarrow",
    "pandas",
    "numpy",
    "deltalake",
    "pyspark",
    "airflow_provider_deltamerge.hooks.delta_merge",
)
# sqlglot parses the merge's SQL when the DAG is, with its tokenizer, parser and Spark dialect (which loads
# the dialects it builds on, and its scope and type annotation helpers); its optimizer, executor, planner,
# lineage and other dialects are not needed then.
SQLGLOT_HEAVY = (
    "sqlglot.optimizer.",
    "sqlglot.executor",
    "sqlglot.planner",
    "sqlglot.lineage",
    "sqlglot.dialects.",
)
SQLGLOT_AT_PARSE = {
    "sqlglot.optimizer.scope",
    "sqlglot.optimizer.annotate_types",
    *(f"sqlglot.dialects.{name}" for name in ("dialect", "hive", "spark2", "spark")),
}


def test_a_dag_parse_imports_no_library_the_merge_needs_only_when_it_runs():
    result = subprocess.run(
        [sys.executable, "-c", DAG_PARSE_CODE], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert [m for m in loaded if any(m == name or m.startswith(f"{name}.") for name in RUN_TIME_ONLY)] == []
    assert "sqlglot.parser" in loaded  # the MERGE INTO text was parsed
    heavy_sqlglot = [m for m in loaded if m.startswith(SQLGLOT_HEAVY) and m not in SQLGLOT_AT_PARSE]
    assert heavy_sqlglot == []


def test_a_task_runner_loads_the_history_plugin_but_not_its_pages(tmp_path):
    # Every task's runner loads every plugin (for their listeners); the pages' app, FastAPI, Airflow's API
    # server and deltalake are the API server's alone.
    code = (
        "import json, sys\n"
        "from airflow.sdk.listener import get_listener_manager\n"
        "get_listener_manager()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert "airflow_provider_deltamerge.history.plugin" in loaded
    pages_only = ("airflow_provider_deltamerge.history.routes", "deltalake", "pyarrow", "fastapi")
    assert [m for m in loaded if m.startswith(pages_only)] == []


def provider_distribution(module: str, declared: set[str]) -> str:
    """The distribution of provider module ``module``: its package root holds ``get_provider_info.py``; for a
    provider not installed here (the Google one, kept out of the dev venv), the declared one its name fits."""
    parts = module.split(".")
    for n in range(len(parts), 2, -1):
        name = "apache-airflow-providers-" + "-".join(parts[2:n])
        try:
            spec = importlib.util.find_spec(".".join(parts[:n]))
        except ModuleNotFoundError:  # a parent package is not installed
            spec = None
        if spec is None and name in declared:
            return name
        locations = spec.submodule_search_locations if spec else None
        if locations and any((Path(place) / "get_provider_info.py").exists() for place in locations):
            return name
    raise AssertionError(f"{module} belongs to no installed or declared provider")


def test_every_airflow_provider_imported_is_declared():
    # A provider imported but not declared works only where something else happened to install it.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *chain(*project["optional-dependencies"].values())]
    declared = {re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0] for requirement in requirements}
    imported = {
        node.module
        for path in (ROOT / "airflow_provider_deltamerge").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("airflow.providers.")
    }
    distributions = {provider_distribution(module, declared) for module in imported}
    assert "apache-airflow-providers-common-compat" in distributions  # the scan sees the imports
    assert distributions - declared == set()


def test_provider_info_is_valid_for_airflow():
    # Airflow's own schema for what a provider tells its provider manager.
    import airflow
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_airflow_shows_the_providers_settings(tmp_path):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    result = subprocess.run(
        ["airflow", "config", "list", "--section", "deltamerge", "--include-descriptions", "--defaults"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "[deltamerge]" in result.stdout
    assert "# allowed_paths = " in result.stdout
    assert "lake roots" in result.stdout  # its description, for whoever sets it


@pytest.mark.slow
def test_the_wheel_carries_the_license_classifiers_urls_and_type_marker(tmp_path):
    code = f"from setuptools import build_meta; print(build_meta.build_wheel({str(tmp_path)!r}))"
    built = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert built.returncode == 0, built.stderr[-3000:]
    with zipfile.ZipFile(tmp_path / built.stdout.strip().splitlines()[-1]) as wheel:
        names = wheel.namelist()
        info = f"airflow_provider_deltamerge-{__version__}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode()
        license_text = wheel.read(f"{info}/licenses/LICENSE").decode()
    assert "airflow_provider_deltamerge/py.typed" in names
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Framework :: Apache Airflow :: Provider" in metadata
    # The project's pages as package indexes show them, the architecture page among them (it is in docs/).
    urls = dict(
        line.split(": ", 1)[1].split(", ", 1)
        for line in metadata.splitlines()
        if line.startswith("Project-URL: ")
    )
    assert sorted(urls) == ["Changelog", "Documentation", "Homepage", "Issues", "Source"]
    assert urls["Documentation"].endswith("/docs/architecture.md")
    assert urls["Changelog"].endswith("/CHANGELOG.md")
    assert (ROOT / "docs" / "architecture.md").exists()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text


def test_the_changelog_has_a_section_for_this_version():
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    assert headings and headings[0] == __version__  # the newest section is this version's
