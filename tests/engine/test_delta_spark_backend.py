"""The delta-spark backend: runtime checks, backend choice, and the spec's translation to Delta's builder.

Delta's JVM runtime cannot run on this machine, so its Python API (``delta.tables.DeltaTable`` and the
builder it returns) is faked at that boundary; everything else is real: the SparkSession without Delta,
the source read, the session conf, and Delta tables on disk written with deltalake.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import types
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock, call

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.schema import Field, PrimitiveType, Schema
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import Row

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge.delta.idempotency import find_committed_run
from airflow_provider_deltamerge.engine import metrics as m
from airflow_provider_deltamerge.engine.backends import delta_spark as backend
from airflow_provider_deltamerge.exceptions import (
    ClauseResolutionError,
    DeltaRuntimeError,
    MergeCommitError,
    MergeExecutionError,
    MergeSpecError,
    TargetTableError,
)
from airflow_provider_deltamerge.hooks.delta_merge import commit_result
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    delete,
    delete_by_source,
    insert,
    insert_all,
    update,
    update_all,
    update_by_source,
)
from tests.conftest import make_table
from tests.delta.helpers import craft_table
from tests.engine.test_catalog_target import register_delta_table

USER_METADATA = backend.USER_METADATA_CONF
PIP_HINT = "the Python package delta-spark: pip install airflow-provider-deltamerge[delta-spark]"
SOURCE = pa.table(
    {
        "id": pa.array([3, 20], pa.int64()),
        "qty": pa.array([1, 2], pa.int32()),
        "region": pa.array(["us", "eu"]),
        "note": pa.array(["changed", "new"]),  # not a target column
    }
)
TARGET_COLUMNS = ("id", "qty", "region", "created")  # `created` is not a source column

# A MERGE commit's operationMetrics as Delta 4.4 writes them (strings; DeltaOperationMetrics.MERGE in Delta's
# DeltaOperations.scala), but for numTargetFiles/BytesAdded/Removed, which the fake takes from its files.
DELTA_OPERATION_METRICS = {
    "numSourceRows": "2",
    "numTargetRowsInserted": "1",
    "numTargetRowsUpdated": "1",
    "numTargetRowsMatchedUpdated": "1",
    "numTargetRowsNotMatchedBySourceUpdated": "0",
    "numTargetRowsDeleted": "0",
    "numTargetRowsMatchedDeleted": "0",
    "numTargetRowsNotMatchedBySourceDeleted": "0",
    "numTargetRowsCopied": "4",
    "numOutputRows": "6",
    "numTargetChangeFilesAdded": "0",
    "numTargetDeletionVectorsAdded": "0",
    "numTargetDeletionVectorsRemoved": "0",
    "numTargetDeletionVectorsUpdated": "0",
    "executionTimeMs": "812",
    "materializeSourceTimeMs": "3",
    "scanTimeMs": "301",
    "rewriteTimeMs": "402",
}
# What Delta measures in its SQL metrics only (MergeIntoCommandBase.baseMetrics less the commit's set).
SQL_METRICS_ONLY = {
    m.NUM_TARGET_FILES_AFTER_SKIPPING,
    m.NUM_TARGET_BYTES_AFTER_SKIPPING,
    m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING,
    m.NUM_SOURCE_ROWS_IN_SECOND_SCAN,
}
TARGET_ROWS = {"id": pa.int64(), "qty": pa.int32(), "region": pa.string(), "created": pa.string()}


def target_rows(ids: list[int], region: str) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "qty": [1] * len(ids),
            "region": [region] * len(ids),
            "created": ["2026-01-01"] * len(ids),
        },
        schema=pa.schema(TARGET_ROWS),
    )


def three_file_target(path: Path, *, partitioned: bool = True) -> str:
    """The target at version 1: three files, two of region us and one of eu (partitions when partitioned)."""
    partition_by = ["region"] if partitioned else None
    first = pa.concat_tables([target_rows([1, 2], "us"), target_rows([3], "eu")])
    write_deltalake(
        str(path), first if partitioned else target_rows([1, 2, 3], "us"), partition_by=partition_by
    )
    write_deltalake(str(path), target_rows([4, 5], "us"), partition_by=partition_by, mode="append")
    return str(path)


def data_file_bytes(path: Path) -> int:
    """The bytes of every data file under the table's folder, read from the file system."""
    return sum(f.stat().st_size for f in path.rglob("*.parquet"))


