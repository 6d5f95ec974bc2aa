"""What a spark-submit merge job needs to reach the object stores its paths name: the connectors' jars on a
local master, the endpoint of an S3-compatible store or an Azure emulator as the connector's settings, and
the Azure account's key or SAS as ABFS's.

S3 credentials reach the job as environment variables (``hooks/storage_credentials.py``), which S3A's default
credential chain, ``deltalake`` and ``obstore`` all read. ABFS reads none: it gets the account's key or SAS
as private conf, which the hook writes to its owner-only properties file and Spark's UI redacts. Where and
how to reach a store is no secret, so the endpoint settings are plain Spark conf.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from airflow_provider_deltamerge.hooks.cloud_credentials import AZURE_ENDPOINT
from airflow_provider_deltamerge.hooks.connector_jars import resolved_jars
from airflow_provider_deltamerge.storage_connectors import (
    AZURE_CONNECTOR,
    S3_CONNECTOR,
    Connector,
    connectors_for,
    installed_spark_hadoop_version,
    uri_scheme,
)

S3A_PREFIX = "spark.hadoop.fs.s3a."
# An endpoint other than AWS's own is an S3-compatible server (MinIO, Ceph, a local one): most serve buckets
# as a path of the endpoint only, not as its subdomains.
S3_COMPATIBLE_DEFAULTS = {"path.style.access": "true"}
# The region S3A signs for when the connection names none: S3-compatible servers accept any, AWS redirects.
DEFAULT_S3_REGION = "us-east-1"
HADOOP_PREFIX = "spark.hadoop."
ABFS_PREFIX = f"{HADOOP_PREFIX}fs.azure."
# An emulator's Blob service (Azurite's) serves the account as a path of its endpoint and has no Data Lake
# (dfs) API: ABFS is pointed at the endpoint and talks Blob to a flat namespace.
AZURE_EMULATOR_DEFAULTS = {
    f"{ABFS_PREFIX}account.hns.enabled": "false",
    f"{ABFS_PREFIX}fns.account.service.type": "BLOB",
    f"{ABFS_PREFIX}ingress.service.type": "BLOB",
    # ABFS reports its client metrics to the account as the JVM ends, retrying for minutes where no one
    # answers (an emulator already stopped): an emulator has no use for them.
    f"{ABFS_PREFIX}metrics.collection.enabled": "false",
    # Azurite lists a folder's subfolders before its files, where Azure interleaves them by name; the first
    # file committer's job commit then walks a renamed folder twice. The second one commits task by task.
    f"{HADOOP_PREFIX}mapreduce.fileoutputcommitter.algorithm.version": "2",
}
# spark-submit ends the driver's JVM once the job has returned, with its exit status: Hadoop 3.5's ABFS leaves
# scheduled threads that are not daemons, which would keep it (and the task waiting on it) alive for good.
ABFS_JOB_CONF = {"spark.submit.callSystemExitOnMainExit": "true"}
# Plain HTTP: ABFS's default Apache client insists on a TLS socket factory, the JDK's does not.
AZURE_PLAIN_HTTP = {
    f"{ABFS_PREFIX}always.use.https": "false",
    f"{ABFS_PREFIX}networking.library": "JDK_HTTP_URL_CONNECTION",
}
# Spark options that already bring a connector's jar: then the user's choice stands.
_JAR_OPTIONS = ("spark.jars", "spark.jars.packages")


@dataclass(frozen=True)
class StoreSetup:
    """Jars to add to the job (local master only) and Spark conf to set where the user has not."""

    jars: tuple[str, ...] = ()
    conf: Mapping[str, str] = field(default_factory=dict)
    private_conf: Mapping[str, str] = field(default_factory=dict)  # credentials, for the properties file


def store_setup(
    paths: Iterable[str],
    environment: Mapping[str, str],
    *,
    local_master: bool,
    spark_submit: str,
    user_conf: Mapping[str, Any],
    user_kwargs: Mapping[str, Any],
    announce: Callable[[str], None],
) -> StoreSetup:
    """The jars and conf a job needs for the stores of ``paths``.

    On a local master each store's connector is resolved (once per machine) for the Hadoop of the installed
    pyspark, unless the user's ``jars``/``packages`` already name it; on a cluster the cluster's own
    connectors are used, and the job says which one is missing if it is (``job/filesystems.py``).

    Raises:
        JarResolutionError: a connector could not be resolved.
    """
    connectors = connectors_for(paths)
    jars: list[str] = []
    for connector in connectors:
        if local_master and not _user_brings(connector, user_conf, user_kwargs):
            jars += local_connector_jars(connector, spark_submit=spark_submit, announce=announce)
    conf = s3a_endpoint_conf(environment) if S3_CONNECTOR in connectors else {}
    private: dict[str, str] = {}
    if AZURE_CONNECTOR in connectors:
        conf.update({**ABFS_JOB_CONF, **abfs_endpoint_conf(environment)})
        private = abfs_credential_conf(paths, environment)
    return StoreSetup(
        tuple(jars),
        {k: v for k, v in conf.items() if k not in user_conf},
        {k: v for k, v in private.items() if k not in user_conf},
    )


def local_connector_jars(
    connector: Connector, *, spark_submit: str = "spark-submit", announce: Callable[[str], None]
) -> list[str]:
    """``connector``'s jars for the Hadoop of the pyspark installed here, resolved once into the cache; none
    where no pyspark with its jars is installed (a Spark of the machine's own then decides).

    Raises:
        JarResolutionError: the connector could not be resolved.
    """
    hadoop = installed_spark_hadoop_version()
    if hadoop is None:
        return []
    return resolved_jars(connector.coordinates(hadoop), spark_submit=spark_submit, announce=announce)


def s3a_endpoint_conf(environment: Mapping[str, str]) -> dict[str, str]:
    """S3A's settings for the endpoint and region of ``environment`` (a connection's ``endpoint_url`` and
    ``region_name``); none for AWS's own endpoints, which S3A finds from the region."""
    endpoint = environment.get("AWS_ENDPOINT_URL", "")
    region = environment.get("AWS_REGION", "")
    conf = {f"{S3A_PREFIX}endpoint.region": region} if region else {}
    if not endpoint:
        return conf
    parts = urlsplit(endpoint)
    conf[f"{S3A_PREFIX}endpoint"] = endpoint
    conf[f"{S3A_PREFIX}connection.ssl.enabled"] = str(parts.scheme != "http").lower()
    conf.setdefault(f"{S3A_PREFIX}endpoint.region", DEFAULT_S3_REGION)
    conf.update({f"{S3A_PREFIX}{key}": value for key, value in S3_COMPATIBLE_DEFAULTS.items()})
    return conf


