"""Maven artifacts and their dependencies, resolved once per machine into a cache and given to Spark as jars.

A local master gets the object-store connector of the table's scheme this way, with nothing for the user to
do; Delta's runtime reaches the tests the same way. The resolution is Spark's own (``spark-submit
--packages``), reading only Maven's central repository (or the repository a user's Ivy settings name), with a
cache of its own: a half-filled local Maven repository on the machine cannot make it fail, and later merges
load the jars from the cache without any network.

Coordinates with a classifier (``group:artifact:version:shaded``) name a self-contained jar, one that holds
its dependencies: ``--packages`` takes no classifier, so Spark's own Ivy fetches that one jar alone, without
reading its POM (whose parents a partial mirror may not serve).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from airflow_provider_deltamerge.storage_connectors import installed_spark_jars

log = logging.getLogger(__name__)

# Where resolved jars are kept, one folder per artifact and version.
CACHE_ENV = "DELTAMERGE_JAR_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "airflow-provider-deltamerge" / "jars"
# Another Ivy settings file (a company's Maven mirror, say) instead of Maven's central repository.
IVY_SETTINGS_ENV = "DELTAMERGE_IVY_SETTINGS"
# ``m2compatible`` with no root is Maven's central repository, where users' ``--packages`` fetches go too.
IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <caches defaultCacheDir="{cache}"/>
  <resolvers><ibiblio name="central" m2compatible="true"/></resolvers>
</ivysettings>
"""
# The same repository, for a self-contained jar: its POM and dependencies are not read.
JAR_ALONE_SETTINGS = IVY_SETTINGS.replace('m2compatible="true"/>', 'm2compatible="true" usepoms="false"/>')
JAR_ALONE_MODULE = """<ivy-module version="2.0" xmlns:m="http://ant.apache.org/ivy/maven">
  <info organisation="airflow-provider-deltamerge" module="connector"/>
  <dependencies>
    <dependency org="{group}" name="{artifact}" rev="{version}" transitive="false">
      <artifact name="{artifact}" type="jar" ext="jar" m:classifier="{classifier}"/>
    </dependency>
  </dependencies>
</ivy-module>
"""
LISTING = "jars.txt"
# The AWS SDK's bundle alone is about 600 MB; Spark's start and the resolver's own run add half a minute.
RESOLVE_TIMEOUT_S = 1800


class JarResolutionError(RuntimeError):
    """Spark's resolver could not fetch an artifact; the message says which and why."""


def resolved_jars(
    coordinates: str,
    *,
    spark_submit: str = "spark-submit",
    cache: Path | None = None,
    announce: Callable[[str], None] = log.info,
) -> list[str]:
    """The paths of ``coordinates``' jar and its dependencies, resolved into the cache on first use.

    ``announce`` hears, once, that a resolution (a download) starts.

    Raises:
        JarResolutionError: the artifact could not be resolved.
    """
    root = cache or Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)
    folder = root / coordinates.replace(":", "_")
    folder.mkdir(parents=True, exist_ok=True)
    # One resolution at a time per artifact: a second merge on the machine waits for the first's download.
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        jars = _cached(folder)
        if jars is None:
            announce(f"Resolving {coordinates} with its dependencies into {folder} (once per machine)")
            if coordinates.count(":") == 3:
                _fetch_alone(coordinates, folder)
            else:
                _resolve(coordinates, folder, spark_submit)
            jars = _cached(folder)
        if jars is None:
            raise JarResolutionError(f"Spark's resolver left no jars for {coordinates} in {folder}")
    return jars


def distinct_jars(jars: Iterable[str]) -> list[str]:
    """``jars`` without a second jar of the same file name: Spark refuses to register one (two connectors
    resolved apart share dependencies, ``commons-logging`` say), and logs the refusal as an error."""
    seen: set[str] = set()
    kept = []
    for jar in jars:
        name = Path(jar).name
        if name not in seen:
            seen.add(name)
            kept.append(jar)
    return kept


