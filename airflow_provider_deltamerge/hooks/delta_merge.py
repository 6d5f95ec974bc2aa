"""``DeltaMergeHook``: submit a merge as a Spark job through the Spark provider and bring its result back."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile
import uuid
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, BaseHook, conf
from airflow.sdk.log import mask_secret

from airflow_provider_deltamerge.delta.log.idempotency import SPEC_HASH_KEY, find_committed_run
from airflow_provider_deltamerge.delta.log.job_reports import take_report
from airflow_provider_deltamerge.delta.log.merge_commits import SUBMISSION_ID, MergeCommit, find_merge_commit
from airflow_provider_deltamerge.delta.log.store_errors import reading_store
from airflow_provider_deltamerge.exceptions import DeltaMergeError
from airflow_provider_deltamerge.hooks.class_archive import class_archive
from airflow_provider_deltamerge.hooks.cloud_credentials import gcs_keyfile_conf
from airflow_provider_deltamerge.hooks.connector_jars import JarResolutionError, distinct_jars
from airflow_provider_deltamerge.hooks.driver_jit import driver_jit_env
from airflow_provider_deltamerge.hooks.spark_setup import (
    JobSubmitHook,
    is_local_default,
    spark_connection,
    spark_submit_binary,
)
from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options
from airflow_provider_deltamerge.hooks.store_setup import HADOOP_PREFIX, StoreSetup, store_setup
from airflow_provider_deltamerge.hooks.submit_log import SubmitOutputLog
from airflow_provider_deltamerge.job_contract import ANSWER_FILE_ARG, REQUEST_FILE_ARG
from airflow_provider_deltamerge.metrics import merge_result
from airflow_provider_deltamerge.spec import MergeSpec, spec_hash
from airflow_provider_deltamerge.spec.locations import spec_paths
from airflow_provider_deltamerge.spec.sql_parse import is_path_like
from airflow_provider_deltamerge.spec.transport import (
    JobRequest,
    encode_request,
    job_rerun_policy,
    read_answer,
    write_private,
)

if TYPE_CHECKING:
    from airflow_provider_deltamerge.job.connect import ConnectedJob

JOB_MODULE = "airflow_provider_deltamerge.job.main"
# SparkSubmit's words for a Python application in cluster deploy mode on a standalone master.
STANDALONE_CLUSTER_MODE_REFUSAL = (
    "Cluster deploy mode is currently not supported for python applications on standalone clusters."
)


# Spark's own default for spark.redaction.regex, extended below by the names of the credentials we pass.
SPARK_REDACTION_DEFAULT = "(?i)secret|password|token|access[.]?key"
REDACTION_CONF = "spark.redaction.regex"


class DeltaMergeHook(BaseHook):
    """Run merges as Spark jobs submitted with ``spark-submit`` (via the Spark provider's SparkSubmitHook).

    :param spark_conn_id: Spark connection (master, deploy mode, ...), as for SparkSubmitOperator.
    :param conf: Spark configuration for the job.
    :param spark_submit_kwargs: further SparkSubmitHook arguments (executor_memory, packages, ...).
    """

    conn_name_attr = "spark_conn_id"
    default_conn_name = "spark_default"
    conn_type = "spark"
    hook_name = "Delta Lake MERGE"

    def __init__(
        self,
        spark_conn_id: str = default_conn_name,
        *,
        conf: Mapping[str, Any] | None = None,
        spark_submit_kwargs: Mapping[str, Any] | None = None,
        storage_conn_id: str | None = None,
        private_conf: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.spark_conn_id = spark_conn_id
        self.conf = dict(conf or {})
        self.spark_submit_kwargs = dict(spark_submit_kwargs or {})
        self.storage_conn_id = storage_conn_id
        # Spark conf that may hold a secret (OpenLineage's transport API key): it goes in the owner-only
        # properties file, never on spark-submit's command line, and is masked in the task log.
        self.private_conf = dict(private_conf or {})
        for value in self.private_conf.values():
            mask_secret(value)
        # The last job this hook ran: by spark-submit, or in this process against a Connect server.
        self._submit: JobSubmitHook | None = None
        self._connect_job: ConnectedJob | None = None
        self._connect_output: SubmitOutputLog | None = None

    def storage_options(self) -> dict[str, str]:
        """The storage connection's credentials (environment-variable names, which deltalake also reads)."""
        return connection_storage_options(self.storage_conn_id)

    def run_merge(
        self,
        spec: MergeSpec,
        *,
        provenance: Mapping[str, Any] | None = None,
        executor: str | None = None,
        backend: str = "auto",
        rerun: str = "skip",
        bounds: Mapping[str, Mapping[str, float]] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Submit ``spec`` and wait; return Delta's metrics plus tableVersion, executor and specHash.

        ``bounds`` (metric or ratio -> min/max) are checked by the job before it commits; a ``dry_run``
        commits nothing and adds its report under ``dryRun``.

        Raises:
            DeltaMergeError: the job's own error (clause, column, conflict...), as the job reported it.
            AirflowException: spark-submit failed before the merge could report anything.
        """
        submission_id = uuid.uuid4().hex
        connection = self._connection()
        connect = connection.conn_type == SparkConnectHook.conn_type
        in_cluster = not connect and self._deploy_mode() == "cluster"
        master = connection.host or ""
        if in_cluster and master.startswith("spark://"):
            # spark-submit refuses it after the task has started Spark's JVM; say it before, and the fix.
            raise AirflowFailException(
                f"SparkException: {STANDALONE_CLUSTER_MODE_REFUSAL} The Spark connection "
                f"{self.spark_conn_id!r} names the standalone master {master} with deploy-mode cluster: "
                "submit in client mode (the driver runs on the Airflow worker, the executors on the "
                "cluster), or to a YARN or Kubernetes master for cluster mode."
            )
        if in_cluster and not is_path_like(spec.target):
            raise AirflowFailException(
                f"The merge target {spec.target} is a catalog table name, which cluster deploy mode cannot "
                "take: the task reads a cluster-mode job's answer from the table's folder, which only the "
                "job can look up. Give the Delta table's path or URI as the target, or submit in client mode."
            )
        request = JobRequest(
            spec,
            {**(provenance or {}), SUBMISSION_ID: submission_id},
            executor,
            backend,
            job_rerun_policy(rerun),
            in_cluster,
            bounds,
            dry_run,
        )
        if connect:
            return self._run_on_connect(spec, request, connection)
        if is_local_default(connection):
            # The documented first run (README "Your first DAG"): information, not a problem.
            self.log.info(
                "No Spark connection %r is defined: the merge runs on this worker's Spark (%s). Define it "
                "(e.g. AIRFLOW_CONN_SPARK_DEFAULT) to submit to a cluster",
                self.spark_conn_id,
                connection.host,
            )
        binary = spark_submit_binary(
            self.spark_submit_kwargs.get("spark_binary") or connection.extra_dejson.get("spark-binary")
        )
        # A private folder (mode 0700): the request may hold a source's options, the answer the metrics.
        with tempfile.TemporaryDirectory(prefix="deltamerge-") as scratch:
            kwargs = dict(self.spark_submit_kwargs)
            credentials = self.storage_options()
            request_file = write_private(
                Path(scratch) / f"deltamerge-request-{submission_id}.json", encode_request(request)
            )
            answer_file = Path(scratch) / "answer.json"
            arguments = [REQUEST_FILE_ARG, str(request_file)]
            if in_cluster:
                # The driver cannot read this machine's files: spark-submit ships the request with it.
                kwargs["files"] = ",".join(filter(None, [kwargs.get("files"), str(request_file)]))
                arguments = [REQUEST_FILE_ARG, request_file.name]
            else:
                arguments += [ANSWER_FILE_ARG, str(answer_file)]
            shipped_credentials = credentials if not self._is_local_master() else {}
            stores = self._store_setup(spec, credentials, binary)
            secret_conf = {**stores.private_conf, **self.private_conf}
            private_conf = dict(secret_conf)
            if self._is_local_master():
                # Spark's GCS connector reads a service account key from a file at the same path in every
                # Spark process: a file in this private folder serves a local master only. Its path and
                # kind are no secret.
                private_conf.update(gcs_keyfile_conf(credentials, Path(scratch)))
            if shipped_credentials or private_conf:
                # Executors (and a cluster-mode driver) get them from a private properties file, which
                # spark-submit reads locally; Spark's UI redacts such keys.
                kwargs["properties_file"] = str(
                    credentials_properties(
                        Path(scratch),
                        shipped_credentials,
                        self._remote_env_prefixes(),
                        kwargs,
                        private_conf=private_conf,
                    )
                )
            if in_cluster:
                # The driver runs on the cluster, which may not have this provider installed.
                shipped = package_zip(Path(scratch))
                kwargs["py_files"] = ",".join(filter(None, [kwargs.get("py_files"), str(shipped)]))
            kwargs.setdefault("name", f"deltamerge-{spec.target.rstrip('/').rsplit('/', 1)[-1]}")
            if binary is not None:
                kwargs["spark_binary"] = binary
            if stores.jars:
                given = [jar for jar in str(kwargs.get("jars") or "").split(",") if jar]
                kwargs["jars"] = ",".join(distinct_jars([*given, *stores.jars]))
            submit = JobSubmitHook(
                conn_id=self.spark_conn_id,
                conf={**stores.conf, **self._job_conf(credentials, secret_conf)},
                application_args=arguments,
                **kwargs,
            )
            self._submit = submit
            # A client-mode driver reads the credentials from its own environment, never its arguments.
            env = {**os.environ, **credentials}
            # The driver's JVM starts here in client mode only: there it maps Spark's classes from an archive
            # and leaves C2 to the code that stays hot.
            archive = None if in_cluster else class_archive(env)
            if not in_cluster:
                env = driver_jit_env(archive.job_env(env) if archive else env)
            try:
                submit.submit(application=_job_path(), env=env)
            except AirflowException as err:
                if archive:
                    archive.keep(succeeded=False)
                failed = self._answer(spec, submission_id, None if in_cluster else answer_file)
                if isinstance(failed, DeltaMergeError):
                    raise failed from err
                raise
            if archive:
                archive.keep(succeeded=True)
            answered = self._answer(spec, submission_id, None if in_cluster else answer_file)
        if isinstance(answered, DeltaMergeError):
            raise answered
        if answered is not None:
            return answered
        return self._result_from_log(spec, submission_id)

    def _run_on_connect(self, spec: MergeSpec, request: JobRequest, connection: Any) -> dict[str, Any]:
        """Run the job in this process against the connection's Spark Connect server (``job/connect.py``)."""
        # Imported here: pyspark's Connect client and the engine, seconds that no DAG parse may pay.
        from airflow_provider_deltamerge.job.connect import ConnectedJob

        if connection.password:
            # The URL carries the token (URL-quoted): neither form may reach the task log.
            mask_secret(connection.password)
            mask_secret(quote(connection.password))
        url = SparkConnectHook(self.spark_conn_id).get_connection_url()
        submission_id = str(request.provenance[SUBMISSION_ID])
        output = self._connect_output = SubmitOutputLog(self.log)
        job = self._connect_job = ConnectedJob(url, output.info)
        with tempfile.TemporaryDirectory(prefix="deltamerge-") as scratch:
            answer_file = Path(scratch) / "answer.json"
            try:
                job.run(
                    request,
                    conf={**self.conf, **self.private_conf},
                    environment=self.storage_options(),
                    answer_file=answer_file,
                )
            except Exception as err:  # the server went away, say: the merge could not answer
                # The class and the first line only: a whole message may quote a conf's value.
                first_line = (str(err).strip().splitlines() or [""])[0]
                raise AirflowException(
                    f"The merge job on the Spark Connect server of connection {self.spark_conn_id!r} failed "
                    f"before it could answer: {type(err).__name__}: {first_line} Nothing was committed "
                    "unless the table's history shows this run's commit; run the task again."
                ) from err
            answered = self._answer(spec, submission_id, answer_file)
        if isinstance(answered, DeltaMergeError):
            raise answered
        if answered is None:
            raise AirflowException(
                f"The merge job on the Spark Connect server of connection {self.spark_conn_id!r} ended "
                "without an answer; the lines above say why."
            )
        return answered

    def spark_application_url(self) -> str | None:
        """Where the last job this hook submitted can be seen: YARN's tracking URL, else the driver's Spark
        UI as the job reported it, else the Kubernetes driver pod through ``[deltamerge] kubernetes_pod_url``
        (a template of ``{namespace}`` and ``{pod}``); None if none is known."""
        output = None if self._submit is None else self._submit.output_log
        if output is None:
            return None
        if output.tracking_url or output.spark_ui:
            return str(output.tracking_url or output.spark_ui)
        template = conf.get("deltamerge", "kubernetes_pod_url", fallback="") or ""
        if output.driver_pod is None or not template:
            return None
        namespace, pod = output.driver_pod
        return template.format(namespace=quote(namespace, safe=""), pod=quote(pod, safe=""))

    @property
    def driver_ui_url(self) -> str | None:
        """The driver's own Spark UI as the last job reported it; it lives only as long as the driver."""
        output = None if self._submit is None else self._submit.output_log
        return None if output is None else output.spark_ui

    def session_ready_at(self) -> float | None:
        """When (``time.monotonic()``) the last job this hook ran said its Spark session was up, the merge's
        own work about to start; None before that line came."""
        if self._connect_output is not None:
            return self._connect_output.started_at
        output = None if self._submit is None else self._submit.output_log
        return None if output is None else output.started_at

    def job_lines(self) -> list[tuple[float, str]]:
        """The last job's own lines so far, each with when it came (``time.monotonic()``): where its time
        went (bench/overhead.py)."""
        if self._connect_output is not None:
            return list(self._connect_output.job_lines)
        output = None if self._submit is None else self._submit.output_log
        return [] if output is None else list(output.job_lines)

    def on_kill(self) -> None:
        if self._connect_job is not None:
            self._connect_job.interrupt()
        if self._submit is not None:
            self._submit.on_kill()

    def _answer(
        self, spec: MergeSpec, submission_id: str, answer_file: Path | None
    ) -> dict[str, Any] | DeltaMergeError | None:
        """The job's answer: from ``answer_file`` (client mode), else the report it left beside the table
        (cluster mode, ``delta/log/job_reports.py``); None when the job gave none (it died, say)."""
        if answer_file is not None:
            text = answer_file.read_text(encoding="utf-8") if answer_file.is_file() else None
        else:
            text = take_report(spec.target, submission_id, self.storage_options())
        return None if text is None else read_answer(text, submission_id)

    def _result_from_log(self, spec: MergeSpec, submission_id: str) -> dict[str, Any]:
        """The job's metrics read back from its commit, for deploy modes where its output is not ours."""
        options = self.storage_options()
        commit = (
            find_merge_commit(spec.target, submission_id=submission_id, storage_options=options)
            if is_path_like(spec.target)
            else None
        )
        if commit is None:
            raise AirflowException(
                "The merge job finished but reported no result, and the Delta log of "
                f"{spec.target} has no commit of it. Check the Spark driver's log for the job's output."
            )
        return commit_result(commit)

    def committed_run(self, spec: MergeSpec, provenance: Mapping[str, Any]) -> MergeCommit | None:
        """This run's newest earlier commit of ``spec`` (a retry, or a cleared task), read from the log."""
        identity = {**provenance, SPEC_HASH_KEY: spec_hash(spec)}
        with reading_store(spec.target, self.storage_conn_id):
            return find_committed_run(spec.target, identity, storage_options=self.storage_options() or None)

    def _store_setup(self, spec: MergeSpec, credentials: Mapping[str, str], binary: str | None) -> StoreSetup:
        """The connectors' jars (local master), the endpoints' conf and ABFS's credentials for the stores
        ``spec`` names.

        Raises:
            AirflowException: a connector could not be fetched (the registry unreachable, say): a retry may.
        """
        try:
            return store_setup(
                spec_paths(spec),
                credentials,
                local_master=self._is_local_master(),
                spark_submit=binary or "spark-submit",
                user_conf=self.conf,
                user_kwargs=self.spark_submit_kwargs,
                announce=self.log.info,
            )
        except JarResolutionError as err:
            raise AirflowException(
                f"The object-store connector this merge's Spark needs could not be fetched: {err}\nGive it "
                "with spark_submit_kwargs={'jars': ...}, or point DELTAMERGE_IVY_SETTINGS at Ivy settings "
                "that reach your Maven mirror."
            ) from err

    def _job_conf(self, credentials: Mapping[str, str], secret_conf: Mapping[str, str]) -> dict[str, Any]:
        """The job's Spark conf; on a local master the job runs with this worker's Python and packages.


        Spark's UI and event log redact conf entries whose name matches ``spark.redaction.regex``; its
        default misses names such as ``AZURE_STORAGE_ACCOUNT_KEY`` or ``...transport.auth.apiKey``, so every
        credential's name and every secret conf key is added; a ``spark.hadoop.`` key without its prefix,
        as the event log's Hadoop properties name it (the pattern is searched in a name, so it serves both).
        """
        conf = dict(self.conf)
        secret_names = sorted({*credentials, *(name.removeprefix(HADOOP_PREFIX) for name in secret_conf)})
        if secret_names:
            names = "|".join(re.escape(name) for name in secret_names)
            conf[REDACTION_CONF] = f"(?:{conf.get(REDACTION_CONF) or SPARK_REDACTION_DEFAULT})|{names}"
        if self._is_local_master():
            conf.setdefault("spark.pyspark.python", sys.executable)
            conf.setdefault("spark.pyspark.driver.python", sys.executable)
        return conf

    def _is_local_master(self) -> bool:
        return (self._connection().host or "").startswith("local")

    def _remote_env_prefixes(self) -> list[str]:
        """Spark conf prefixes that set environment variables of the processes that run on the cluster."""
        prefixes = ["spark.executorEnv."]
        if self._deploy_mode() == "cluster":
            master = self._connection().host or ""
            prefixes.append(
                "spark.kubernetes.driverEnv." if master.startswith("k8s") else "spark.yarn.appMasterEnv."
            )
        return prefixes

    def _deploy_mode(self) -> str:
        """``client`` or ``cluster``, as SparkSubmitHook will decide it (argument first, then connection)."""
        if self.spark_submit_kwargs.get("deploy_mode"):
            return str(self.spark_submit_kwargs["deploy_mode"])
        return str(self._connection().extra_dejson.get("deploy-mode") or "client")

    def _connection(self) -> Any:
        return spark_connection(self.spark_conn_id)


def commit_result(commit: MergeCommit) -> dict[str, Any]:
    """A merge commit as the operator's XCom value (``metrics.merge_result``)."""
    return merge_result(
        commit.metrics,
        version=commit.version,
        executor=commit.info.get("executor"),
        spec_hash=commit.info.get(SPEC_HASH_KEY),
        runs=commit.info,
    )


def credentials_properties(
    folder: Path,
    credentials: Mapping[str, str],
    prefixes: list[str],
    kwargs: Mapping[str, Any],
    *,
    private_conf: Mapping[str, str] | None = None,
) -> Path:
    """An owner-only properties file: the user's own properties, one entry per credential and prefix, and
    the private Spark conf."""
    path = folder / "deltamerge-credentials.properties"
    user_file = kwargs.get("properties_file")
    lines = [Path(user_file).read_text()] if user_file else []
    lines += [f"{prefix}{name}={value}" for prefix in prefixes for name, value in credentials.items()]
    lines += [f"{key}={value}" for key, value in (private_conf or {}).items()]
    path.touch(mode=0o600)
    path.write_text("\n".join(lines) + "\n")
    return path


def package_zip(folder: Path) -> Path:
    """This provider's package as a zip for ``--py-files``; its dependencies must be on the cluster."""
    package = Path(__file__).resolve().parents[1]
    archive = folder / "airflow_provider_deltamerge.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for source in sorted(package.rglob("*.py")):
            out.write(source, source.relative_to(package.parent).as_posix())
    return archive


def _job_path() -> str:
    """The job's file, found without importing it (it imports pyspark)."""
    found = importlib.util.find_spec(JOB_MODULE)
    if found is None or found.origin is None:
        raise AirflowException(f"Cannot find the merge job module {JOB_MODULE}; is the provider installed?")
    return found.origin