class FakeDeltaRuntime:
    """Delta's JVM side, which cannot run here, at the boundary the backend meets: a builder whose execute()
    writes a MERGE commit into the real table's ``_delta_log`` as Delta does, and a history() that reads the
    commits' commitInfo back from the log, newest first.

    The merge rewrites the first file of region us (a remove, and a new file in us) and inserts into eu (a
    new file): Delta's commitInfo (operationMetrics, readVersion, userMetadata), then remove and add actions
    with partitionValues and sizes of parquet files really written. Under ``deletion_vectors`` the us file is
    instead removed and added back under a new vector, as Delta's DV merge does. Its builder returns itself
    from every clause call, so ``builder.mock_calls`` is the call sequence.
    """

    def __init__(self, spark: Any, table: Path) -> None:
        self.spark, self.path = spark, table
        self.partitioned = bool(DeltaTable(str(table)).metadata().partition_columns)
        self.commit_metrics: dict[str, str] | None = dict(DELTA_OPERATION_METRICS)  # None: no commit
        self.other_writers_after = 0  # commits by other writers that land right after ours
        self.other_writers_during = 0  # ... that land between Delta's read and its commit
        self.deletion_vectors = False
        self.execute_error: Exception | None = None
        self.user_metadata_seen: list[str | None] = []
        self.added_bytes = 0  # of the data files the last merge wrote
        self.DeltaTable = MagicMock(name="DeltaTable")
        self.table = self.DeltaTable.forPath.return_value
        self.table.history.side_effect = self.history
        self.table.toDF.return_value.columns = list(TARGET_COLUMNS)
        self.builder = self.table.alias.return_value.merge.return_value
        for method in (
            "whenMatchedUpdate",
            "whenMatchedUpdateAll",
            "whenMatchedDelete",
            "whenNotMatchedInsert",
            "whenNotMatchedInsertAll",
            "whenNotMatchedBySourceUpdate",
            "whenNotMatchedBySourceDelete",
            "withSchemaEvolution",
        ):
            getattr(self.builder, method).return_value = self.builder
        self.builder.execute.side_effect = self.execute

    def history(self, limit: int | None = None) -> MagicMock:
        infos = []
        for commit in sorted((self.path / "_delta_log").glob("*.json"), reverse=True)[:limit]:
            lines = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
            info = next(line["commitInfo"] for line in lines if "commitInfo" in line)
            infos.append(
                Row(
                    version=int(commit.stem),
                    operation=info.get("operation"),
                    readVersion=info.get("readVersion"),
                    operationMetrics=info.get("operationMetrics"),
                    userMetadata=info.get("userMetadata"),
                )
            )
        rows = MagicMock(name="history")
        rows.collect.return_value = infos
        return rows

    def execute(self) -> MagicMock:
        user_metadata = self.spark.conf.get(USER_METADATA, None)
        self.user_metadata_seen.append(user_metadata)
        if self.execute_error is not None:
            raise self.execute_error
        read_version = self._latest()
        for _ in range(self.other_writers_during):  # a blind append into eu
            added = {"add": self._data_file(target_rows([30], "eu"), "eu")}
            self._commit({"operation": "WRITE", "userMetadata": '{"submissionId": "someone else"}'}, [added])
        if self.commit_metrics is not None:
            self._commit_merge(read_version, user_metadata)
        for _ in range(self.other_writers_after):
            info = {"operation": "WRITE", "operationMetrics": {"numOutputRows": "7"}}
            self._commit({**info, "userMetadata": '{"submissionId": "someone else"}'}, [])
        counts = MagicMock(name="execute result")
        counts.collect.return_value = [
            Row(num_affected_rows=0, num_updated_rows=0, num_deleted_rows=0, num_inserted_rows=0)
        ]
        return counts

    def _commit_merge(self, read_version: int, user_metadata: str | None) -> None:
        files = pa.table(DeltaTable(str(self.path), version=read_version).get_add_actions()).to_pylist()
        us_files = [f for f in files if not self.partitioned or "region=us" in f["path"]]
        rewritten = min(us_files, key=lambda f: f["path"])
        partition = {"region": "us"} if self.partitioned else {}
        removed = {
            "path": rewritten["path"],
            "deletionTimestamp": 1,
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": partition,
            "size": rewritten["size_bytes"],
        }
        added = [self._data_file(target_rows([20], "eu"), "eu")]
        if self.deletion_vectors:  # the same file back, under its new vector
            vector = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1}
            added.append(
                {
                    **{k: removed[k] for k in ("path", "partitionValues", "size", "dataChange")},
                    "modificationTime": 1,
                    "deletionVector": {**vector, "sizeInBytes": 36, "cardinality": 1},
                }
            )
        else:
            added.append(self._data_file(target_rows([2], "us"), "us"))
        new = [a for a in added if a["path"] != removed["path"]]
        self.added_bytes = sum(a["size"] for a in new)
        metrics = {
            **(self.commit_metrics or {}),
            "numTargetFilesAdded": str(len(new)),
            "numTargetFilesRemoved": str(0 if self.deletion_vectors else 1),
            "numTargetBytesAdded": str(self.added_bytes),
            "numTargetBytesRemoved": str(0 if self.deletion_vectors else rewritten["size_bytes"]),
        }
        info = {"operation": "MERGE", "readVersion": read_version, "operationMetrics": metrics}
        self._commit(
            {**info, "userMetadata": user_metadata}, [{"remove": removed}, *({"add": a} for a in added)]
        )

    def _data_file(self, rows: pa.Table, region: str) -> dict[str, Any]:
        folder = f"region={region}/" if self.partitioned else ""
        name = f"{folder}part-00000-{uuid.uuid4()}.c000.snappy.parquet"
        (self.path / name).parent.mkdir(exist_ok=True)
        pq.write_table(rows.drop(["region"]) if self.partitioned else rows, self.path / name)
        return {
            "path": name,
            "partitionValues": {"region": region} if self.partitioned else {},
            "size": (self.path / name).stat().st_size,
            "modificationTime": 1,
            "dataChange": True,
        }

    def _latest(self) -> int:
        return max(int(f.stem) for f in (self.path / "_delta_log").glob("*.json"))

    def _commit(self, info: dict[str, Any], actions: list[dict[str, Any]]) -> None:
        lines = [{"commitInfo": {"timestamp": 1, **info}}, *actions]
        log_file = self.path / "_delta_log" / f"{self._latest() + 1:020d}.json"
        log_file.write_text("".join(json.dumps(line) + "\n" for line in lines))


class ConcurrentAppendException(PySparkException):
    """delta.exceptions.ConcurrentAppendException (delta/exceptions/base.py), the class the backend tests."""


class FakeConcurrentAppend(CapturedException, ConcurrentAppendException):
    """delta/exceptions/captured.py's ConcurrentAppendException: PySpark's own CapturedException built from
    the JVM exception's description, stack trace and cause, with no origin, so getMessage() is "" and
    getCondition() None under PySpark 4; only str() (the description first) carries Delta's text."""


def delta_conflict(spark: Any, message: str) -> FakeConcurrentAppend:
    """A conflict as delta-spark converts Delta's JVM exception (``_convert_delta_exception``): the text after
    the Java class name, the stack as Spark renders it, the cause. The Java exception is a real one, of the
    JDK class Delta's ``io.delta.exceptions.ConcurrentAppendException`` extends."""
    java = spark._jvm.java.util.ConcurrentModificationException(message)
    stack = getattr(spark._jvm, "org.apache.spark.util.Utils").exceptionString(java)
    return FakeConcurrentAppend(java.toString().split(": ", 1)[1], stack, java.getCause())


def thrown_by_jvm(spark: Any, throwable: Any) -> PySparkException | Py4JJavaError:
    """What a py4j call that throws ``throwable`` raises in Python, through PySpark's own handler: PySpark's
    exception (``_origin`` the throwable) for the JVM classes it converts, a Py4JJavaError for the rest."""
    jvm = spark._jvm
    throw = jvm.java.lang.invoke.MethodHandles.throwException(
        jvm.java.lang.Class.forName("java.lang.Object"), throwable.getClass()
    )
    arguments = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, 1)
    arguments[0] = throwable
    try:
        throw.invokeWithArguments(arguments)
    except (PySparkException, Py4JJavaError) as err:
        return err
    raise AssertionError("the JVM did not throw")


