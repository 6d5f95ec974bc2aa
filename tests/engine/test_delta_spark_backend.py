"""The delta-spark backend on Delta Lake's own runtime: runtime checks, backend choice, the spec's
translation to Delta's builder (checked against Delta's own ``MERGE INTO``), metrics, run identity, retries
and errors, on Delta tables on disk in the tests' session, which has Delta's jars, extension and catalog.

Stand-ins are left only where no runtime can show the case: a session *without* Delta, or on another Spark
version, next to this one (one process holds one SparkContext); and the writers and errors that must land at
a chosen moment of Delta's merge, which a spy around Delta's real ``DeltaMergeBuilder.execute`` adds
(another writer's commit right after Delta's, a conflict or an aborted job as PySpark hands them over).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import logging
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.schema import Field, PrimitiveType, Schema
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.idempotency import find_committed_run
from airflow_provider_deltamerge.engine.backends import delta_spark as backend
from airflow_provider_deltamerge.engine.session_confs import AUTO_MERGE
from airflow_provider_deltamerge.engine.spark_errors import summarize
from airflow_provider_deltamerge.exceptions import (
    ClauseResolutionError,
    DeltaRuntimeError,
    MergeCommitError,
    MergeExecutionError,
    MergeSpecError,
    TargetTableError,
)
from airflow_provider_deltamerge.hooks.delta_merge import commit_result
from airflow_provider_deltamerge.session_kind import session_confs_set
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    delete,
    delete_by_source,
    insert,
    insert_all,
    to_merge_sql,
    update,
    update_all,
    update_by_source,
)
from airflow_provider_deltamerge.spec.json_form import spec_hash
from tests.conftest import make_table
from tests.delta.helpers import craft_table
from tests.engine.test_catalog_target import register_delta_table
from tests.oracle import sorted_rows

USER_METADATA = backend.USER_METADATA_CONF
PIP_HINT = "the Python package delta-spark: pip install airflow-provider-deltamerge[delta-spark]"
SOURCE = pa.table(
    {
        "id": pa.array([3, 20], pa.int64()),
        "qty": pa.array([1, 2], pa.int32()),
        "region": pa.array(["us", "eu"]),
        "note": pa.array(["changed", "new"]),  # not a target column
        "created": pa.array(["2026-02-01", "2026-02-02"]),
    }
)
TARGET_COLUMNS = ("id", "qty", "region", "created")  # `created` is not a source column

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


class DeltaExecuteSpy:
    """Delta's real ``DeltaMergeBuilder.execute``, watched: how often it ran, the session's userMetadata
    while it ran; and, when a test asks, another writer's commits right after Delta's, or an error instead
    of the merge (as PySpark hands Delta's errors over)."""

    def __init__(self, spark: Any, table: Path) -> None:
        self.spark, self.path = spark, table
        self.partitioned = bool(DeltaTable(str(table)).metadata().partition_columns)
        self.other_writers_after = 0  # blind appends by other writers that land right after Delta's commit
        self.execute_error: Exception | None = None
        self.user_metadata_seen: list[str | None] = []

    @property
    def executions(self) -> int:
        return len(self.user_metadata_seen)

    def wrap(self, execute: Any) -> Any:
        def watched(builder: Any) -> Any:
            self.user_metadata_seen.append(self.spark.conf.get(USER_METADATA, None))
            if self.execute_error is not None:
                raise self.execute_error
            result = execute(builder)
            for _ in range(self.other_writers_after):
                rows = target_rows([30], "eu")
                write_deltalake(
                    str(self.path),
                    rows,
                    mode="append",
                    partition_by=["region"] if self.partitioned else None,
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": "someone else"}),
                )
            return result

        return watched


def delta_log_actions(table: Path, version: int) -> list[dict[str, Any]]:
    """The actions of one commit of ``table``, as written in its log file."""
    text = (table / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def partitions_touched(table: Path, version: int, kind: str) -> int:
    """The partitions ``version`` removes files from (``remove``) or adds files to (``add``), as Delta counts
    them: a file removed and added back under a new deletion vector changes no partition."""
    actions = delta_log_actions(table, version)
    removed = {a["remove"]["path"] for a in actions if "remove" in a}
    added = {a["add"]["path"] for a in actions if "add" in a}
    paths = (removed - added) if kind == "remove" else (added - removed)
    values = {
        json.dumps(a[key]["partitionValues"], sort_keys=True)
        for a in actions
        for key in ("add", "remove")
        if key in a and a[key]["path"] in paths and a[key]["partitionValues"]
    }
    return len(values)


def delta_conflict(spark: Any, message: str) -> PySparkException:
    """A conflict as delta-spark converts Delta's JVM exception (``_convert_delta_exception``): its own
    ``ConcurrentAppendException`` built from the text after the Java class name, the stack as Spark renders
    it, the cause. The Java exception is a real one, of the JDK class Delta's
    ``io.delta.exceptions.ConcurrentAppendException`` extends."""
    from delta.exceptions.captured import ConcurrentAppendException

    java = spark._jvm.java.util.ConcurrentModificationException(message)
    stack = getattr(spark._jvm, "org.apache.spark.util.Utils").exceptionString(java)
    return ConcurrentAppendException(java.toString().split(": ", 1)[1], stack, java.getCause())


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


def without_delta_package(mocker: Any) -> None:
    """A machine without the delta-spark package: ``import delta.tables`` fails as it would there."""
    mocker.patch.dict(sys.modules, {"delta": None, "delta.tables": None, "delta.exceptions": None})


@pytest.fixture
def delta(spark, mocker, tmp_path):
    """Delta's runtime over the target of ``spec_of`` (three files in two partitions, at version 1), with its
    merges' ``execute`` watched."""
    from delta.tables import DeltaMergeBuilder

    spy = DeltaExecuteSpy(spark, Path(three_file_target(tmp_path / "target")))
    mocker.patch.object(DeltaMergeBuilder, "execute", spy.wrap(DeltaMergeBuilder.execute))
    return spy


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
    """A session beside the tests' own, which no process can hold next to it (one SparkContext per process):
    these confs and this Spark version, and a JVM without Delta's classes, or none (as Spark Connect)."""

    def __init__(self, confs: dict[str, str], version: str = "4.2.0", *, jvm: bool = False) -> None:
        self.conf = SimpleNamespace(get=lambda key, default=None: confs.get(key, default))
        self.version = version
        if jvm:
            self._jvm = NoClasses()


class NoClasses:
    """A driver JVM none of whose names is a loadable class, as py4j answers for one without Delta's jars (a
    ``JavaPackage`` for every name)."""

    def __getattr__(self, name: str) -> NoClasses:
        return self


DELTA_CONFS = {
    backend.EXTENSIONS_CONF: f"com.example.OtherExtension, {backend.DELTA_EXTENSION}",
    backend.CATALOG_CONF: backend.DELTA_CATALOG,
}


# --- runtime checks -------------------------------------------------------------------------------------


def test_the_tests_session_has_delta_s_runtime(spark):
    # The session of these tests has Delta's package, jars, extension and catalog, on a Spark Delta supports
    assert backend.missing_delta_runtime(spark) == ()
    assert backend.has_delta_runtime(spark) is True
    backend.require_delta_runtime(spark)


def test_a_session_without_delta_names_every_missing_piece(mocker):
    # Given: a session with no delta-spark package, no Delta jars on its JVM, no Delta confs
    without_delta_package(mocker)
    session: Any = DeltaConfiguredSession({}, jvm=True)
    # When/Then: there is no Delta runtime, and the error says how to add each piece
    assert backend.has_delta_runtime(session) is False
    with pytest.raises(DeltaRuntimeError) as raised:
        backend.require_delta_runtime(session)
    message = str(raised.value)
    assert f"1. {PIP_HINT}" in message
    assert "2. Delta's jars (io.delta.tables.DeltaTable" in message
    release = importlib.metadata.version("delta-spark")  # its metadata is there; the import is what fails
    assert f"--packages io.delta:delta-spark_{session.version[:3]}_2.13:{release}" in message
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
    assert backend.delta_artifact(spark_version) == artifact


def test_the_jars_the_tests_load_are_the_artifact_the_hint_names(spark):
    # The hint's artifact, for this Spark and the installed delta-spark, is the one the tests' session loaded
    artifact = backend.delta_artifact(spark.version)
    loaded = spark.conf.get("spark.jars")
    assert f"io.delta_{artifact}-{importlib.metadata.version('delta-spark')}.jar" in loaded


def test_jvm_check_tells_a_loadable_class_from_a_missing_one(spark):
    assert backend._jvm_has_class(spark, backend.DELTA_TABLE_CLASS) is True
    assert backend._jvm_has_class(spark, "io.delta.tables.NoSuchTable") is False


def test_the_python_package_alone_is_not_a_runtime(mocker):
    # Given: delta.tables importable, but a session without Delta's jars or confs
    missing = backend.missing_delta_runtime(DeltaConfiguredSession({}, jvm=True))  # type: ignore[arg-type]
    # Then: no pip hint; jars and both confs missing
    assert [item.split(" (")[0].split("=")[0] for item in missing] == [
        "Delta's jars",
        "the Spark conf spark.sql.extensions",
        "the Spark conf spark.sql.catalog.spark_catalog",
    ]


def test_a_catalog_conf_alone_is_not_a_runtime():
    session = DeltaConfiguredSession({backend.CATALOG_CONF: backend.DELTA_CATALOG})
    missing = backend.missing_delta_runtime(session)  # type: ignore[arg-type]
    assert not any(backend.CATALOG_CONF in item for item in missing)
    assert any(backend.EXTENSIONS_CONF in item for item in missing)


def test_a_configured_connect_session_with_package_has_runtime():
    assert backend.has_delta_runtime(DeltaConfiguredSession(DELTA_CONFS)) is True  # type: ignore[arg-type]
    backend.require_delta_runtime(DeltaConfiguredSession(DELTA_CONFS))  # type: ignore[arg-type]


# What the delta-spark 4.4.0 and 4.4.1 wheels declare (METADATA, Requires-Dist), verbatim.
DELTA_4_4_REQUIRES = ["pyspark<=4.2.0,>=4.0.1", "importlib_metadata<=8.7.1,>=1.0.0"]


def test_the_installed_delta_spark_declares_what_the_range_check_is_tested_with():
    assert importlib.metadata.requires("delta-spark") == DELTA_4_4_REQUIRES


@pytest.mark.parametrize(
    ("spark_version", "runs"),
    [("4.0.1", True), ("4.2.0", True), ("4.0.0", False), ("4.2.1", False), ("4.3.0", False)],
)
def test_a_spark_version_delta_was_not_built_for_is_refused_before_the_jvm_crashes(spark_version, runs):
    # Given: the installed delta-spark 4.4, with the pyspark range its wheel declares
    version = importlib.metadata.version("delta-spark")
    session = DeltaConfiguredSession(DELTA_CONFS, spark_version)
    # When/Then: a Spark outside that range, patch releases after its top included, is refused by name
    refused = (
        f"a Spark version delta-spark {version} supports (<=4.2.0,>=4.0.1); this session runs Spark "
        f"{spark_version}: install the delta-spark release built for it, or that Spark"
    )
    assert backend.missing_delta_runtime(session) == (() if runs else (refused,))  # type: ignore[arg-type]
    if not runs:
        with pytest.raises(DeltaRuntimeError, match=r"this session runs Spark \d") as raised:
            backend.require_delta_runtime(session)  # type: ignore[arg-type]
        assert raised.value.error_class == "DELTA_RUNTIME_MISSING"


def test_the_tested_spark_is_one_delta_4_4_declares(spark):
    # The pinned pyspark (constraints.txt) is the one the suite runs; Delta 4.4 must accept it, or the
    # delta-spark backend could not run in the environment the project tests.
    from packaging.requirements import Requirement

    assert Requirement(DELTA_4_4_REQUIRES[0]).specifier.contains(spark.version)


def test_a_configured_session_without_package_has_no_runtime(mocker):
    without_delta_package(mocker)
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
    if feature in ("icebergCompatV2", "collations"):  # crafted too (UniForm, Kernel-only collations)
        return craft_table(
            path,
            reader=3,
            writer=7,
            reader_features=["columnMapping"],
            writer_features=[feature, "columnMapping", "domainMetadata"],
        )
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
        ("icebergCompatV2", ("icebergCompatV2",)),  # UniForm: Delta converts its commits to Iceberg
        ("collations", ()),  # Delta 4.4's runtime cannot write it either: the engine refuses it
    ],
)
def test_features_needing_delta_runtime_read_from_the_log(tmp_path, feature, expected):
    assert backend.needing_delta_runtime(write_table(tmp_path / feature, feature)) == expected