def _cached(folder: Path) -> list[str] | None:
    listing = folder / LISTING
    if not listing.exists():
        return None
    jars = listing.read_text(encoding="utf-8").split()
    return jars if jars and all(Path(jar).is_file() for jar in jars) else None


def _resolve(coordinates: str, folder: Path, spark_submit: str) -> None:
    """Have Spark's resolver fetch ``coordinates`` with their dependencies into ``folder``, then list them."""
    settings = _ivy_settings(folder, IVY_SETTINGS)
    with tempfile.TemporaryDirectory() as work:
        job = Path(work) / "noop.py"
        job.write_text("", encoding="utf-8")
        try:
            done = subprocess.run(
                [
                    spark_submit,
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
                env={**os.environ, "PYSPARK_PYTHON": sys.executable},
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            raise JarResolutionError(f"resolving {coordinates} with spark-submit failed: {err}") from err
    _list_fetched(coordinates, folder, done, "spark-submit")


def _fetch_alone(coordinates: str, folder: Path) -> None:
    """Have the Ivy of the pyspark installed here fetch the self-contained jar of ``coordinates``
    (``group:artifact:version:classifier``) into ``folder``, then list it."""
    group, artifact, version, classifier = coordinates.split(":")
    ivy_jars = installed_spark_jars("ivy-*.jar")
    if not ivy_jars:
        raise JarResolutionError(f"pyspark's jars hold no Ivy to fetch {coordinates} with")
    module = folder / "ivy.xml"
    module.write_text(
        JAR_ALONE_MODULE.format(group=group, artifact=artifact, version=version, classifier=classifier),
        encoding="utf-8",
    )
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else "java"
    retrieve = str(folder / "ivy" / "jars" / "[organisation]_[artifact]-[revision](-[classifier]).[ext]")
    command = [str(java), "-cp", str(ivy_jars[-1]), "org.apache.ivy.Main"]
    command += ["-settings", str(_ivy_settings(folder, JAR_ALONE_SETTINGS)), "-ivy", str(module)]
    try:
        done = subprocess.run(
            [*command, "-retrieve", retrieve],
            capture_output=True,
            text=True,
            timeout=RESOLVE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise JarResolutionError(f"fetching {coordinates} with Ivy failed: {err}") from err
    _list_fetched(coordinates, folder, done, "Ivy")


def _ivy_settings(folder: Path, template: str) -> Path:
    """The user's Ivy settings if they named some, else ``template``'s, written into ``folder``."""
    if user_settings := os.environ.get(IVY_SETTINGS_ENV):
        return Path(user_settings)
    settings = folder / "ivysettings.xml"
    settings.write_text(template.format(cache=folder / "cache"), encoding="utf-8")
    return settings


def _list_fetched(coordinates: str, folder: Path, done: subprocess.CompletedProcess[str], tool: str) -> None:
    """List the jars ``done`` fetched into ``folder`` for later merges, and drop the resolver's caches."""
    jars = sorted(str(jar) for jar in (folder / "ivy" / "jars").glob("*.jar"))
    if done.returncode != 0 or not jars:
        lines = (done.stdout + done.stderr).splitlines()
        problems = [line for line in lines if "download failed" in line or "not found" in line]
        raise JarResolutionError(
            f"Spark's resolver could not fetch {coordinates} ({tool} exit {done.returncode}):\n"
            + "\n".join(problems[:10] or lines[-10:])
        )
    partial = folder / f"{LISTING}.{os.getpid()}"
    partial.write_text("\n".join(jars) + "\n", encoding="utf-8")
    partial.replace(folder / LISTING)
    # The resolver's own cache holds a second copy of every jar (the AWS SDK's bundle alone is 690 MB).
    for cache in (folder / "cache", folder / "ivy" / "cache"):
        shutil.rmtree(cache, ignore_errors=True)