def failed_write_job(spark: Any, error_class: str, message: str) -> PySparkException | Py4JJavaError:
    """A write job that a task's error aborted, as the driver's py4j call receives it: Spark's job-abort
    SparkException, whose message embeds the task's stack, over the task's TASK_WRITE_FAILED (Delta's
    DeltaFileFormatWriter wraps every task error so), over the error itself. Delta's DeltaArithmeticException
    extends java.lang.ArithmeticException; its message is Delta's rendering."""
    jvm = spark._jvm
    spark_exception = getattr(jvm, "org.apache.spark.SparkException")
    cause = jvm.java.lang.ArithmeticException(f"[{error_class}] {message}")
    task = spark_exception(
        f"[TASK_WRITE_FAILED] Task failed while writing rows to {TASK_PATH}. SQLSTATE: 58030", cause
    )
    lost = "Task 0 in stage 12.0 failed 1 times, most recent failure: Lost task 0.0 in stage 12.0 (TID 20)"
    job = spark_exception(
        f"Job aborted due to stage failure: {lost}: {task.toString()}{JVM_FRAMES}\nDriver stacktrace:", task
    )
    return thrown_by_jvm(spark, job)


class FakeJavaThrowable:
    """A JVM exception as py4j shows it: its own message (what Delta's error catalogue rendered), a cause."""

    def __init__(self, message: str, cause: FakeJavaThrowable | None = None) -> None:
        self.message, self.cause = message, cause

    def getMessage(self) -> str:
        return self.message

    def getCause(self) -> FakeJavaThrowable | None:
        return self.cause

    def toString(self) -> str:
        return self.message


JVM_FRAMES = "".join(f"\n\tat org.apache.spark.sql.delta.Frame{n}.run(Frame.scala:{n})" for n in range(400))


def delta_error(kind: type[PySparkException], error_class: str, message: str) -> PySparkException:
    """A Delta error as PySpark 4 hands it over (pyspark/errors/exceptions/captured.py): getCondition() is
    Delta's class, getMessage() is re-rendered from Spark's catalogue, which lacks DELTA_* (so it says
    INTERNAL_ERROR), str() carries the JVM stack, and ``_origin`` is the Java exception with Delta's text."""

    class Captured(kind):  # type: ignore[misc, valid-type]
        def getCondition(self) -> str:
            return error_class

        def getMessage(self) -> str:
            return f"[INTERNAL_ERROR] Cannot find main error class '{error_class}' SQLSTATE: XX000"

    error = Captured(message=f"[{error_class}] {message}{JVM_FRAMES}")
    error._origin = FakeJavaThrowable(f"[{error_class}] {message} SQLSTATE: 42601;{JVM_FRAMES}")  # type: ignore[attr-defined]
    return error


def install_delta_package(mocker: Any, delta_table: Any = None) -> None:
    """Make ``import delta.tables`` / ``delta.exceptions`` find a stand-in for the delta-spark package."""
    package = types.ModuleType("delta")
    tables = types.ModuleType("delta.tables")
    tables.DeltaTable = delta_table or MagicMock(name="DeltaTable")  # type: ignore[attr-defined]
    exceptions = types.ModuleType("delta.exceptions")
    exceptions.ConcurrentAppendException = ConcurrentAppendException  # type: ignore[attr-defined]
    exceptions.__all__ = ["ConcurrentAppendException"]  # type: ignore[attr-defined]
    package.tables, package.exceptions = tables, exceptions  # type: ignore[attr-defined]
    mocker.patch.dict(sys.modules, {"delta": package, "delta.tables": tables, "delta.exceptions": exceptions})


def use_runtime(mocker: Any, runtime: FakeDeltaRuntime) -> FakeDeltaRuntime:
    """Delta's runtime as the backend sees it: the delta-spark package, jars and confs (all stand-ins)."""
    install_delta_package(mocker, runtime.DeltaTable)
    # The jars and the static session extension cannot be added to the shared local session.
    mocker.patch.object(backend, "missing_delta_runtime", return_value=())
    return runtime


@pytest.fixture
def delta(spark, mocker, tmp_path):
    """Delta's runtime over the target of ``spec_of``: three files in two partitions, at version 1."""
    return use_runtime(mocker, FakeDeltaRuntime(spark, Path(three_file_target(tmp_path / "target"))))


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "source.parquet"
    pq.write_table(SOURCE, path)
    return PathSource(str(path))


def spec_of(source: PathSource, tmp_path: Path, clauses: tuple[Any, ...], **kwargs: Any) -> MergeSpec:
    condition = f"{kwargs.get('target_alias', 't')}.id = {kwargs.get('source_alias', 's')}.id"
    return MergeSpec(
        target=str(tmp_path / "target"), source=source, condition=condition, clauses=clauses, **kwargs
    )


class DeltaConfiguredSession:
    """A session whose confs name Delta's extension and catalog, with no JVM to ask (as Spark Connect)."""

    def __init__(self, confs: dict[str, str], version: str = "4.2.0") -> None:
        self.conf = SimpleNamespace(get=lambda key, default=None: confs.get(key, default))
        self.version = version


DELTA_CONFS = {
    backend.EXTENSIONS_CONF: f"com.example.OtherExtension, {backend.DELTA_EXTENSION}",
    backend.CATALOG_CONF: backend.DELTA_CATALOG,
}


# --- runtime checks -------------------------------------------------------------------------------------


def test_local_session_without_delta_names_every_missing_piece(spark):
    # Given: this machine's SparkSession: no delta-spark package, no Delta jars, no Delta confs
    # When/Then: there is no Delta runtime, and the error says how to add each piece
    assert backend.has_delta_runtime(spark) is False
    with pytest.raises(DeltaRuntimeError) as raised:
        backend.require_delta_runtime(spark)
    message = str(raised.value)
    assert f"1. {PIP_HINT}" in message
    assert "2. Delta's jars (io.delta.tables.DeltaTable" in message
    assert f"--packages io.delta:delta-spark_{spark.version[:3]}_2.13:<version>" in message
    assert "spark.jars" in message
    assert "3. the Spark conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in message
    assert (
        "4. the Spark conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog"
        in message
    )
    assert raised.value.error_class == "DELTA_RUNTIME_MISSING"


