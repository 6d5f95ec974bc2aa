"""What each runner makes of a merge in the tests' Delta session: our engine, the delta-spark backend (and
the backend once more with the same run identity, as a retried task would) and Delta's own ``MERGE INTO``.

Outcomes are plain dicts, read the same way for each runner: rows and metrics, the newest commit as Delta's
own ``DeltaTable.history`` reads it, or the error raised, with Delta's JVM errors read from the JVM itself so
that the tests do not check our error parsing against itself.
"""

from __future__ import annotations

import functools
import json
import re
import zipfile
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.backends.delta_spark import (
    DELTA_ERROR_CATALOGUE,
    run_with_delta_spark,
)
from airflow_provider_deltamerge.engine.merge import MergeResult
from airflow_provider_deltamerge.engine.resolve.target_table import table_location
from airflow_provider_deltamerge.engine.session_confs import AUTO_MERGE
from airflow_provider_deltamerge.exceptions import DeltaMergeError
from airflow_provider_deltamerge.session_kind import session_confs_set
from airflow_provider_deltamerge.spec import MergeSpec, to_merge_sql
from airflow_provider_deltamerge.spec.json_form import spec_from_json
from tests.delta_runtime import delta_jars

ENGINE = "engine"
BACKEND = "delta-spark"
SQL = "sql"  # Delta's own MERGE INTO
RUNNERS = (ENGINE, BACKEND, SQL)
RETRY = "retry"
# The row counts Delta records in a MERGE commit (DeltaOperationMetrics.MERGE).
ROW_COUNTS = (
    m.NUM_SOURCE_ROWS,
    m.NUM_TARGET_ROWS_INSERTED,
    m.NUM_TARGET_ROWS_UPDATED,
    m.NUM_TARGET_ROWS_MATCHED_UPDATED,
    m.NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_UPDATED,
    m.NUM_TARGET_ROWS_DELETED,
    m.NUM_TARGET_ROWS_MATCHED_DELETED,
    m.NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_DELETED,
    m.NUM_TARGET_ROWS_COPIED,
    m.NUM_OUTPUT_ROWS,
)  # the backend again, with the run identity of its first run

# Exceptions and causes read from the JVM, at the most (a cause chain can loop back on itself).
_MAX_CHAIN = 20


def run_case(spark: SparkSession, specs: Mapping[str, str], run: Mapping[str, Any]) -> dict[str, Any]:
    """What each runner made of one case; ``specs`` holds each runner's spec (the same but for its target)."""
    engine, backend, sql = (spec_from_json(specs[runner]) for runner in RUNNERS)
    outcomes = {
        ENGINE: _merge_outcome(spark, engine, lambda: run_merge(spark, engine)),
        BACKEND: _merge_outcome(
            spark, backend, lambda: run_with_delta_spark(spark, backend, provenance={**run, "tryNumber": 1})
        ),
    }
    if "error" not in outcomes[BACKEND]:
        outcomes[RETRY] = _merge_outcome(
            spark, backend, lambda: run_with_delta_spark(spark, backend, provenance={**run, "tryNumber": 2})
        )
    outcomes[SQL] = _sql_outcome(spark, sql)
    return outcomes


def _merge_outcome(spark: SparkSession, spec: MergeSpec, merge: Callable[[], MergeResult]) -> dict[str, Any]:
    try:
        result = merge()
    except DeltaMergeError as err:
        return {
            "error": type(err).__name__,
            "errorClass": err.error_class,
            "message": err.message,
            "text": str(err),
        }
    return {
        "metrics": dict(result.metrics),
        "version": result.version,
        "committed": result.committed,
        "alreadyCommitted": result.already_committed,
        "commit": _latest_commit(spark, spec.target),
    }


def _sql_outcome(spark: SparkSession, spec: MergeSpec) -> dict[str, Any]:
    # Delta's DeltaAnalysis has passed withSchemaEvolution=false for SQL MERGE (a TODO in its source), so the
    # statement's WITH SCHEMA EVOLUTION alone may not evolve; autoMerge is Delta's other switch for the same
    # canEvolveSchema (ResolveDeltaMergeInto), honoured by every Delta release.
    evolution: AbstractContextManager[None] = (
        session_confs_set(spark, {AUTO_MERGE: "true"}) if spec.schema_evolution else nullcontext()
    )
    try:
        with evolution:
            spark.sql(to_merge_sql(spec)).collect()
    except (PySparkException, Py4JJavaError) as err:
        return {"error": type(err).__name__, "jvmErrors": jvm_errors(err)}
    return {"commit": _latest_commit(spark, spec.target)}


