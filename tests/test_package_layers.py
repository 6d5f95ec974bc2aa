"""The package's layers, read from its source (ast, nothing imported): no module imports a layer above its
own (the table in docs/architecture.md), no two modules import each other even through others, and in
``delta/`` only ``files/`` reaches pyspark."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE_NAME = "airflow_provider_deltamerge"
PACKAGE = Path(__file__).resolve().parents[1] / PACKAGE_NAME
# Modules at the package root, below every package: names, errors, the session's kind, the job's contract,
# the stores' connectors.
ROOT_MODULES = {"", "exceptions", "job_contract", "metrics", "session_kind", "storage_connectors"}
# What each part of the package may import of the others, as docs/architecture.md's layer table has it
# (root modules are open to all); an entry names a layer or one module. The Airflow side reads the Delta
# log, never writes it: ``delta/log`` and ``delta/format`` only; it runs the job itself on a Spark Connect
# server, through ``job/connect.py`` alone.
MAY_IMPORT = {
    "spec": set(),
    "delta": {"spec"},
    "engine": {"spec", "delta"},
    "job": {"spec", "delta", "engine"},
    "history": {"delta.log", "delta.format", "hooks"},
    "hooks": {"spec", "delta.log", "delta.format", "job.connect"},
    "operators": {"spec", "delta.log", "delta.format", "hooks", "history"},
    "sensors": {"spec", "delta.log", "delta.format", "hooks", "operators", "triggers"},
    "triggers": {"spec", "delta.log", "delta.format", "hooks"},
}
# The groups of delta/, in order: each imports only its own and earlier ones.
DELTA_GROUPS = ("format", "log", "commit", "files")
SPARK_GROUPS = {"files"}


def module_names(package: Path) -> dict[str, Path]:
    """Dotted names below the package (``delta.log.snapshot``; ``""`` is the package itself) -> file."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def type_checking_nodes(tree: ast.Module) -> set[int]:
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for inner in ast.walk(statement)
    }


def imports(path: Path, names: dict[str, Path]) -> Iterator[tuple[str, bool, int]]:
    """(what it names: a module of the package, or ``pyspark``; whether at run time; line) of every import,
    those inside functions included. ``from x import y`` names ``x.y`` when that is a module, else ``x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = type_checking_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
            targets = [t if t.removeprefix(f"{PACKAGE_NAME}.") in names else node.module for t in targets]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == "pyspark":
                yield "pyspark", id(node) not in typing_only, node.lineno
            elif target == PACKAGE_NAME or target.startswith(f"{PACKAGE_NAME}."):
                yield (
                    target.removeprefix(PACKAGE_NAME).removeprefix("."),
                    id(node) not in typing_only,
                    node.lineno,
                )


def edges(package: Path) -> dict[str, list[tuple[str, bool, int]]]:
    names = module_names(package)
    return {name: list(imports(path, names)) for name, path in names.items()}


def part(name: str) -> str:
    """The layer a module is in: ``""`` for a root module, ``delta.<group>`` in delta/, else its package."""
    if name in ROOT_MODULES:
        return ""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "delta" and len(parts) > 1 else parts[0]


def allowed(importer: str, imported: str) -> bool:
    mine, theirs = part(importer), part(imported)
    if theirs == "" or imported == "delta" or mine == theirs:
        return True  # root modules are open to all; delta/__init__ holds only its docstring
    if mine == "":
        return False  # a root module stays below every package
    if mine.startswith("delta.") and theirs.startswith("delta."):
        groups = mine.removeprefix("delta."), theirs.removeprefix("delta.")
        # A loose module of delta/ is caught by test_delta_is_grouped; between groups, only downwards.
        if not set(groups) <= set(DELTA_GROUPS):
            return True
        return DELTA_GROUPS.index(groups[1]) <= DELTA_GROUPS.index(groups[0])
    granted = MAY_IMPORT[mine.split(".")[0]]
    return imported in granted or theirs in granted or theirs.split(".")[0] in granted


def arrows_up(package: Path) -> list[str]:
    return sorted(
        set(
            f"{name} -> {target} (line {line})"
            for name, found in edges(package).items()
            for target, _, line in found
            if target != "pyspark" and not allowed(name, target)
        )
    )


def cycles(package: Path) -> list[list[str]]:
    """Each import cycle between modules (type-checking imports count: the reader follows them too),
    as the strongly connected components of more than one module."""
    graph = {
        name: sorted({t for t, _, _ in found if t not in ("pyspark", name)})
        for name, found in edges(package).items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, []):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in graph:
        if node not in index:
            visit(node)
    return found


def spark_reach(package: Path) -> dict[str, list[str]]:
    """For each module outside delta's Spark groups that reaches pyspark at run time, the import chain."""
    graph = edges(package)
    runtime = {n: [t for t, at_run_time, _ in found if at_run_time] for n, found in graph.items()}

    def chain(start: str) -> list[str] | None:
        seen, queue = {start}, [[start]]
        while queue:
            path = queue.pop(0)
            for nxt in runtime.get(path[-1], []):
                if nxt == "pyspark":
                    return [*path, nxt]
                # Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` too.
                for step in [".".join(nxt.split(".")[:i]) for i in range(1, nxt.count(".") + 1)] + [nxt]:
                    if step not in seen and step in graph:
                        seen.add(step)
                        queue.append([*path, step])
        return None

    pure = [n for n in graph if n.startswith("delta") and part(n).removeprefix("delta.") not in SPARK_GROUPS]
    return {name: found for name in pure if (found := chain(name)) is not None}


