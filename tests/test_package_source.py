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


def product_errors(trees: list[tuple[str, ast.Module]]) -> set[str]:
    """DeltaMergeError and every class of the package derived from it."""
    names = {"DeltaMergeError"}
    classes = [node for _, tree in trees for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    while True:
        more = {c.name for c in classes if any(isinstance(b, ast.Name) and b.id in names for b in c.bases)}
        if more <= names:
            return names
        names |= more


def errors_of_one_class(trees: list[tuple[str, ast.Module]]) -> set[str]:
    """The classes whose ``__init__`` passes one constant error_class to ``super().__init__``: their
    constructions carry that class without naming it."""
    return {
        c.name
        for _, tree in trees
        for c in ast.walk(tree)
        if isinstance(c, ast.ClassDef)
        for f in c.body
        if isinstance(f, ast.FunctionDef) and f.name == "__init__"
        for call in ast.walk(f)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "__init__"
        and any(k.arg == "error_class" and isinstance(k.value, ast.Constant) for k in call.keywords)
    }


def annotation_name(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def has_class(call: ast.Call) -> bool:
    return any(k.arg == "error_class" for k in call.keywords)


# Raises of exceptions that are not the package's errors, each with the reason it stays. Keyed by module and
# the exception's name.
NON_PRODUCT_RAISES = {
    # Python's own protocols: a caller catches these by their type.
    ("engine/__init__.py", "AttributeError"): "a module's __getattr__ must raise AttributeError",
    ("delta/format/deletion_vectors.py", "ValueError"): "bytes that are no vector; callers wrap it in ours",
    (
        "delta/commit/commit_actions.py",
        "ValueError",
    ): "a programming error (a schema change without metadata)",
    ("delta/files/sql_text.py", "TypeError"): "a programming error: callers pass atomic types only",
    ("metrics.py", "KeyError"): "a programming error: an undeclared metric name",
    ("engine/resolve/schema_evolution.py", "_Incompatible"): "internal, caught and raised as a product error",
    ("operators/lineage.py", "TypeError"): "a programming error: a source form without a lineage dataset",
    ("session_kind.py", "ValueError"): "parsing a memory size; the caller falls back when it fails",
    ("delta/files/writer.py", "OSError"): "a storage failure moving a written file: transient, the job fails",
    ("spec/transport.py", "ValueError"): "caught at once and raised as DELTAMERGE_UNREADABLE_JOB_ANSWER",
    # The task's form of a product error, which keeps the class in its message: AirflowFailException for a
    # final one, the error itself for a transient one.
    ("operators/delta_merge.py", "_for_airflow"): "a product error as the task raises it",
    # Airflow's own exceptions, in code that only Airflow calls: DAG-parse checks of the operators' arguments,
    # the worker's setup (Spark connection, spark-submit, the job module), a sensor's store errors, and the
    # check operator's own verdicts (AirflowFailException fails without retries, AirflowSkipException skips).
    ("hooks/delta_merge.py", "AirflowException"): "the worker's setup or a job that answered nothing",
    ("hooks/delta_merge.py", "AirflowFailException"): "a submission no retry can mend: deploy mode, target",
    ("hooks/spark_setup.py", "AirflowException"): "the worker's setup: no Spark connection or spark-submit",
    # A connector's jars could not be fetched: the worker's setup, which the hook reports as an
    # AirflowException that Airflow's retries take.
    ("hooks/connector_jars.py", "JarResolutionError"): "the worker's setup: a connector could not be fetched",
    # The Connect server did not answer the job's first call: the worker's setup, which the hook reports as an
    # AirflowException that Airflow's retries take.
    ("job/connect.py", "ConnectServerUnavailable"): "the worker's setup: no Spark Connect server answered",
    ("operators/delta_merge.py", "AirflowException"): "DAG-parse checks of the operator's arguments",
    ("operators/delta_merge_check.py", "AirflowException"): "no metrics to check upstream",
    ("operators/delta_merge_check.py", "AirflowFailException"): "the check's verdict: fail, no retry",
    ("operators/delta_merge_check.py", "AirflowSkipException"): "the check's verdict: skip downstream",
    ("operators/delta_merge_check.py", "ValueError"): "DAG-parse check of on_failure",
    ("sensors/delta_table.py", "AirflowException"): "the store could not be read: a sensor's retry",
}


def raises_without_class(trees: list[tuple[str, ast.Module]]) -> tuple[list[str], set[tuple[str, str]]]:
    """Every construction of a product error without an error_class, and every other raise not listed; and
    the listed raises met."""
    errors = product_errors(trees)
    of_one_class = errors_of_one_class(trees)
    functions = [n for _, tree in trees for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    # Type variables bound to a product error (``ErrorT = TypeVar("ErrorT", bound=DeltaMergeError)``).
    bound = {
        target.id
        for _, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and callee(node.value) == "TypeVar"
        for keyword in node.value.keywords
        if keyword.arg == "bound" and annotation_name(keyword.value) in errors
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    # Functions that build a product error for their callers to raise: their constructions are checked below.
    factories = {f.name for f in functions if annotation_name(f.returns) in errors | bound}
    airflow_factories = {f.name for f in functions if annotation_name(f.returns) == "AirflowException"}
    found, listed = [], set()
    for name, tree in trees:
        module = name.split("/", 1)[1]
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and callee(node) in errors - of_one_class and not has_class(node):
                found.append(f"{name}:{node.lineno}: {callee(node)}(...) without error_class")
            if not isinstance(node, ast.Raise) or node.exc is None or isinstance(node.exc, ast.Name):
                continue  # a bare raise, or a re-raise of an exception object built elsewhere
            raised = callee(node.exc) if isinstance(node.exc, ast.Call) else None
            if raised in errors or raised in factories:
                continue
            if isinstance(node.exc, ast.Call) and has_class(node.exc):
                continue  # a product error of a type chosen by the caller (validation.raise_problems)
            if raised in airflow_factories:
                raised = "AirflowException"
            if (module, raised) in NON_PRODUCT_RAISES:
                listed.add((module, str(raised)))
            else:
                found.append(f"{name}:{node.lineno}: raise {ast.unparse(node.exc)[:60]}")
    return found, listed


def test_every_error_the_package_raises_carries_its_class() -> None:
    # A product error without a class counts as transient in exceptions.is_final: Airflow retries it, and
    # each retry runs the whole Spark job again.
    found, listed = raises_without_class(list(modules()))
    assert found == []
    assert sorted(set(NON_PRODUCT_RAISES) - listed) == []  # no stale allowance
