"""The Hadoop connector Spark needs for each object store's URI scheme, and the Maven artifact that holds it.

Spark reads and writes a table through Hadoop's ``FileSystem`` for its scheme; open-source Spark ships none
for S3, Azure or GCS. The hook adds the connector on a local master (resolved once into a cache,
``hooks/connector_jars.py``), the job checks that the session has it before Spark reads anything
(``job/filesystems.py``), and both name it the same way from this table.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

# Hadoop's S3A is the S3 connector of open-source Spark; it has no ``s3`` scheme of its own (EMR's EMRFS
# has), so a table written as users write it, ``s3://``, is read through S3A wherever ``s3`` has no class.
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
S3A_ABSTRACT_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3A"
# The GCS connector's release for Hadoop 3.4+ and Java 17 (3.1 is built for an older Hadoop: parquet's
# vectored reads fail on it); its shaded jar holds its dependencies, which Maven's central repository does not
# all serve beside it.
GCS_CONNECTOR_ARTIFACT = "com.google.cloud.bigdataoss:gcs-connector:4.0.0:shaded"
GCS_FILESYSTEM = "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"
GCS_ABSTRACT_FILESYSTEM = "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFS"


@dataclass(frozen=True)
class Connector:
    """A Hadoop connector: the artifact that holds it and the ``FileSystem`` class of each of its schemes."""

    name: str
    artifact: str  # Maven coordinates; ``{hadoop}`` stands for the Hadoop version Spark runs
    filesystems: tuple[tuple[str, str], ...]  # (scheme, FileSystem class)

    def coordinates(self, hadoop_version: str) -> str:
        return self.artifact.format(hadoop=hadoop_version)

    def filesystem(self, scheme: str) -> str:
        return dict(self.filesystems)[scheme]

    @property
    def schemes(self) -> frozenset[str]:
        return frozenset(scheme for scheme, _ in self.filesystems)


S3_CONNECTOR = Connector(
    "hadoop-aws (S3A)",
    "org.apache.hadoop:hadoop-aws:{hadoop}",
    (("s3a", S3A_FILESYSTEM), ("s3", S3A_FILESYSTEM), ("s3n", S3A_FILESYSTEM)),
)
AZURE_CONNECTOR = Connector(
    # Hadoop 3.5's hadoop-azure has ABFS only: its WASB class is a stub that refuses to run.
    "hadoop-azure (ABFS)",
    "org.apache.hadoop:hadoop-azure:{hadoop}",
    (
        ("abfs", "org.apache.hadoop.fs.azurebfs.AzureBlobFileSystem"),
        ("abfss", "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem"),
    ),
)
GCS_CONNECTOR = Connector("Google Cloud Storage connector", GCS_CONNECTOR_ARTIFACT, (("gs", GCS_FILESYSTEM),))
CONNECTORS = (S3_CONNECTOR, AZURE_CONNECTOR, GCS_CONNECTOR)
_BY_SCHEME = {scheme: c for c in CONNECTORS for scheme in c.schemes}
_HADOOP_JAR = re.compile(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar")


def uri_scheme(location: str) -> str | None:
    """The lower-case scheme of a URI; None for a plain path (a one-letter scheme is a Windows drive)."""
    scheme = urlsplit(location).scheme.lower()
    return scheme if len(scheme) > 1 and "://" in location else None


def connector_for(scheme: str) -> Connector | None:
    """The connector that serves ``scheme``; None for schemes Spark's own Hadoop serves (file, hdfs)."""
    return _BY_SCHEME.get(scheme)


def connectors_for(locations: Iterable[str]) -> list[Connector]:
    """The connectors the ``locations`` need, each once, in the table's order."""
    needed = {connector_for(s) for s in map(uri_scheme, locations) if s is not None}
    return [c for c in CONNECTORS if c in needed]


def installed_spark_hadoop_version() -> str | None:
    """The Hadoop version of the pyspark installed here (its ``hadoop-client-api`` jar); None when pyspark is
    not installed or ships no such jar."""
    for jar in installed_spark_jars("hadoop-client-api-*.jar"):
        if matched := _HADOOP_JAR.fullmatch(jar.name):
            return matched.group(1)
    return None


def installed_spark_jars(pattern: str) -> list[Path]:
    """The jars of the pyspark installed here whose names match ``pattern``, found without importing
    pyspark; none when pyspark is not installed."""
    found = importlib.util.find_spec("pyspark")
    folders = (found.submodule_search_locations or []) if found else []
    return sorted(jar for folder in folders for jar in (Path(folder) / "jars").glob(pattern))