def abfs_endpoint_conf(environment: Mapping[str, str]) -> dict[str, str]:
    """ABFS's settings for the Blob endpoint of ``environment`` (a ``wasb`` connection's that is not Azure's
    own): an endpoint naming the account in its path is an emulator's; none for Azure's own."""
    endpoint = urlsplit(environment.get(AZURE_ENDPOINT, ""))
    account = environment.get("AZURE_STORAGE_ACCOUNT_NAME", "")
    if not endpoint.netloc or endpoint.path.strip("/").split("/")[0] != account:
        return {}
    conf = {f"{ABFS_PREFIX}abfs.endpoint": endpoint.netloc, **AZURE_EMULATOR_DEFAULTS}
    if endpoint.scheme == "http":
        conf.update(AZURE_PLAIN_HTTP)
    return conf


def abfs_credential_conf(paths: Iterable[str], environment: Mapping[str, str]) -> dict[str, str]:
    """ABFS's credential for each account ``paths`` name (``abfss://container@host/...``): the account key,
    or a SAS; none for an OAuth token, which ABFS takes only from a token-provider class of its own."""
    hosts = sorted(
        {urlsplit(p).hostname or "" for p in paths if uri_scheme(p) in AZURE_CONNECTOR.schemes} - {""}
    )
    conf: dict[str, str] = {}
    for host in hosts:
        if key := environment.get("AZURE_STORAGE_ACCOUNT_KEY"):
            conf[f"{ABFS_PREFIX}account.key.{host}"] = key
        elif sas := environment.get("AZURE_STORAGE_SAS_KEY"):
            conf[f"{ABFS_PREFIX}account.auth.type.{host}"] = "SAS"
            conf[f"{ABFS_PREFIX}sas.fixed.token.{host}"] = sas.removeprefix("?")
    return conf


def _user_brings(connector: Connector, conf: Mapping[str, Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether the user's conf or spark-submit arguments already name ``connector``'s artifact."""
    artifact = connector.artifact.split(":")[1]
    given = [str(conf.get(key) or "") for key in _JAR_OPTIONS]
    given += [str(kwargs.get(key) or "") for key in ("jars", "packages")]
    return any(artifact in text for text in given)
