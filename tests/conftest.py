"""Fixtures shared by every depth: a local SparkSession and small Delta tables on disk."""

from __future__ import annotations

import logging
import os
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_deltamerge.spec import MergeSpec
    from tests.stores.azure_server import AzureServer
    from tests.stores.gcs_server import GcsServer
    from tests.stores.s3_server import S3Server

# spark-submit and airflow come with the test interpreter's environment; subprocesses must find them.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Merges in subprocesses (spark-submit jobs, Airflow tasks) check their commits' file stats as in-process
# ones do: this folder's sitecustomize installs the check in every Python process started from here.
_HOOK = str(Path(__file__).parent / "subprocess_hook")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_HOOK, os.environ.get("PYTHONPATH")) if p)


# Nearly every JVM the tests start (each spark-submit, an Airflow task's, the Connect server) lives seconds
# on small data: C2, the JIT's optimizing compiler, and G1's threads cost such a JVM more CPU than they ever
# pay back, and on a 2-core machine they take it from the work itself. C1 and the serial collector halve a
# short job's CPU time (tests/job/test_spark_submit.py: 175 s to 93 s). They change how the JVM compiles and
# collects, nothing Spark or the merge does.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# The session's own SparkSession is the exception: it runs thousands of queries over the whole session
# (the differential suite's 150 statements took 628 s with C1 alone against 511 s), so C2 is back for it;
# its driver options come after SPARK_SUBMIT_OPTS on the JVM's command line, and the last one wins. Its heap
# starts at its maximum (the driver memory below): grown from the serial collector's small initial heap, the
# two workers' JVMs made 88 full collections and 170 s of GC in a CI run; from 3 GB, 58 and 124 s (jstat).
SESSION_HEAP = "3g"
LONG_LIVED_JVM = f"-XX:TieredStopAtLevel=4 -Xms{SESSION_HEAP}"


def pytest_configure(config: pytest.Config) -> None:
    from tests.run_profile import choose_draw_seed
    from tests.spark_class_archive import add_submit_options, share_spark_classes

    choose_draw_seed()

    add_submit_options(SHORT_LIVED_JVM)
    # Before the first JVM: every spark-submit started from here maps one archive of Spark's classes.
    config.stash[_ARCHIVE_FAILURE] = share_spark_classes()


def pytest_report_header(config: pytest.Config) -> list[str]:
    from tests.run_profile import SEED_VARIABLE, draw_seed

    failure = config.stash.get(_ARCHIVE_FAILURE, None)
    return [
        "Spark's class archive: " + (f"none ({failure})" if failure else "shared by every spark-submit"),
        f"Differential statements drawn from seed {draw_seed()} ({SEED_VARIABLE}={draw_seed()} draws them "
        "again)",
    ]


_ARCHIVE_FAILURE = pytest.StashKey[str | None]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # In one of make test's workers (tests/worker_plan.py): the longest work first. Only workers collect.
    if hasattr(config, "workerinput"):
        from tests.worker_plan import longest_first

        longest_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from tests.worker_plan import PlannedScheduling

    return PlannedScheduling(config, log)


ORDERS = pa.table(
    {
        "id": pa.array(range(10), pa.int64()),
        "qty": pa.array([i * 10 for i in range(10)], pa.int32()),
        "region": pa.array(["eu", "us"] * 5),
    }
)