def _latest_commit(spark: SparkSession, target: str) -> dict[str, Any]:
    """The newest commit of ``target`` (a path or a catalog name) as Delta's own runtime reads it
    (``DeltaTable.history``)."""
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, table_location(spark, target)).history(1).collect()[0]
    metrics = row["operationMetrics"] or {}
    return {"version": row["version"], "operation": row["operation"], "operationMetrics": dict(metrics)}


def jvm_errors(err: PySparkException | Py4JJavaError) -> list[dict[str, str | None]]:
    """The JVM's exception and its causes, outermost first: each one's error class and message as the JVM
    holds them, read directly, so that the test does not check our error parsing against itself."""
    throwable = err.java_exception if isinstance(err, Py4JJavaError) else getattr(err, "_origin", None)
    chain: list[dict[str, str | None]] = []
    while throwable is not None and len(chain) < _MAX_CHAIN:
        chain.append({"errorClass": _error_class(throwable), "message": str(throwable.getMessage())})
        throwable = throwable.getCause()
    return chain


WRAPPER_CLASSES = frozenset({"TASK_WRITE_FAILED"})


def delta_error_classes(errors: list[dict[str, str | None]]) -> list[str]:
    """The error classes of ``jvm_errors``, also where Spark could only name one: Delta 4.4 on Spark 4.2 has
    Spark render some analysis errors, whose text is then ``Cannot find main error class 'X'``."""
    lost = re.compile(r"Cannot find main error class '([A-Z0-9_.]+)'")
    named = (lost.search(e["message"] or "") for e in errors)
    classes = [c for c in (e["errorClass"] for e in errors) if c and c != "INTERNAL_ERROR"]
    # Spark's wrapper of a failed write task comes before the class of what failed in it
    ordered = [c for c in classes if c not in WRAPPER_CLASSES] + [c for c in classes if c in WRAPPER_CLASSES]
    return ordered + [found.group(1) for found in named if found]


def _error_class(throwable: Any) -> str | None:
    """A SparkThrowable's error class (Spark 4 calls it the condition); None for other exceptions."""
    for method in ("getCondition", "getErrorClass"):
        try:
            error_class = getattr(throwable, method)()
        except Py4JError:  # not a SparkThrowable, or a release without the method
            continue
        if error_class is not None:
            return str(error_class)
    return None


def first_sentence(jvm_message: str) -> str:
    """A JVM error message's first sentence (of its first line, where Delta's catalogue breaks a long one),
    without the ``[CLASS]`` it starts with, its SQLSTATE or the ``; line 1 pos 2`` of an analysis error."""
    line = (jvm_message.strip().splitlines() or [""])[0]
    line = re.sub(r"\s*SQLSTATE:.*$", "", re.sub(r"^\[[A-Z0-9_.]+\]\s*", "", line))
    sentence = re.match(r".*?\.(?=[\s;]|$)", line)  # a period inside a name (t.id) ends no sentence
    return sentence.group(0) if sentence else line


@functools.cache
def error_catalogue() -> dict[str, Any]:
    """Spark's error catalogue (from its jars) with Delta's (from Delta's jar) over it: every class's message
    template, read from the jars, not through the JVM."""
    import pyspark

    spark_jars = Path(pyspark.__file__).parent / "jars"
    spark = next(spark_jars.glob("spark-common-utils_*.jar"))
    delta = next(jar for jar in delta_jars() if "delta-spark_" in Path(jar).name)
    catalogue: dict[str, Any] = {}
    for jar, entry in ((spark, "error/error-conditions.json"), (delta, DELTA_ERROR_CATALOGUE)):
        with zipfile.ZipFile(jar) as archive:
            catalogue.update(json.loads(archive.read(entry)))
    return catalogue


def catalogued_sentence(error_class: str) -> re.Pattern[str]:
    """The first sentence of Delta's message for ``error_class``, from the error catalogue in Delta's jar
    (read here from the jar, not through the JVM the backend reads it with), its ``<parameters>`` matching
    any text."""
    sentence = first_sentence(" ".join(error_catalogue()[error_class]["message"]))
    return re.compile(".+?".join(re.escape(part) for part in re.split(r"<\w+>", sentence)))