@pytest.mark.parametrize(
    ("feature", "requested", "expected"),
    [
        ("changeDataFeed", "auto", "engine"),
        ("deletionVectors", "auto", "engine"),
        ("rowTracking", "auto", "delta-spark"),
        ("icebergCompatV2", "auto", "delta-spark"),
        ("collations", "auto", "engine"),
        ("columnMapping", "auto", "engine"),
        ("plain", "auto", "engine"),
        ("rowTracking", "engine", "engine"),
        ("plain", "delta-spark", "delta-spark"),
    ],
)
def test_choose_backend_with_delta_runtime(spark, tmp_path, source, feature, requested, expected):
    spec = MergeSpec(write_table(tmp_path / "t", feature), source, "t.id = s.id", (insert_all(),))
    assert backend.choose_backend(spark, spec, requested) == expected


def test_auto_without_runtime_falls_back_to_engine_and_says_why(tmp_path, source, caplog):
    spec = MergeSpec(write_table(tmp_path / "t", "rowTracking"), source, "t.id = s.id", (insert_all(),))
    session: Any = DeltaConfiguredSession({}, jvm=True)
    with caplog.at_level(logging.WARNING, logger=backend.__name__):
        assert backend.choose_backend(session, spec, "auto") == "engine"
    assert "rowTracking" in caplog.text
    assert backend.DELTA_EXTENSION in caplog.text


