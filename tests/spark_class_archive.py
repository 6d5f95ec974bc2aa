"""One class-data archive of Spark's JVM for the test session, which every JVM the tests start maps.

A short Spark job on two cores spends about a third of its ten seconds in the JVM loading and verifying
Spark's classes, and the suite starts well over a hundred: the SparkSession of the tests' own process, every
``spark-submit`` of a merge job, every Airflow task's. Before the first of them, the session has one small
Spark job (parquet written and read, a join, an aggregation) dump the classes it loaded into a dynamic
class-data sharing archive (the JDK's ``-XX:ArchiveClassesAtExit``); ``SPARK_SUBMIT_OPTS`` then hands it
to every ``spark-submit`` started from here. It changes how the JVM finds classes, nothing Spark or the
merge does, and a JVM whose class path differs from the archive's ignores it (``-Xshare:auto``, the
default) and runs as before.

The archive is kept in a private folder under the temporary directory, named by the Java and Spark jars it
was made with, so later sessions on the same machine reuse it; a new one replaces it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

JOB = """
import sys

from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
rows = spark.range(2000).selectExpr("id", "id % 7 AS k", "CAST(id AS STRING) AS s")
rows.write.mode("overwrite").parquet(sys.argv[1])
back = spark.read.parquet(sys.argv[1])
back.join(back.groupBy("k").count(), "k").where("s IS NOT NULL").collect()
spark.stop()
"""
OPTS = "SPARK_SUBMIT_OPTS"


def share_spark_classes() -> str | None:
    """Point ``SPARK_SUBMIT_OPTS`` at the session's archive, dumping it first if needed; what went wrong
    when no archive could be made (the tests then run without one)."""
    spark_submit = shutil.which("spark-submit")
    java = shutil.which("java")
    if spark_submit is None or java is None:
        return "no spark-submit or java on PATH"
    folder = Path(tempfile.gettempdir()) / f"deltamerge-tests-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.stat().st_uid != os.getuid() or folder.stat().st_mode & 0o077:
        return f"{folder} is not a private folder of this user: a JVM would load code from it"
    archive = folder / f"spark-classes-{_made_with(java)}.jsa"
    if not archive.exists():
        failure = _dump(spark_submit, folder, archive)
        if failure:
            return failure
    # A JVM whose class path differs from the archive's (a test's extra jars) says so on its standard output,
    # which would land in the middle of a task's log: it runs without the archive, silently.
    shared = f"-XX:SharedArchiveFile={archive} -Xlog:cds=off,cds+dynamic=off"
    add_submit_options(shared)
    return None


def add_submit_options(options: str) -> None:
    """Append ``options`` to ``SPARK_SUBMIT_OPTS`` unless they are there: an xdist worker inherits the
    options its controller set."""
    if options not in os.environ.get(OPTS, ""):
        os.environ[OPTS] = f"{os.environ.get(OPTS, '')} {options}".strip()


def _made_with(java: str) -> str:
    """A name for the Java runtime and Spark's jars an archive holds classes of: the jars' folder by its
    path too, which the JVM checks against the class path it runs with."""
    import pyspark

    version = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    jars = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent) / "jars"
    listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar"))
    made_with = "\n".join([version, str(jars.resolve()), *listing])
    return hashlib.sha256(made_with.encode()).hexdigest()[:16]


def _dump(spark_submit: str, folder: Path, archive: Path) -> str | None:
    """Run the small job with the archive dumped at its JVM's exit, under a temporary name renamed in
    place: a session running beside this one never maps half an archive."""
    partial = folder / f"{archive.stem}.{os.getpid()}.partial"
    with tempfile.TemporaryDirectory(dir=folder) as work:
        job = Path(work) / "classes_job.py"
        job.write_text(JOB)
        env = {**os.environ, OPTS: f"{os.environ.get(OPTS, '')} -XX:ArchiveClassesAtExit={partial}".strip()}
        done = subprocess.run(
            [
                spark_submit,
                "--master",
                "local[2]",
                "--conf",
                "spark.ui.enabled=false",
                str(job),
                str(Path(work) / "rows"),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        return f"the archive job failed (exit {done.returncode}): {done.stderr[-500:]}"
    partial.replace(archive)
    # One archive kept (173 MB): a JVM that still maps an older one keeps its pages after the unlink.
    for older in folder.glob("spark-classes-*.jsa"):
        if older != archive:
            older.unlink(missing_ok=True)
    return None