@pytest.mark.parametrize(
    ("delta_version", "spark_version", "artifact"),
    [
        ("4.4.1", "4.2.0", "delta-spark_4.2_2.13"),
        ("4.1.0", "4.0.1", "delta-spark_4.0_2.13"),
        ("4.0.1", "4.0.1", "delta-spark_2.13"),
    ],
)
def test_the_jars_hint_names_the_artifact_as_delta_s_pip_utils_does(
    mocker, delta_version, spark_version, artifact
):
    # delta-spark's configure_spark_with_delta_pip asks for one artifact per Spark line since 4.1
    mocker.patch.object(backend.importlib.metadata, "version", return_value=delta_version)
    assert backend._delta_artifact(spark_version) == artifact


def test_jvm_check_tells_a_loadable_class_from_a_missing_one(spark):
    assert backend._jvm_has_class(spark, "org.apache.spark.sql.SparkSession") is True
    assert backend._jvm_has_class(spark, backend.DELTA_TABLE_CLASS) is False


def test_python_package_alone_is_not_a_runtime(spark, mocker):
    # Given: delta.tables importable, but the real local session has neither jars nor confs
    install_delta_package(mocker)
    # When
    missing = backend.missing_delta_runtime(spark)
    # Then: no pip hint; jars and both confs still missing
    assert [item.split(" (")[0].split("=")[0] for item in missing] == [
        "Delta's jars",
        "the Spark conf spark.sql.extensions",
        "the Spark conf spark.sql.catalog.spark_catalog",
    ]


def test_catalog_conf_set_on_the_session_is_recognised(spark):
    session = spark.newSession()  # runtime confs of its own; the shared session stays untouched
    session.conf.set(backend.CATALOG_CONF, backend.DELTA_CATALOG)
    missing = backend.missing_delta_runtime(session)
    assert not any(backend.CATALOG_CONF in item for item in missing)
    assert any(backend.EXTENSIONS_CONF in item for item in missing)


def test_configured_session_with_package_has_runtime(mocker):
    install_delta_package(mocker)
    assert backend.has_delta_runtime(DeltaConfiguredSession(DELTA_CONFS)) is True  # type: ignore[arg-type]
    backend.require_delta_runtime(DeltaConfiguredSession(DELTA_CONFS))  # type: ignore[arg-type]


# What the delta-spark 4.4.0 and 4.4.1 wheels declare (METADATA, Requires-Dist), verbatim.
DELTA_4_4_REQUIRES = ["pyspark<=4.2.0,>=4.0.1", "importlib_metadata<=8.7.1,>=1.0.0"]


@pytest.mark.parametrize(
    ("spark_version", "runs"),
    [("4.0.1", True), ("4.2.0", True), ("4.0.0", False), ("4.2.1", False), ("4.3.0", False)],
)
def test_a_spark_version_delta_was_not_built_for_is_refused_before_the_jvm_crashes(
    mocker, spark_version, runs
):
    # Given: delta-spark 4.4.1 installed, with the pyspark range its wheel declares
    install_delta_package(mocker)
    requires = {"delta-spark": DELTA_4_4_REQUIRES}
    mocker.patch.object(backend.importlib.metadata, "requires", side_effect=requires.__getitem__)
    mocker.patch.object(backend.importlib.metadata, "version", return_value="4.4.1")
    session = DeltaConfiguredSession(DELTA_CONFS, spark_version)
    # When/Then: a Spark outside that range, patch releases after its top included, is refused by name
    refused = (
        f"a Spark version delta-spark 4.4.1 supports (<=4.2.0,>=4.0.1); this session runs Spark "
        f"{spark_version}: install the delta-spark release built for it, or that Spark"
    )
    assert backend.missing_delta_runtime(session) == (() if runs else (refused,))  # type: ignore[arg-type]
    if not runs:
        with pytest.raises(DeltaRuntimeError, match=r"this session runs Spark \d") as raised:
            backend.require_delta_runtime(session)  # type: ignore[arg-type]
        assert raised.value.error_class == "DELTA_RUNTIME_MISSING"


def test_the_tested_spark_is_one_delta_4_4_declares():
    # The pinned pyspark (constraints.txt) is the one the suite runs; Delta 4.4 must accept it, or the
    # delta-spark backend could not run in the environment the project tests.
    from packaging.requirements import Requirement
    from pyspark import __version__ as pyspark_version

    assert Requirement(DELTA_4_4_REQUIRES[0]).specifier.contains(pyspark_version)


def test_configured_session_without_package_has_no_runtime():
    session = DeltaConfiguredSession(DELTA_CONFS)
    assert backend.missing_delta_runtime(session) == (PIP_HINT,)  # type: ignore[arg-type]


# --- choose_backend against real tables -----------------------------------------------------------------

IDS = pa.table({"id": pa.array([1, 2], pa.int64())})


def write_table(path: Path, feature: str) -> str:
    """A deltalake-written table using ``feature`` (Delta's feature name), or none for ``plain``."""
    configuration = {
        "plain": None,
        "deletionVectors": {"delta.enableDeletionVectors": "true"},
        "columnMapping": {
            "delta.columnMapping.mode": "name",
            "delta.minReaderVersion": "2",
            "delta.minWriterVersion": "5",
        },
        "changeDataFeed": {"delta.enableChangeDataFeed": "true"},
        "disabledChangeDataFeed": {"delta.enableChangeDataFeed": "false"},
    }
    if feature == "rowTracking":  # deltalake does not write it: a crafted log declares it
        return craft_table(path, writer=7, writer_features=["rowTracking", "domainMetadata"])
    if feature == "identityColumns":
        identity = {"delta.identity.start": 1, "delta.identity.step": 1}
        schema = Schema([Field("id", PrimitiveType("long"), nullable=False, metadata=identity)])
        DeltaTable.create(str(path), schema)
        return str(path)
    if feature == "disabledDeletionVectors":  # the property off, the feature still in the protocol
        write_deltalake(str(path), IDS, configuration=configuration["deletionVectors"])
        DeltaTable(str(path)).alter.set_table_properties({"delta.enableDeletionVectors": "false"})
        return str(path)
    write_deltalake(str(path), IDS, configuration=configuration[feature])
    return str(path)


