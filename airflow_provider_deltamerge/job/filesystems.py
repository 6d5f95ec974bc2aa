"""Before Spark reads anything: every object store the merge's paths name has a Hadoop connector in the
session, and ``s3://`` is read through S3A where Spark has no ``s3`` file system of its own.

Without this the first read fails deep in a query with Hadoop's ``No FileSystem for scheme "s3"``, after
the session and the planning were paid for, and without a word on which connector to add.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.exceptions import StorageConnectorError
from airflow_provider_deltamerge.session_kind import is_connect
from airflow_provider_deltamerge.storage_connectors import (
    S3A_ABSTRACT_FILESYSTEM,
    S3A_FILESYSTEM,
    Connector,
    connector_for,
    uri_scheme,
)

# Schemes S3A serves when Spark has no file system of their own (open-source Hadoop has none).
_S3A_ALIASES = ("s3", "s3n")


def prepare_filesystems(spark: SparkSession, paths: Iterable[str]) -> None:
    """Check that the session can read and write each of ``paths``' object stores; map ``s3``/``s3n`` to S3A
    where they have no file system and S3A is there.

    A Spark Connect server is left as it is: its connectors are the server's, and this process cannot see
    its Hadoop configuration.

    Raises:
        StorageConnectorError: a path's store has no connector in the session.
    """
    if is_connect(spark):
        return
    jvm: Any = spark._jvm
    hadoop_conf = spark._jsc.hadoopConfiguration()
    schemes = sorted({s for s in map(uri_scheme, paths) if s is not None})
    for scheme in schemes:
        connector = connector_for(scheme)
        if connector is None or _has_filesystem(jvm, hadoop_conf, scheme):
            continue
        if scheme in _S3A_ALIASES and _has_filesystem(jvm, hadoop_conf, "s3a"):
            # Set on the context's Hadoop configuration, from which every query's and the writer's are made.
            hadoop_conf.set(f"fs.{scheme}.impl", S3A_FILESYSTEM)
            hadoop_conf.set(f"fs.AbstractFileSystem.{scheme}.impl", S3A_ABSTRACT_FILESYSTEM)
            continue
        raise _missing(connector, scheme, jvm.org.apache.hadoop.util.VersionInfo.getVersion())


def _has_filesystem(jvm: Any, hadoop_conf: Any, scheme: str) -> bool:
    """Whether Hadoop finds a file system class for ``scheme`` (mapped, and its class on the classpath)."""
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, hadoop_conf)
    except Py4JJavaError:  # UnsupportedFileSystemException, or the mapped class is not on the classpath
        return False
    return True


def _missing(connector: Connector, scheme: str, hadoop_version: str) -> StorageConnectorError:
    coordinates = connector.coordinates(hadoop_version)
    _, artifact, version, *classifier = coordinates.split(":")
    if classifier:  # a self-contained jar, which --packages cannot name
        jar = f"{artifact}-{version}-{classifier[0]}.jar"
        how = f"spark_submit_kwargs={{'jars': '<folder>/{jar}'}} (Maven's {coordinates})"
    else:
        how = f"spark_submit_kwargs={{'packages': '{coordinates}'}} (its version must match Spark's Hadoop, "
        how += f"{hadoop_version})"
    return StorageConnectorError(
        f"Spark has no file system for {scheme}:// paths: the {connector.name} connector "
        f"({connector.filesystem(scheme)}) is not on its classpath. On a local master the task adds it; on "
        f"a cluster, install it in the cluster's Spark (jars/ or its image), or pass {how}. Nothing was read "
        "or written.",
        error_class="DELTAMERGE_STORAGE_CONNECTOR_MISSING",
    )