@pytest.mark.parametrize("check", ["arrows_up", "cycles", "spark_reach"])
def test_the_old_flat_layout_fails_each_check(check: str, tmp_path: Path) -> None:
    # Every check can fail: a copy of delta/ as it was (flat, an arrow up to engine/metrics, a circle
    # through a type hint, the commit reaching pyspark through the writer's records) is caught by each.
    package = tmp_path / PACKAGE_NAME
    (package / "delta").mkdir(parents=True)
    (package / "engine").mkdir()
    for name in ("__init__.py", "delta/__init__.py", "engine/__init__.py", "engine/metrics.py"):
        (package / name).write_text('"""."""\n')
    (package / "delta/snapshot.py").write_text(
        f"from {PACKAGE_NAME}.delta.column_mapping import maps_columns\n"
        f"from {PACKAGE_NAME}.engine.metrics import NAMES\n"
    )
    (package / "delta/column_mapping.py").write_text(
        "from typing import TYPE_CHECKING\n"
        f"if TYPE_CHECKING:\n    from {PACKAGE_NAME}.delta.snapshot import S\n"
    )
    (package / "delta/commit.py").write_text(f"from {PACKAGE_NAME}.delta.writer import WrittenFile\n")
    (package / "delta/writer.py").write_text("from pyspark.sql import DataFrame\n")
    found = {"arrows_up": arrows_up, "cycles": cycles, "spark_reach": spark_reach}[check](package)
    assert found


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert arrows_up(PACKAGE) == []


def test_no_import_cycle_between_modules() -> None:
    assert cycles(PACKAGE) == []


def test_only_delta_files_reaches_pyspark() -> None:
    # The rule a newcomer keeps: delta/format, delta/log and delta/commit never import pyspark, not even
    # through another module, so the Airflow side can read the log on a machine without Spark.
    assert spark_reach(PACKAGE) == {}


def test_delta_is_grouped() -> None:
    # Every module of delta/ is in one of its groups (no new flat room).
    loose = [n for n in module_names(PACKAGE) if n.startswith("delta.") and n.count(".") == 1]
    assert [n for n in loose if n.split(".")[1] not in DELTA_GROUPS] == []
