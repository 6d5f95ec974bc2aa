"""What a spark-submit merge job needs to reach the object stores its paths name: the connectors' jars on a
local master, and the S3 endpoint of an S3-compatible store as S3A's settings.

Credentials are not here: they reach the job as environment variables (``hooks/storage_credentials.py``),
which S3A's default credential chain, ``deltalake`` and ``obstore`` all read. Where and how to reach a store
is no secret, so the endpoint settings are plain Spark conf.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from airflow_provider_deltamerge.hooks.connector_jars import resolved_jars
from airflow_provider_deltamerge.storage_connectors import (
    S3_CONNECTOR,
    Connector,
    connectors_for,
    installed_spark_hadoop_version,
)

S3A_PREFIX = "spark.hadoop.fs.s3a."
# An endpoint other than AWS's own is an S3-compatible server (MinIO, Ceph, a local one): most serve buckets
# as a path of the endpoint only, not as its subdomains.
S3_COMPATIBLE_DEFAULTS = {"path.style.access": "true"}
# The region S3A signs for when the connection names none: S3-compatible servers accept any, AWS redirects.
DEFAULT_S3_REGION = "us-east-1"
# Spark options that already bring a connector's jar: then the user's choice stands.
_JAR_OPTIONS = ("spark.jars", "spark.jars.packages")


@dataclass(frozen=True)
class StoreSetup:
    """Jars to add to the job (local master only) and Spark conf to set where the user has not."""

    jars: tuple[str, ...] = ()
    conf: Mapping[str, str] = field(default_factory=dict)


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
    return StoreSetup(tuple(jars), {k: v for k, v in conf.items() if k not in user_conf})


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


def _user_brings(connector: Connector, conf: Mapping[str, Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether the user's conf or spark-submit arguments already name ``connector``'s artifact."""
    artifact = connector.artifact.split(":")[1]
    given = [str(conf.get(key) or "") for key in _JAR_OPTIONS]
    given += [str(kwargs.get(key) or "") for key in ("jars", "packages")]
    return any(artifact in text for text in given)