def test_requested_delta_spark_without_runtime_raises(mocker, tmp_path, source):
    without_delta_package(mocker)
    spec = MergeSpec(make_table(tmp_path / "t"), source, "t.id = s.id", (insert_all(),))
    with pytest.raises(DeltaRuntimeError, match="pip install airflow-provider-deltamerge"):
        backend.choose_backend(DeltaConfiguredSession({}, jvm=True), spec, "delta-spark")  # type: ignore[arg-type]


def test_engine_is_chosen_without_reading_the_table(spark, tmp_path, source):
    spec = MergeSpec(str(tmp_path / "no-table-here"), source, "t.id = s.id", (insert_all(),))
    assert backend.choose_backend(spark, spec, "engine") == "engine"
    with pytest.raises(TargetTableError):
        backend.choose_backend(spark, spec, "auto")


def test_unknown_backend_is_refused(spark, tmp_path, source):
    spec = MergeSpec(str(tmp_path / "t"), source, "t.id = s.id", (insert_all(),))
    with pytest.raises(MergeSpecError, match="auto, engine, delta-spark"):
        backend.choose_backend(spark, spec, "delta")


# --- run_with_delta_spark: the builder calls, against Delta's own MERGE INTO ------------------------------

BUILDER_CASES = {
    "upsert with *": {"clauses": (update_all(), insert_all())},
    "every clause kind with conditions": {
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
    "* EXCEPT without evolution: target columns": {
        "clauses": (update_all(except_columns=["QTY"]), insert_all(except_columns=["region"]))
    },
    "* EXCEPT with evolution: source columns": {
        "clauses": (update_all(except_columns=["qty"], condition="s.qty > 1"), insert_all()),
        "schema_evolution": True,
    },
    "evolution with explicit sets, other aliases": {
        "clauses": (update({"note": "src.note"}),),
        "schema_evolution": True,
        "target_alias": "tgt",
        "source_alias": "src",
    },
}
# MERGE INTO has no * EXCEPT (Spark's parser refuses it): Delta's statement lists the columns * EXCEPT means,
# the target's without evolution and the source's with it.
DELTA_S_STATEMENT = {
    "* EXCEPT without evolution: target columns": (
        update({"id": "s.id", "region": "s.region", "created": "s.created"}),
        insert({"id": "s.id", "qty": "s.qty", "created": "s.created"}),
    ),
    "* EXCEPT with evolution: source columns": (
        update(
            {"id": "s.id", "region": "s.region", "note": "s.note", "created": "s.created"},
            condition="s.qty > 1",
        ),
        insert_all(),
    ),
}


def merge_outcome(run: Any) -> tuple[str, Any]:
    """("rows", the target's rows and columns) after ``run``, or ("error", Delta's error class)."""
    try:
        run()
    except ClauseResolutionError as err:
        return "error", err.error_class
    except (PySparkException, Py4JJavaError) as err:
        return "error", backend._error_class(err, summarize(err))
    return "rows", None


@pytest.mark.parametrize("name", BUILDER_CASES)
def test_the_builder_merges_as_delta_s_own_merge_into(delta, spark, tmp_path, source, name):
    # Given: a spec, and a copy of its target for Delta's own MERGE INTO of the same spec
    spec = spec_of(source, tmp_path, **BUILDER_CASES[name])
    copy = dataclasses.replace(
        spec,
        target=three_file_target(tmp_path / "copy"),
        clauses=DELTA_S_STATEMENT.get(name, spec.clauses),
    )
    evolution = {AUTO_MERGE: "true"} if spec.schema_evolution else {}
    # When: the backend runs it through Delta's builder, and Delta runs the statement
    ours = merge_outcome(lambda: backend.run_with_delta_spark(spark, spec))
    with session_confs_set(spark, evolution):
        delta_s = merge_outcome(lambda: spark.sql(to_merge_sql(copy)).collect())
    # Then: the same outcome, and the same rows and columns
    assert ours == delta_s
    assert (
        spark.read.format("delta").load(spec.target).columns
        == spark.read.format("delta").load(copy.target).columns
    )
    assert sorted_rows(spec.target) == sorted_rows(copy.target)


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
            "specHash": spec_hash(spec),
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
    target = tmp_path / "target"
    before_bytes = data_file_bytes(target)
    # When: Delta's merge moves id 3 from eu to us and inserts id 20 into eu
    result = backend.run_with_delta_spark(
        spark, spec_of(source, tmp_path, (update_all(), insert_all())), provenance={"submissionId": "sub-2"}
    )
    # Then: Delta's operationMetrics of its commit, as numbers ...
    assert (result.version, result.executor, result.committed) == (2, "delta-spark", True)
    (info,) = (a["commitInfo"] for a in delta_log_actions(target, 2) if "commitInfo" in a)
    recorded = {k: int(v) for k, v in info["operationMetrics"].items() if k in m.METRIC_DESCRIPTIONS}
    assert {k: result.metrics[k] for k in recorded} == recorded
    assert recorded[m.NUM_TARGET_ROWS_INSERTED] == recorded[m.NUM_TARGET_ROWS_UPDATED] == 1
    # ... what the log gives: the snapshot Delta read (its readVersion), and the partitions changed ...
    assert info["readVersion"] == 1
    assert result.metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 3
    assert result.metrics[m.NUM_TARGET_BYTES_BEFORE_SKIPPING] == before_bytes
    assert (
        result.metrics[m.NUM_TARGET_PARTITIONS_REMOVED_FROM] == partitions_touched(target, 2, "remove") == 1
    )
    assert result.metrics[m.NUM_TARGET_PARTITIONS_ADDED_TO] == partitions_touched(target, 2, "add") == 2
    assert result.metrics[m.NUM_TARGET_CHANGE_FILE_BYTES] == 0  # the commit has no cdc action
    # ... and what only Delta's SQL metrics hold, from the command it ran: the ON condition has no
    # target-only predicate, so Delta skipped no file, and its rewrite read the source's 2 rows again
    assert set(result.metrics) == set(m.METRIC_DESCRIPTIONS)
    assert {k: result.metrics[k] for k in SQL_METRICS_ONLY} == {
        m.NUM_TARGET_FILES_AFTER_SKIPPING: 3,
        m.NUM_TARGET_BYTES_AFTER_SKIPPING: before_bytes,
        m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING: 2,
        m.NUM_SOURCE_ROWS_IN_SECOND_SCAN: 2,
    }


def test_the_files_delta_skipped_come_from_its_own_command(delta, spark, tmp_path, source):
    # Given: the 3-file target, and an ON condition whose target-only predicate keeps Delta to region eu
    spec = dataclasses.replace(
        spec_of(source, tmp_path, (update_all(),)), condition="t.id = s.id AND t.region = 'eu'"
    )
    eu_files = list((tmp_path / "target" / "region=eu").glob("*.parquet"))
    # When
    result = backend.run_with_delta_spark(spark, spec)
    # Then: the one file of eu, its bytes and its partition, as Delta's data skipping left them
    assert result.committed
    assert len(eu_files) == 1
    assert {k: result.metrics[k] for k in SQL_METRICS_ONLY if k != m.NUM_SOURCE_ROWS_IN_SECOND_SCAN} == {
        m.NUM_TARGET_FILES_AFTER_SKIPPING: 1,
        m.NUM_TARGET_BYTES_AFTER_SKIPPING: eu_files[0].stat().st_size,
        m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING: 1,
    }
    assert result.metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 3


def test_a_file_kept_under_a_new_deletion_vector_is_not_a_partition_change(spark, tmp_path, source):
    # Given: a table with deletion vectors whose eu file holds ids 3 and 6
    target = tmp_path / "target"
    rows = pa.concat_tables([target_rows([1, 2], "us"), target_rows([3, 6], "eu")])
    dv = {"delta.enableDeletionVectors": "true"}
    write_deltalake(str(target), rows, partition_by=["region"], configuration=dv)
    # When: Delta's merge deletes id 3, marking it deleted in the eu file's new vector
    result = backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (delete(),)))
    # Then: the file stays, under a vector; as Delta counts, no partition lost or gained a file
    added = [a["add"] for a in delta_log_actions(target, result.version) if "add" in a]
    assert [a["deletionVector"]["cardinality"] for a in added] == [1]
    assert result.metrics[m.NUM_TARGET_PARTITIONS_REMOVED_FROM] == 0
    assert result.metrics[m.NUM_TARGET_PARTITIONS_ADDED_TO] == 0
    assert result.metrics[m.NUM_TARGET_ROWS_DELETED] == 1