@pytest.mark.parametrize(
    ("feature", "expected"),
    [
        ("plain", ()),
        ("disabledChangeDataFeed", ()),
        ("deletionVectors", ()),  # the engine reads and writes deletion vectors itself
        ("disabledDeletionVectors", ()),
        ("columnMapping", ()),  # the engine maps columns itself
        ("changeDataFeed", ()),  # and writes the change data feed
        ("rowTracking", ("rowTracking",)),
        ("identityColumns", ()),  # the engine generates identity values itself
    ],
)
def test_features_needing_delta_runtime_read_from_the_log(tmp_path, feature, expected):
    assert backend.features_needing_delta_runtime(write_table(tmp_path / feature, feature)) == expected


@pytest.mark.parametrize(
    ("feature", "requested", "expected"),
    [
        ("changeDataFeed", "auto", "engine"),
        ("deletionVectors", "auto", "engine"),
        ("rowTracking", "auto", "delta-spark"),
        ("columnMapping", "auto", "engine"),
        ("plain", "auto", "engine"),
        ("rowTracking", "engine", "engine"),
        ("plain", "delta-spark", "delta-spark"),
    ],
)
def test_choose_backend_with_delta_runtime(tmp_path, mocker, source, feature, requested, expected):
    install_delta_package(mocker)
    spec = MergeSpec(write_table(tmp_path / "t", feature), source, "t.id = s.id", (insert_all(),))
    chosen = backend.choose_backend(DeltaConfiguredSession(DELTA_CONFS), spec, requested)  # type: ignore[arg-type]
    assert chosen == expected


def test_auto_without_runtime_falls_back_to_engine_and_says_why(spark, tmp_path, source, caplog):
    spec = MergeSpec(write_table(tmp_path / "t", "rowTracking"), source, "t.id = s.id", (insert_all(),))
    with caplog.at_level(logging.WARNING, logger=backend.__name__):
        assert backend.choose_backend(spark, spec, "auto") == "engine"
    assert "rowTracking" in caplog.text
    assert backend.DELTA_EXTENSION in caplog.text


def test_requested_delta_spark_without_runtime_raises(spark, tmp_path, source):
    spec = MergeSpec(make_table(tmp_path / "t"), source, "t.id = s.id", (insert_all(),))
    with pytest.raises(DeltaRuntimeError, match="pip install airflow-provider-deltamerge"):
        backend.choose_backend(spark, spec, "delta-spark")


def test_engine_is_chosen_without_reading_the_table(spark, tmp_path, source):
    spec = MergeSpec(str(tmp_path / "no-table-here"), source, "t.id = s.id", (insert_all(),))
    assert backend.choose_backend(spark, spec, "engine") == "engine"
    with pytest.raises(TargetTableError):
        backend.choose_backend(spark, spec, "auto")


def test_unknown_backend_is_refused(spark, tmp_path, source):
    spec = MergeSpec(str(tmp_path / "t"), source, "t.id = s.id", (insert_all(),))
    with pytest.raises(MergeSpecError, match="auto, engine, delta-spark"):
        backend.choose_backend(spark, spec, "delta")


# --- run_with_delta_spark: the builder calls ------------------------------------------------------------

BUILDER_CASES = {
    "upsert with *": (
        {"clauses": (update_all(), insert_all())},
        [call.whenMatchedUpdateAll(condition=None), call.whenNotMatchedInsertAll(condition=None)],
    ),
    "every clause kind with conditions": (
        {
            "clauses": (
                update({"qty": "s.qty", "region": "upper(s.region)"}, condition="s.qty > 0"),
                delete(condition="s.qty = 0"),
                update_all(condition="s.note IS NOT NULL"),
                delete(),
                insert({"id": "s.id", "qty": "s.qty * 2"}, condition="s.region = 'eu'"),
                insert_all(condition="s.region = 'us'"),
                insert({"id": "s.id"}),
                update_by_source({"qty": "0"}, condition="t.region = 'us'"),
                delete_by_source(),
            )
        },
        [
            call.whenMatchedUpdate(condition="s.qty > 0", set={"qty": "s.qty", "region": "upper(s.region)"}),
            call.whenMatchedDelete(condition="s.qty = 0"),
            call.whenMatchedUpdateAll(condition="s.note IS NOT NULL"),
            call.whenMatchedDelete(condition=None),
            call.whenNotMatchedInsert(condition="s.region = 'eu'", values={"id": "s.id", "qty": "s.qty * 2"}),
            call.whenNotMatchedInsertAll(condition="s.region = 'us'"),
            call.whenNotMatchedInsert(condition=None, values={"id": "s.id"}),
            call.whenNotMatchedBySourceUpdate(condition="t.region = 'us'", set={"qty": "0"}),
            call.whenNotMatchedBySourceDelete(condition=None),
        ],
    ),
    "* EXCEPT without evolution: target columns": (
        {"clauses": (update_all(except_columns=["QTY"]), insert_all(except_columns=["region"]))},
        [
            # `created` is not in the source: UPDATE keeps it (Delta reports it, as for *), INSERT drops it
            call.whenMatchedUpdate(
                condition=None, set={"`id`": "s.`id`", "`region`": "s.`region`", "`created`": "s.`created`"}
            ),
            call.whenNotMatchedInsert(condition=None, values={"`id`": "s.`id`", "`qty`": "s.`qty`"}),
        ],
    ),
    "* EXCEPT with evolution: source columns": (
        {
            "clauses": (update_all(except_columns=["qty"], condition="s.qty > 1"), insert_all()),
            "schema_evolution": True,
        },
        [
            call.whenMatchedUpdate(
                condition="s.qty > 1", set={"`id`": "s.`id`", "`region`": "s.`region`", "`note`": "s.`note`"}
            ),
            call.whenNotMatchedInsertAll(condition=None),
            call.withSchemaEvolution(),
        ],
    ),
    "evolution with explicit sets, other aliases": (
        {
            "clauses": (update({"note": "src.note"}),),
            "schema_evolution": True,
            "target_alias": "tgt",
            "source_alias": "src",
        },
        [call.whenMatchedUpdate(condition=None, set={"note": "src.note"}), call.withSchemaEvolution()],
    ),
}


