"""Delta Lake's own runtime for the tests and the benchmark: its jars, resolved once into a cache on the
machine, and a SparkSession builder that loads them with Delta's SQL extension and catalog.

The jars are fetched as users fetch them: Spark's own resolver (``spark-submit --packages``) asked for the
artifact that delta-spark's ``configure_spark_with_delta_pip`` names for this Spark, with the installed
delta-spark's version. The resolver reads only the Maven repository its settings here name, with a cache of
its own, so a half-filled local Maven repository on the machine cannot make it fail. Later sessions load the
jars from the cache without any network.

Delta's runtime is not optional in the tests: when the jars cannot be had, ``delta_jars`` raises, and every
test that needs a SparkSession fails with the reason.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Where the resolved jars are kept, one folder per artifact and version.
CACHE_ENV = "DELTAMERGE_DELTA_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "airflow-provider-deltamerge" / "delta-jars"
# Spark's resolver reads the repository its settings name first; ``m2compatible`` with no root is Maven's
# central repository, which is where users' ``--packages`` fetches go too.
IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <caches defaultCacheDir="{cache}"/>
  <resolvers><ibiblio name="central" m2compatible="true"/></resolvers>
</ivysettings>
"""
LISTING = "jars.txt"
# The resolution downloads about 90 MB once; Spark's start and the resolver's own run add half a minute.
RESOLVE_TIMEOUT_S = 900


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
    folder = Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE) / coordinates.replace(":", "_")
    folder.mkdir(parents=True, exist_ok=True)
    # One resolution at a time: a benchmark started beside the tests waits for the tests' resolution.
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        jars = _cached(folder)
        if jars is None:
            _resolve(coordinates, folder)
            jars = _cached(folder)
        if jars is None:
            raise DeltaRuntimeUnavailable(f"Spark's resolver left no jars for {coordinates} in {folder}")
    return jars


def with_delta(builder: SparkSession.Builder) -> SparkSession.Builder:
    """``builder`` with Delta's jars, its SQL extension and its catalog, as Delta's docs tell users."""
    from airflow_provider_deltamerge.engine.backends.delta_spark import (
        CATALOG_CONF,
        DELTA_CATALOG,
        DELTA_EXTENSION,
        EXTENSIONS_CONF,
    )

    return (
        builder.config("spark.jars", ",".join(delta_jars()))
        .config(EXTENSIONS_CONF, DELTA_EXTENSION)
        .config(CATALOG_CONF, DELTA_CATALOG)
    )


def _cached(folder: Path) -> list[str] | None:
    listing = folder / LISTING
    if not listing.exists():
        return None
    jars = listing.read_text(encoding="utf-8").split()
    return jars if jars and all(Path(jar).is_file() for jar in jars) else None


def _resolve(coordinates: str, folder: Path) -> None:
    """Have Spark's resolver fetch ``coordinates`` with their dependencies into ``folder``, then list them."""
    settings = folder / "ivysettings.xml"
    settings.write_text(IVY_SETTINGS.format(cache=folder / "cache"), encoding="utf-8")
    print(f"Resolving Delta's jars {coordinates} into {folder} (once per machine)", file=sys.stderr)
    with tempfile.TemporaryDirectory() as work:
        job = Path(work) / "noop.py"
        job.write_text("", encoding="utf-8")
        try:
            done = subprocess.run(
                [
                    "spark-submit",
                    "--master",
                    "local[1]",
                    "--packages",
                    coordinates,
                    "--conf",
                    f"spark.jars.ivySettings={settings}",
                    "--conf",
                    f"spark.jars.ivy={folder / 'ivy'}",
                    "--conf",
                    "spark.ui.enabled=false",
                    str(job),
                ],
                capture_output=True,
                text=True,
                timeout=RESOLVE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            raise DeltaRuntimeUnavailable(f"resolving {coordinates} with spark-submit failed: {err}") from err
    jars = sorted(str(jar) for jar in (folder / "ivy" / "jars").glob("*.jar"))
    if done.returncode != 0 or not jars:
        lines = done.stderr.splitlines()
        problems = [line for line in lines if "download failed" in line or "not found" in line]
        raise DeltaRuntimeUnavailable(
            f"Spark's resolver could not fetch {coordinates} (spark-submit exit {done.returncode}):\n"
            + "\n".join(problems[:10] or lines[-10:])
        )
    partial = folder / f"{LISTING}.{os.getpid()}"
    partial.write_text("\n".join(jars) + "\n", encoding="utf-8")
    partial.replace(folder / LISTING)