def test_an_unpartitioned_table_has_no_partitions_as_delta_counts(spark, tmp_path, source):
    # Given: the same merge into an unpartitioned table of 2 files
    target = tmp_path / "target"
    three_file_target(target, partitioned=False)
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
    assert DeltaTable(str(tmp_path / "target")).version() == 4
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    # our commit's files (id 20 into eu), not theirs
    assert result.metrics[m.NUM_TARGET_PARTITIONS_ADDED_TO] == partitions_touched(
        tmp_path / "target", 2, "add"
    )


@pytest.fixture
def unmatched_source(tmp_path):
    """A source none of whose ids the target holds: an update-only merge of it changes nothing."""
    path = tmp_path / "unmatched.parquet"
    pq.write_table(SOURCE.set_column(0, "id", pa.array([70, 80], pa.int64())), path)
    return PathSource(str(path))


# What only Delta's SQL metrics hold when no commit records them: its phase timings too.
NOT_MEASURED_WITHOUT_COMMIT = {
    *SQL_METRICS_ONLY,
    m.SCAN_TIME_MS,
    m.REWRITE_TIME_MS,
    m.MATERIALIZE_SOURCE_TIME_MS,
}


def test_no_commit_when_delta_changed_nothing_has_deltas_own_metrics(
    delta, spark, tmp_path, unmatched_source
):
    # Given: a target of 3 files at version 1, and a merge Delta commits nothing for (no id matches)
    before_bytes = data_file_bytes(tmp_path / "target")
    # When
    result = backend.run_with_delta_spark(spark, spec_of(unmatched_source, tmp_path, (update_all(),)))
    # Then: no commit, the table's version, and every declared metric as Delta's command measured it
    assert (result.version, result.committed) == (1, False)
    assert set(result.metrics) == set(m.METRIC_DESCRIPTIONS)
    assert {k for k, v in result.metrics.items() if v is None} == set()
    assert result.metrics[m.NUM_SOURCE_ROWS] == 2
    assert result.metrics[m.EXECUTION_TIME_MS] > 0
    skipping = {
        m.NUM_TARGET_FILES_BEFORE_SKIPPING: 3,
        m.NUM_TARGET_BYTES_BEFORE_SKIPPING: before_bytes,
        m.NUM_TARGET_FILES_AFTER_SKIPPING: 3,
        m.NUM_TARGET_BYTES_AFTER_SKIPPING: before_bytes,
        m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING: 2,
    }
    assert {k: result.metrics[k] for k in skipping} == skipping
    # No row changed, no file was removed or added
    timings = {m.EXECUTION_TIME_MS, m.SCAN_TIME_MS, m.REWRITE_TIME_MS, m.MATERIALIZE_SOURCE_TIME_MS}
    assert {v for k, v in result.metrics.items() if k not in {*skipping, *timings, m.NUM_SOURCE_ROWS}} == {0}