@pytest.mark.parametrize(("spec_args", "expected_calls"), BUILDER_CASES.values(), ids=BUILDER_CASES.keys())
def test_builder_calls_follow_the_clauses(delta, spark, tmp_path, source, spec_args, expected_calls):
    # Given: a spec
    spec = spec_of(source, tmp_path, **spec_args)
    # When: the backend runs it
    backend.run_with_delta_spark(spark, spec)
    # Then: forPath(target).alias(t).merge(source as s, condition), the clause calls in order, execute()
    delta.DeltaTable.forPath.assert_called_once_with(spark, spec.target)
    delta.table.alias.assert_called_once_with(spec.target_alias)
    merged_source, condition = delta.table.alias.return_value.merge.call_args.args
    assert condition == spec.condition
    assert merged_source.select(f"{spec.source_alias}.id").count() == 2  # the aliased source rows
    assert delta.builder.mock_calls == [*expected_calls, call.execute()]


# --- run_with_delta_spark: run identity and metrics -----------------------------------------------------


@pytest.mark.parametrize("previous", [None, '{"owner": "the user"}'], ids=["unset", "user value"])
def test_run_identity_is_in_user_metadata_only_during_execute(delta, spark, tmp_path, source, previous):
    # Given: the session's userMetadata conf unset, or set by the user
    if previous is not None:
        spark.conf.set(USER_METADATA, previous)
    spec = spec_of(source, tmp_path, (update_all(), insert_all()))
    provenance = {"submissionId": "sub-1", "dag_id": "orders", "run_id": "manual__1", "map_index": -1}
    try:
        # When
        backend.run_with_delta_spark(spark, spec, provenance=provenance)
        # Then: execute() saw our identity; afterwards the user's value (or no value) is back
        (seen,) = delta.user_metadata_seen
        assert json.loads(seen) == {
            "submissionId": "sub-1",
            "specHash": spec.spec_hash,
            "engineVersion": __version__,
            "executor": "delta-spark",
            "dag_id": "orders",
            "run_id": "manual__1",
            "map_index": -1,
        }
        assert spark.conf.get(USER_METADATA, None) == previous
    finally:
        spark.conf.unset(USER_METADATA)


def test_metrics_come_from_our_merge_commit(delta, spark, tmp_path, source):
    # Given: a target of 3 files in partitions us (2) and eu (1), their bytes as the file system counts them
    before_bytes = data_file_bytes(tmp_path / "target")
    # When: Delta's merge rewrites 1 file of us and adds 1 file in eu
    result = backend.run_with_delta_spark(
        spark, spec_of(source, tmp_path, (update_all(), insert_all())), provenance={"submissionId": "sub-2"}
    )
    # Then: Delta's operationMetrics as numbers ...
    assert (result.version, result.executor, result.committed) == (2, "delta-spark", True)
    recorded = {k: int(v) for k, v in DELTA_OPERATION_METRICS.items()}
    assert {k: result.metrics[k] for k in recorded} == recorded
    assert result.metrics[m.MATERIALIZE_SOURCE_TIME_MS] == 3  # Delta reports it; we pass it on
    added = {
        m.NUM_TARGET_FILES_ADDED: 2,
        m.NUM_TARGET_FILES_REMOVED: 1,
        m.NUM_TARGET_BYTES_ADDED: delta.added_bytes,
    }
    assert {k: result.metrics[k] for k in added} == added
    # ... what the log gives: the snapshot Delta read, and the partitions of the files removed and added ...
    assert result.metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 3
    assert result.metrics[m.NUM_TARGET_BYTES_BEFORE_SKIPPING] == before_bytes
    assert result.metrics[m.NUM_TARGET_PARTITIONS_REMOVED_FROM] == 1
    assert result.metrics[m.NUM_TARGET_PARTITIONS_ADDED_TO] == 2
    assert result.metrics[m.NUM_TARGET_CHANGE_FILE_BYTES] == 0  # the commit has no cdc action
    # ... and None, not 0, for what only Delta's SQL metrics hold; every declared key is there
    assert set(result.metrics) == set(m.METRIC_DESCRIPTIONS)
    assert {k for k, v in result.metrics.items() if v is None} == SQL_METRICS_ONLY


def test_files_before_skipping_are_the_snapshot_delta_read(delta, spark, tmp_path, source):
    # Given: another writer appends a file between Delta's read (version 1) and Delta's commit
    before_bytes = data_file_bytes(tmp_path / "target")
    delta.other_writers_during = 1
    # When
    result = backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (insert_all(),)))
    # Then: the commit's readVersion (1) is counted, not the version before the commit (2)
    assert result.version == 3
    assert result.metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 3
    assert result.metrics[m.NUM_TARGET_BYTES_BEFORE_SKIPPING] == before_bytes


def test_a_file_kept_under_a_new_deletion_vector_is_not_a_partition_change(delta, spark, tmp_path, source):
    # Given: Delta's DV merge removes the us file and adds it back under its vector, and adds a file in eu
    delta.deletion_vectors = True
    # When
    result = backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (update_all(), insert_all())))
    # Then: as Delta counts: no partition lost a file, one (eu) gained one
    assert result.metrics[m.NUM_TARGET_PARTITIONS_REMOVED_FROM] == 0
    assert result.metrics[m.NUM_TARGET_PARTITIONS_ADDED_TO] == 1


def test_an_unpartitioned_table_has_no_partitions_as_delta_counts(spark, mocker, tmp_path, source):
    # Given: the same merge into an unpartitioned table of 2 files
    target = tmp_path / "target"
    use_runtime(mocker, FakeDeltaRuntime(spark, Path(three_file_target(target, partitioned=False))))
    before_bytes = data_file_bytes(target)
    # When
    result = backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (update_all(), insert_all())))
    # Then: 0 partitions, Delta's definition for an unpartitioned table; files and bytes still counted
    assert result.metrics[m.NUM_TARGET_PARTITIONS_REMOVED_FROM] == 0
    assert result.metrics[m.NUM_TARGET_PARTITIONS_ADDED_TO] == 0
    assert result.metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 2
    assert result.metrics[m.NUM_TARGET_BYTES_BEFORE_SKIPPING] == before_bytes


def test_our_commit_is_found_behind_a_concurrent_one(delta, spark, tmp_path, source):
    delta.other_writers_after = 2  # versions 3 and 4 are someone else's
    result = backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (insert_all(),)))
    assert (result.version, result.committed) == (2, True)
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    assert result.metrics[m.NUM_TARGET_PARTITIONS_ADDED_TO] == 2  # our commit's files, not theirs


