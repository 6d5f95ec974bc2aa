"""Delta Lake's own runtime for the tests and the benchmark: its jars, resolved once into a cache on the
machine, and a SparkSession builder that loads them with Delta's SQL extension and catalog.

The jars are fetched as users fetch them, and as the hook fetches an object store's connector
(``hooks/connector_jars.py``): Spark's own resolver asked for the artifact that delta-spark's
``configure_spark_with_delta_pip`` names for this Spark, with the installed delta-spark's version. Later
sessions load the jars from the cache without any network.

Delta's runtime is not optional in the tests: when the jars cannot be had, ``delta_jars`` raises, and every
test that needs a SparkSession fails with the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_provider_deltamerge.hooks.connector_jars import JarResolutionError, distinct_jars, resolved_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class DeltaRuntimeUnavailable(RuntimeError):
    """Delta's jars could not be resolved: the tests cannot have Delta's runtime, and must fail."""


def delta_coordinates() -> str:
    """The Maven coordinates of Delta's jars for the installed pyspark and delta-spark."""
    import importlib.metadata

    import pyspark

    from airflow_provider_deltamerge.engine.backends.delta_spark import delta_artifact

    try:
        version = importlib.metadata.version("delta-spark")
    except importlib.metadata.PackageNotFoundError as err:
        raise DeltaRuntimeUnavailable(
            "the Python package delta-spark is not installed: the tests need Delta's runtime "
            "(make test installs it; by hand: pip install -c constraints.txt -e '.[dev,delta-spark]')"
        ) from err
    return f"io.delta:{delta_artifact(pyspark.__version__)}:{version}"


def delta_jars() -> list[str]:
    """The paths of Delta's jars and their dependencies, resolved into the cache on first use.

    Raises:
        DeltaRuntimeUnavailable: delta-spark is not installed, or the jars could not be resolved.
    """
    coordinates = delta_coordinates()
    try:
        return resolved_jars(coordinates, announce=_to_stderr)
    except JarResolutionError as err:
        raise DeltaRuntimeUnavailable(str(err)) from err


def with_delta(builder: SparkSession.Builder, *, extra_jars: Sequence[str] = ()) -> SparkSession.Builder:
    """``builder`` with Delta's jars (and ``extra_jars``), its SQL extension and its catalog, as Delta's docs
    tell users."""
    from airflow_provider_deltamerge.engine.backends.delta_spark import (
        CATALOG_CONF,
        DELTA_CATALOG,
        DELTA_EXTENSION,
        EXTENSIONS_CONF,
    )

    return (
        builder.config("spark.jars", ",".join(distinct_jars([*delta_jars(), *extra_jars])))
        .config(EXTENSIONS_CONF, DELTA_EXTENSION)
        .config(CATALOG_CONF, DELTA_CATALOG)
    )


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)