@pytest.fixture
def no_plan(monkeypatch):
    """The backend as on a Spark Connect client, which holds no plan of the server's to read metrics from."""
    monkeypatch.setattr(backend, "command_metrics", lambda executed: {})


def test_no_commit_without_a_plan_counts_and_measures_what_it_can(
    delta, spark, tmp_path, unmatched_source, no_plan
):
    # Given: a target of 3 files at version 1, and a merge Delta commits nothing for (no id matches)
    before_bytes = data_file_bytes(tmp_path / "target")
    # When
    result = backend.run_with_delta_spark(spark, spec_of(unmatched_source, tmp_path, (update_all(),)))
    # Then: no commit, the table's version reported, every declared metric there
    assert (result.version, result.committed) == (1, False)
    assert set(result.metrics) == set(m.METRIC_DESCRIPTIONS)
    # The source is counted and the time measured, not made-up zeros
    assert result.metrics[m.NUM_SOURCE_ROWS] == 2
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


def test_a_newer_commit_that_is_not_ours_is_not_reported_as_ours(
    delta, spark, tmp_path, unmatched_source, no_plan
):
    # Given: Delta commits nothing for the merge, and another writer commits right after it
    delta.other_writers_after = 1
    # When
    result = backend.run_with_delta_spark(spark, spec_of(unmatched_source, tmp_path, (update_all(),)))
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