# What only Delta's SQL metrics hold when no commit records them: its phase timings too.
NOT_MEASURED_WITHOUT_COMMIT = {
    *SQL_METRICS_ONLY,
    m.SCAN_TIME_MS,
    m.REWRITE_TIME_MS,
    m.MATERIALIZE_SOURCE_TIME_MS,
}


def test_no_commit_when_delta_changed_nothing(delta, spark, tmp_path, source):
    # Given: a target of 3 files at version 1, and a merge Delta commits nothing for
    before_bytes = data_file_bytes(tmp_path / "target")
    delta.commit_metrics = None
    # When
    result = backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (insert_all(),)))
    # Then: no commit, the table's version reported, every declared metric there
    assert (result.version, result.committed) == (1, False)
    assert set(result.metrics) == set(m.METRIC_DESCRIPTIONS)
    # The source is counted and the time measured, not made-up zeros
    assert result.metrics[m.NUM_SOURCE_ROWS] == SOURCE.num_rows
    assert result.metrics[m.EXECUTION_TIME_MS] > 0
    # Nothing landed since version 1, so Delta read that snapshot: its files and bytes
    assert result.metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 3
    assert result.metrics[m.NUM_TARGET_BYTES_BEFORE_SKIPPING] == before_bytes
    # Delta's SQL metrics, its timings among them, are out of reach: not measured, not 0
    assert {k for k, v in result.metrics.items() if v is None} == NOT_MEASURED_WITHOUT_COMMIT
    # The rest is 0 as Delta would count it: no row changed, no file removed or added
    measured = {
        m.NUM_SOURCE_ROWS,
        m.EXECUTION_TIME_MS,
        m.NUM_TARGET_FILES_BEFORE_SKIPPING,
        m.NUM_TARGET_BYTES_BEFORE_SKIPPING,
        *NOT_MEASURED_WITHOUT_COMMIT,
    }
    assert {v for k, v in result.metrics.items() if k not in measured} == {0}


def test_a_newer_commit_that_is_not_ours_is_not_reported_as_ours(delta, spark, tmp_path, source):
    # Given: Delta commits nothing for the merge, and another writer commits right after it
    delta.commit_metrics = None
    delta.other_writers_after = 1
    # When
    result = backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (insert_all(),)))
    # Then: not ours: no commit, no rows
    assert (result.version, result.committed) == (1, False)
    assert result.metrics[m.NUM_OUTPUT_ROWS] == 0
    # Which snapshot Delta read is no longer known: the files and bytes before skipping are not measured
    not_measured = {m.NUM_TARGET_FILES_BEFORE_SKIPPING, m.NUM_TARGET_BYTES_BEFORE_SKIPPING}
    assert {k for k, v in result.metrics.items() if v is None} == NOT_MEASURED_WITHOUT_COMMIT | not_measured


UNRESOLVED = "Cannot resolve s.nope in search condition given columns t.id, t.qty, s.id, s.qty."
OVERFLOW = 'Failed to write a value of "BIGINT" type into the "INT" type column `qty` due to an overflow.'
# Delta's DELTA_CAST_OVERFLOW_IN_TABLE_WRITE message: three lines, the first one the sentence to keep.
OVERFLOW_LINES = (
    f"{OVERFLOW}\nUse `try_cast` on the input value to tolerate overflow and return NULL instead.\n"
    'If necessary, set spark.sql.storeAssignmentPolicy to "LEGACY" to bypass this error.'
)
TASK_PATH = "file:/tmp/target"
CONFLICT = (
    "Transaction conflict detected. a concurrent WRITE added data to table delta.`/tmp/target` committed at "
    "version 2. The concurrent operation modified data in the partition [region=eu] that should have been "
    "read by this operation. Please retry the operation. Refer to "
    "https://docs.delta.io/latest/concurrency-control.html for more information."
)

ERROR_CASES = {
    "analysis": (
        lambda spark: delta_error(AnalysisException, "DELTA_MERGE_UNRESOLVED_EXPRESSION", UNRESOLVED),
        ClauseResolutionError,
        "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        f"{UNRESOLVED} (Delta's analysis of the merge) Fix the clause or column it names.",
    ),
    # Not converted to AnalysisException: the class still says it is Delta's analysis.
    "analysis-unconverted": (
        lambda spark: delta_error(PySparkException, "DELTA_MERGE_UNRESOLVED_EXPRESSION", UNRESOLVED),
        ClauseResolutionError,
        "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        f"{UNRESOLVED} (Delta's analysis of the merge) Fix the clause or column it names.",
    ),
    "cast-overflow": (
        lambda spark: delta_error(PySparkException, "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE", OVERFLOW),
        MergeExecutionError,
        "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE",
        f"{OVERFLOW} (Delta's merge) Nothing was committed.",
    ),
    # The job aborted: a Py4JJavaError whose first line is the task's stack; Delta's class two causes down.
    "cast-overflow-in-an-aborted-job": (
        lambda spark: failed_write_job(spark, "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE", OVERFLOW_LINES),
        MergeExecutionError,
        "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE",
        f"Task failed while writing rows to {TASK_PATH}. Caused by [DELTA_CAST_OVERFLOW_IN_TABLE_WRITE] "
        f"{OVERFLOW} (Delta's merge) Nothing was committed.",
    ),
    # PySpark converts a Java ArithmeticException thrown alone, keeping it as the origin.
    "cast-overflow-converted": (
        lambda spark: thrown_by_jvm(
            spark,
            spark._jvm.java.lang.ArithmeticException(
                f"[DELTA_CAST_OVERFLOW_IN_TABLE_WRITE] {OVERFLOW_LINES}"
            ),
        ),
        MergeExecutionError,
        "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE",
        f"{OVERFLOW} (Delta's merge) Nothing was committed.",
    ),
    "conflict": (
        lambda spark: delta_conflict(spark, f"[DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT] {CONFLICT}"),
        MergeCommitError,
        "DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT",
        f"A concurrent commit conflicted with the merge; nothing was committed: {CONFLICT}",
    ),
    "execution": (
        lambda spark: PySparkException(message="task failed"),
        MergeExecutionError,
        None,
        "task failed (Delta's merge) Nothing was committed.",
    ),
}


@pytest.mark.parametrize(
    ("make_error", "expected", "error_class", "text"), ERROR_CASES.values(), ids=ERROR_CASES.keys()
)
def test_delta_errors_become_the_merges_own_in_delta_s_words(
    delta, spark, tmp_path, source, make_error, expected, error_class, text
):
    # Given: Delta's merge fails with the error as PySpark hands it over
    error = make_error(spark)
    delta.execute_error = error
    # When
    with pytest.raises(expected) as raised:
        backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (insert_all(),)))
    # Then: Delta's class, and Delta's sentence with our hint, not PySpark's INTERNAL_ERROR or a stack's line
    assert raised.value.error_class == error_class
    assert raised.value.message == text
    assert "INTERNAL_ERROR" not in raised.value.message and "\tat org.apache" not in raised.value.message
    assert "Job aborted" not in raised.value.message
    assert raised.value.__cause__ is error
    assert spark.conf.get(USER_METADATA, None) is None  # restored on failure too