@pytest.fixture(autouse=True)
def added_file_stats_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit a test makes through the engine checks each added file's stats against its rows.

    ``_try_commit`` is the one call every merge commit goes through with its add actions; the real function
    still commits, after the check (tests/file_stats.py) has passed.
    """
    from airflow_provider_deltamerge.delta.commit import transaction as commit
    from tests.file_stats import check_actions

    real = commit._try_commit

    def checked(base: Any, actions: Any, store: Any) -> bool:
        check_actions(base, actions)
        return real(base, actions, store)

    monkeypatch.setattr(commit, "_try_commit", checked)


def local_session_builder(app_name: str) -> SparkSession.Builder:
    """A local SparkSession's builder as the tests use it (the job's session confs, small shuffles: the test
    data is tiny)."""
    from pyspark.sql import SparkSession

    from airflow_provider_deltamerge.job_contract import ENGINE_SESSION_CONF

    return (
        SparkSession.builder.master("local[2]")
        .config(map=ENGINE_SESSION_CONF)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
    )


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """One local SparkSession for the engine tests, with Delta Lake's own runtime beside our engine: Delta is
    the oracle of the tests, so a session without it fails (tests/delta_runtime.py says why)."""
    from airflow_provider_deltamerge.hooks.store_setup import GCS_CONNECTOR_CONF, local_connector_jars
    from airflow_provider_deltamerge.storage_connectors import AZURE_CONNECTOR, GCS_CONNECTOR, S3_CONNECTOR
    from tests.delta_runtime import with_delta

    warehouse = tmp_path_factory.mktemp("warehouse")
    builder = (
        local_session_builder("deltamerge-tests")
        .config("spark.sql.warehouse.dir", str(warehouse))
        # Delta rebuilds a snapshot's state in this many tasks (50 by default), as its own test suites do
        .config("spark.databricks.delta.snapshotPartitions", "2")
        # Delta keeps the last 10,000 tables' logs and snapshots, plans and all, for an hour: hundreds of
        # generated tables filled the driver's 1 GB heap and each statement took three times as long after
        # 250 of them (docs/development.md)
        .config("spark.databricks.delta.delta.log.cacheSize", "64")
        # A worker's session lives the whole run and holds plans, Delta's snapshots and Spark's status store:
        # with spark-submit's 1 GB heap its serial collector took 12 % of the JVM's CPU over a CI run's first
        # 45 minutes and half of it in the worst minutes (jstat: 74 full collections, 203 s of 1,705 s), on
        # two cores the run keeps busy
        .config("spark.driver.memory", SESSION_HEAP)
        # Spark's status store keeps the last 1,000 jobs, stages and SQL executions, plans and metrics, though
        # the UI is off: the live heap every full collection walks. After 400 of Delta's MERGEs in a session
        # like this one, 136 MB were live with 200 kept, against 168 MB with Spark's defaults (jcmd GC.run,
        # GC.heap_info). The tests read the few executions of the merge they run (tests/engine/conftest.py).
        .config("spark.ui.retainedJobs", "200")
        .config("spark.ui.retainedStages", "200")
        .config("spark.sql.ui.retainedExecutions", "200")
        .config("spark.ui.showConsoleProgress", "false")
        # Spark keeps the last 100 classes it generated for a plan's expressions and stages, and compiles any
        # other again: a worker's session runs hundreds of merges whose plans share most of their code. With
        # 1,000 kept, 25 differential statements took 14 % less time than with 100
        # (bench/results/codegen-cache-20261202T184500Z.md): the same generated code runs, compiled less.
        .config("spark.sql.codegen.cache.maxEntries", "1000")
        .config("spark.driver.extraJavaOptions", LONG_LIVED_JVM)
    )
    # Spark's S3, Azure and GCS connectors too, as a local master's merge job gets them (with the settings the
    # GCS one needs): the tests merge into an S3 server, Azure's emulator and a GCS emulator.
    connector_jars = [
        jar
        for connector in (S3_CONNECTOR, AZURE_CONNECTOR, GCS_CONNECTOR)
        for jar in local_connector_jars(connector, announce=lambda line: print(line, file=sys.stderr))
    ]
    for key, value in GCS_CONNECTOR_CONF.items():
        builder = builder.config(key, value)
    session = with_delta(builder, extra_jars=connector_jars).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    # py4j says goodbye at interpreter exit, after pytest has closed the streams it would log to.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    yield session
    session.stop()


def make_table(path: Path | str, data: pa.Table = ORDERS, *, partition_by: list[str] | None = None) -> str:
    """A Delta table written by delta-rs at ``path`` (a folder or a store's URI), as a user's existing table
    would be."""
    write_deltalake(str(path), data, partition_by=partition_by)
    return str(path)


def table_state(path: str) -> tuple[int, list[dict[str, object]]]:
    """Version and rows of a table: what a failed merge must leave unchanged."""
    from tests.oracle import sorted_rows

    return DeltaTable(path).version(), sorted_rows(path)


def write_extract(extract: Path, rows: list[tuple[int, int, str]], **extra: pa.Array) -> str:
    """Write ``rows`` (id, qty, region), plus the ``extra`` columns, as a parquet extract; its path."""
    ids, qtys, regions = zip(*rows, strict=True)
    data = {"id": pa.array(ids, pa.int64()), "qty": pa.array(qtys, pa.int32()), "region": pa.array(regions)}
    pq.write_table(pa.table({**data, **extra}), extract)
    return str(extract)


def upsert_from_extract(target: str, extract: Path, rows: list[tuple[int, int, str]]) -> MergeSpec:
    """Write ``rows`` (id, qty, region) as a parquet extract and return the upsert of it into ``target``."""
    from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all

    write_extract(extract, rows)
    return MergeSpec(
        target=target,
        source=PathSource(str(extract)),
        condition="t.id = s.id",
        clauses=(update_all(), insert_all()),
    )


class MergeInThread:
    """``hook.run_merge(spec)`` running in a thread, for a test to stop (``on_kill``) while it runs; a daemon,
    so that a merge the kill failed to stop cannot keep the test process from ending."""

    def __init__(self, hook: Any, spec: MergeSpec) -> None:
        # What ended the merge: its result, or whatever it raised.
        self.outcome: list[BaseException | dict[str, object]] = []
        self.thread = threading.Thread(target=self._run, args=(hook, spec), daemon=True)
        self.thread.start()

    def _run(self, hook: Any, spec: MergeSpec) -> None:
        try:
            self.outcome.append(hook.run_merge(spec))
        except BaseException as err:  # the thread reports whatever ended the merge
            self.outcome.append(err)


@pytest.fixture(scope="session")
def s3_server_of_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """The session's S3-compatible server (s3proxy on 127.0.0.1): one per test session, a bucket per test."""
    from tests.stores.s3_server import s3_server

    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture
def s3_lake(s3_server_of_session: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new bucket on the session's S3 server, as ``s3://<bucket>``; this process (``deltalake``,
    ``obstore``, pyarrow) reaches it with the server's keys from the environment, as a merge job does."""
    for name, value in s3_server_of_session.environment().items():
        monkeypatch.setenv(name, value)
    return s3_server_of_session.create_bucket(f"lake-{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="session")
def azure_server_of_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzureServer]:
    """The session's Azure storage emulator (Azurite on 127.0.0.1): one per test session, a container per
    test."""
    from tests.stores.azure_server import azure_server

    with azure_server(tmp_path_factory.mktemp("azure")) as server:
        yield server


@pytest.fixture
def azure_lake(azure_server_of_session: AzureServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new container on the session's Azure emulator, as ``abfs://<container>@<account>...``; this process
    (``deltalake``, ``obstore``) reaches it with the emulator's account key from the environment, as a merge
    job does."""
    for name, value in azure_server_of_session.environment().items():
        monkeypatch.setenv(name, value)
    return azure_server_of_session.create_container(f"lake-{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="session")
def gcs_server_of_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsServer]:
    """The session's Google Cloud Storage emulator (fake-gcs-server on 127.0.0.1): one per test session, a
    bucket per test."""
    from tests.stores.gcs_server import gcs_server

    with gcs_server(tmp_path_factory.mktemp("gcs")) as server:
        yield server


@pytest.fixture
def gcs_lake(gcs_server_of_session: GcsServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new bucket on the session's GCS emulator, as ``gs://<bucket>``; this process (``deltalake``,
    ``obstore``) reaches it as a merge job does, from a connection's ``STORAGE_EMULATOR_HOST``."""
    for name, value in gcs_server_of_session.environment().items():
        monkeypatch.setenv(name, value)
    return gcs_server_of_session.create_bucket(f"lake-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def lake_root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's tables live, by the test's parameter: ``disk`` a folder, ``s3`` a new bucket on the
    session's S3 server, ``azure`` a new container on its Azure emulator, ``gcs`` a new bucket on its GCS
    emulator (``@pytest.mark.parametrize("lake_root", ["disk", "s3", "azure", "gcs"], indirect=True)``)."""
    if request.param in ("s3", "azure", "gcs"):
        return str(request.getfixturevalue(f"{request.param}_lake"))
    return str(tmp_path)


@pytest.fixture
def spark_on_s3(spark: SparkSession, s3_server_of_session: S3Server) -> SparkSession:
    """The session's SparkSession reaching the S3 server through S3A, and ``s3://`` mapped to it, as the
    merge job's session is set up (the hook's endpoint conf, ``job/filesystems.py``); its JVM started before
    the server, so the keys go into the Hadoop configuration instead of its environment."""
    from airflow_provider_deltamerge.hooks.store_setup import s3a_endpoint_conf
    from airflow_provider_deltamerge.job.filesystems import prepare_filesystems

    environment = s3_server_of_session.environment()
    hadoop_conf = spark._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    settings = {
        **{key.removeprefix("spark.hadoop."): value for key, value in s3a_endpoint_conf(environment).items()},
        "fs.s3a.access.key": environment["AWS_ACCESS_KEY_ID"],
        "fs.s3a.secret.key": environment["AWS_SECRET_ACCESS_KEY"],
    }
    for key, value in settings.items():
        hadoop_conf.set(key, value)
    prepare_filesystems(spark, ["s3://any-bucket"])
    return spark


@pytest.fixture
def spark_on_azure(spark: SparkSession, azure_server_of_session: AzureServer) -> SparkSession:
    """The session's SparkSession reaching the Azure emulator through ABFS, as the merge job's session is set
    up (the hook's endpoint conf and the account key it writes to the private properties file)."""
    from airflow_provider_deltamerge.hooks.store_setup import abfs_credential_conf, abfs_endpoint_conf

    environment = azure_server_of_session.environment()
    any_container = f"abfs://any@{azure_server_of_session.account}.dfs.core.windows.net"
    settings = {**abfs_endpoint_conf(environment), **abfs_credential_conf([any_container], environment)}
    hadoop_conf = spark._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    for key, value in settings.items():
        hadoop_conf.set(key.removeprefix("spark.hadoop."), value)
    return spark


@pytest.fixture
def spark_on_gcs(spark: SparkSession, gcs_server_of_session: GcsServer) -> SparkSession:
    """The session's SparkSession reaching the GCS emulator through the GCS connector, as the merge job's
    session is set up (the hook's emulator conf)."""
    from airflow_provider_deltamerge.hooks.store_setup import gcs_endpoint_conf

    hadoop_conf = spark._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    for key, value in gcs_endpoint_conf(gcs_server_of_session.environment()).items():
        hadoop_conf.set(key.removeprefix("spark.hadoop."), value)
    return spark