def test_a_conflict_as_delta_spark_builds_it_carries_its_text_only_in_str(spark):
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
    assert delta.executions == 1
    # One shape, whichever try: the log-derived metrics too. What only Delta's SQL metrics hold the first try
    # read from the command it ran; the retry, which ran none, has only the log: None (not measured) there
    assert {k: v for k, v in again.metrics.items() if k not in SQL_METRICS_ONLY} == {
        k: v for k, v in first.metrics.items() if k not in SQL_METRICS_ONLY
    }
    assert None not in {first.metrics[k] for k in SQL_METRICS_ONLY}
    derived = {
        m.NUM_TARGET_FILES_BEFORE_SKIPPING: 3,
        m.NUM_TARGET_BYTES_BEFORE_SKIPPING: before_bytes,
        m.NUM_TARGET_PARTITIONS_REMOVED_FROM: partitions_touched(
            tmp_path / "target", first.version, "remove"
        ),
        m.NUM_TARGET_PARTITIONS_ADDED_TO: partitions_touched(tmp_path / "target", first.version, "add"),
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
    # Then: Delta's runtime merged into the table at its catalog location; the retry found that commit there
    assert (first.version, again.version, again.already_committed) == (2, 2, True)
    assert delta.executions == 1
    assert DeltaTable(str(tmp_path / "target")).version() == 2


def test_rerun_merge_or_another_spec_merges_again(delta, spark, tmp_path, source):
    spec = spec_of(source, tmp_path, (update_all(), insert_all()))
    backend.run_with_delta_spark(spark, spec, provenance=RUN)
    forced = backend.run_with_delta_spark(spark, spec, provenance=RUN, rerun="merge")
    other = backend.run_with_delta_spark(spark, spec_of(source, tmp_path, (insert_all(),)), provenance=RUN)
    assert (forced.already_committed, other.already_committed) == (False, False)
    assert delta.executions == 3


def test_run_without_runtime_raises_before_touching_anything(mocker, tmp_path, source):
    without_delta_package(mocker)
    session: Any = DeltaConfiguredSession({}, jvm=True)
    with pytest.raises(DeltaRuntimeError):
        backend.run_with_delta_spark(session, spec_of(source, tmp_path, (insert_all(),)))


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
        spec_hash=spec_hash(spec),
        runs=fresh.runs,
    )
    # When: a retry's Airflow side finds that commit in the log instead (no Spark, no Delta runtime)
    found = find_committed_run(spec.target, {**RUN, "specHash": spec_hash(spec)})
    assert found is not None
    from_log = commit_result(found)
    # Then: the same value, key for key, log-derived metrics included, but for what only Delta's SQL
    # metrics hold: the job read them from the command it ran, the log has none of them
    assert {k: v for k, v in from_log.items() if k not in SQL_METRICS_ONLY} == {
        k: v for k, v in from_job.items() if k not in SQL_METRICS_ONLY
    }
    assert None not in {from_job[k] for k in SQL_METRICS_ONLY}
    assert from_log[m.NUM_TARGET_PARTITIONS_ADDED_TO] == partitions_touched(tmp_path / "target", 2, "add")
    assert from_log[m.NUM_TARGET_BYTES_BEFORE_SKIPPING] == before_bytes
    assert {k for k, v in from_log.items() if v is None} == SQL_METRICS_ONLY
    assert json.loads(json.dumps(from_log))[m.NUM_TARGET_FILES_AFTER_SKIPPING] is None  # JSON null in XCom
