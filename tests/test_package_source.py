"""Checks over the package's own source text: what no module of the product may do, whoever calls it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import airflow_provider_deltamerge

PACKAGE = Path(airflow_provider_deltamerge.__file__).parent
# Calls that end or signal a process: a merge that kills itself is a test's fault, never the product's.
PROCESS_KILLS = {
    ("os", "kill"),
    ("os", "killpg"),
    ("os", "abort"),
    ("signal", "raise_signal"),
    ("signal", "pthread_kill"),
}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(PACKAGE.parent)), ast.parse(path.read_text(encoding="utf-8"))


def dotted(node: ast.expr) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def test_product_code_has_no_environment_triggered_fault_hook() -> None:
    # Fault injection lives in tests/faults.py, installed by the tests' sitecustomize: no module of the
    # package reads a test switch from the environment or kills its own process.
    found = []
    for name, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and "DELTAMERGE_TEST" in str(node.value):
                found.append(f"{name}:{node.lineno}: names a test switch {node.value!r}")
            if isinstance(node, ast.Call) and dotted(node.func) in PROCESS_KILLS:
                found.append(f"{name}:{node.lineno}: {ast.unparse(node.func)}()")
    assert found == []