def test_the_conflict_fake_carries_only_what_delta_s_python_exception_does(spark):
    # delta-spark's conversion gives PySpark no origin: PySpark 4 then has no message and no condition
    conflict = delta_conflict(spark, f"[DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT] {CONFLICT}")
    assert (conflict.getMessage(), conflict.getCondition()) == ("", None)
    assert str(conflict).startswith(f"[DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT] {CONFLICT}")
    assert "java.util.ConcurrentModificationException" in conflict._stackTrace


def test_an_aborted_job_arrives_as_a_py4j_error_with_delta_s_class_two_causes_down(spark):
    error = failed_write_job(spark, "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE", OVERFLOW_LINES)
    assert isinstance(error, Py4JJavaError)  # PySpark does not convert a SparkException
    first = error.java_exception.getMessage()
    assert first.startswith("Job aborted") and "\tat org.apache" in first
    delta_cause = error.java_exception.getCause().getCause()
    assert delta_cause.getMessage().startswith("[DELTA_CAST_OVERFLOW_IN_TABLE_WRITE]")


RUN = {"dagId": "orders", "taskId": "merge", "runId": "manual__1", "mapIndex": -1}


def test_a_retried_run_returns_its_commit_instead_of_merging_again(delta, spark, tmp_path, source):
    spec = spec_of(source, tmp_path, (update_all(), insert_all()))
    before_bytes = data_file_bytes(tmp_path / "target")
    first = backend.run_with_delta_spark(spark, spec, provenance={**RUN, "tryNumber": 1})
    again = backend.run_with_delta_spark(spark, spec, provenance={**RUN, "tryNumber": 2})
    assert (again.version, again.committed, again.already_committed) == (first.version, True, True)
    assert delta.builder.execute.call_count == 1
    # One shape, whichever try: the log-derived metrics too, and the same None metrics
    assert dict(again.metrics) == dict(first.metrics)
    derived = {
        m.NUM_TARGET_FILES_BEFORE_SKIPPING: 3,
        m.NUM_TARGET_BYTES_BEFORE_SKIPPING: before_bytes,
        m.NUM_TARGET_PARTITIONS_REMOVED_FROM: 1,
        m.NUM_TARGET_PARTITIONS_ADDED_TO: 2,
    }
    assert {k: again.metrics[k] for k in derived} == derived
    assert {k for k, v in again.metrics.items() if v is None} == SQL_METRICS_ONLY


def test_a_retry_into_a_catalog_table_returns_its_commit(delta, spark, tmp_path, source):
    # Given: the target registered in the session's catalog as a Delta table, and named by it
    database = f"shop_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {database}")
    try:
        register_delta_table(spark, f"{database}.orders", str(tmp_path / "target"))
        spec = dataclasses.replace(
            spec_of(source, tmp_path, (update_all(), insert_all())), target=f"{database}.orders"
        )
        # When: the job runs twice with the same run identity
        first = backend.run_with_delta_spark(spark, spec, provenance={**RUN, "tryNumber": 1})
        again = backend.run_with_delta_spark(spark, spec, provenance={**RUN, "tryNumber": 2})
    finally:
        spark.sql(f"DROP DATABASE {database} CASCADE")
    # Then: Delta's runtime opened the table at its catalog location; the retry found the first commit there
    delta.DeltaTable.forPath.assert_called_with(spark, str(tmp_path / "target"))
    assert (first.version, again.version, again.already_committed) == (2, 2, True)
    assert delta.builder.execute.call_count == 1
    assert DeltaTable(str(tmp_path / "target")).version() == 2


def test_rerun_merge_or_another_spec_merges_again(delta, spark, tmp_path, source):
    spec = spec_of(source, tmp_path, (update_all(), insert_all()))
    backend.run_with_delta_spark(spark, spec, provenance=RUN)
    forced = backend.run_with_delta_spark(spark, spec, provenance=RUN, rerun="merge")
    other = backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (insert_all(),)), provenance=RUN)
    assert (forced.already_committed, other.already_committed) == (False, False)
    assert delta.builder.execute.call_count == 3


def test_run_without_runtime_raises_before_touching_anything(spark, tmp_path, source):
    with pytest.raises(DeltaRuntimeError):
        backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (insert_all(),)))


def test_the_xcom_value_is_the_same_for_a_fresh_merge_and_a_commit_found_from_airflow(
    delta, spark, tmp_path, source
):
    # Given: the job's answer for a fresh delta-spark merge (what the operator pushes to XCom)
    spec = spec_of(source, tmp_path, (update_all(), insert_all()))
    before_bytes = data_file_bytes(tmp_path / "target")
    fresh = backend.run_with_delta_spark(spark, spec, provenance=RUN)
    from_job = m.merge_result(
        fresh.metrics,
        version=fresh.version,
        executor=fresh.executor,
        spec_hash=spec.spec_hash,
        runs=fresh.runs,
    )
    # When: a retry's Airflow side finds that commit in the log instead (no Spark, no Delta runtime)
    found = find_committed_run(spec.target, {**RUN, "specHash": spec.spec_hash})
    assert found is not None
    from_log = commit_result(found)
    # Then: the same value, key for key, log-derived metrics and None metrics included
    assert from_log == from_job
    assert from_log[m.NUM_TARGET_PARTITIONS_ADDED_TO] == 2
    assert from_log[m.NUM_TARGET_BYTES_BEFORE_SKIPPING] == before_bytes
    assert {k for k, v in from_log.items() if v is None} == SQL_METRICS_ONLY
    assert json.loads(json.dumps(from_log))[m.NUM_TARGET_FILES_AFTER_SKIPPING] is None  # JSON null in XCom
