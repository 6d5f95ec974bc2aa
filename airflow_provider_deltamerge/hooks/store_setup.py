"""What a spark-submit merge job needs to reach the object stores its paths name: the connectors' jars on a
local master (with the settings the GCS connector needs on pyspark's Hadoop), the endpoint of an
S3-compatible store or an Azure or GCS emulator as the connector's settings, and the Azure account's key or
SAS as ABFS's.

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

from airflow_provider_deltamerge.hooks.cloud_credentials import AZURE_ENDPOINT, GOOGLE_EMULATOR
from airflow_provider_deltamerge.hooks.connector_jars import resolved_jars
from airflow_provider_deltamerge.storage_connectors import (
    AZURE_CONNECTOR,
    GCS_ABSTRACT_FILESYSTEM,
    GCS_CONNECTOR,
    GCS_FILESYSTEM,
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
GCS_PREFIX = f"{HADOOP_PREFIX}fs.gs."
# The GCS connector the task adds, on pyspark's Hadoop (3.5): Hadoop's own defaults map gs:// to Hadoop's
# hadoop-gcp, which pyspark does not ship, and give five of the connector's sizes with a unit ("64m"), which
# the connector cannot parse; these are the same sizes in bytes.
GCS_CONNECTOR_CONF = {
    f"{GCS_PREFIX}impl": GCS_FILESYSTEM,
    f"{HADOOP_PREFIX}fs.AbstractFileSystem.gs.impl": GCS_ABSTRACT_FILESYSTEM,
    f"{GCS_PREFIX}block.size": str(64 << 20),
    f"{GCS_PREFIX}rewrite.max.chunk.size": str(512 << 20),
    f"{GCS_PREFIX}outputstream.buffer.size": str(8 << 20),
    f"{GCS_PREFIX}inputstream.inplace.seek.limit": str(8 << 20),
    f"{GCS_PREFIX}inputstream.min.range.request.size": str(2 << 20),
}
# An emulator checks no credential, and fake-gcs-server has no objects.moveTo, which the connector's rename
# calls unless told to copy and delete.
GCS_EMULATOR_DEFAULTS = {
    f"{GCS_PREFIX}auth.type": "UNAUTHENTICATED",
    f"{GCS_PREFIX}operation.move.enable": "false",
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
    conf: dict[str, str] = {}
    for connector in connectors:
        if local_master and not _user_brings(connector, user_conf, user_kwargs):
            added = local_connector_jars(connector, spark_submit=spark_submit, announce=announce)
            jars += added
            if connector is GCS_CONNECTOR and added:
                conf.update(GCS_CONNECTOR_CONF)
    if S3_CONNECTOR in connectors:
        conf.update(s3a_endpoint_conf(environment))
    if GCS_CONNECTOR in connectors:
        conf.update(gcs_endpoint_conf(environment))
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


def gcs_endpoint_conf(environment: Mapping[str, str]) -> dict[str, str]:
    """The GCS connector's settings for the emulator ``environment`` names (``STORAGE_EMULATOR_HOST``, as
    Google's own clients read it); none for Cloud Storage itself."""
    emulator = environment.get(GOOGLE_EMULATOR, "")
    if not emulator:
        return {}
    return {f"{GCS_PREFIX}storage.root.url": emulator.rstrip("/"), **GCS_EMULATOR_DEFAULTS}


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
