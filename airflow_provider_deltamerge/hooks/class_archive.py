"""A class-data sharing archive of Spark's JVM for the merge jobs this worker submits.

A small merge by spark-submit spends a good part of its JVM's start loading and verifying Spark's classes.
The JDK (13 and later) maps them from an archive instead when one is given (``-XX:SharedArchiveFile``); a
JVM dumps one of the classes it loaded as it exits (``-XX:ArchiveClassesAtExit``). So the first client-mode
job of a worker dumps one into a private cache folder, and every later job maps it. It changes how the JVM
finds classes, nothing Spark or the merge does; a JVM whose Java or class path differs from the archive's
runs without it (``-Xshare:auto``, the default), silently. A worker's very first merge only notes that it ran
there: dumping costs its job seconds at exit, which a worker that runs one merge and goes (a Kubernetes pod
per task, a fresh container) would pay on every merge for nothing. The second merge of a worker dumps it.

The archive is named by the Java runtime and Spark's jars it was made with; a new one replaces it. Nothing
here can fail a merge: without a private cache folder, a Java or Spark's jars to name the archive by, the
job runs as it always did. A ``SPARK_SUBMIT_OPTS`` that already names an archive, or turns sharing off, is
the user's choice and left alone.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
# A JVM that cannot use the archive says so on its standard output, in the middle of the task's log.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
USERS_OWN = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare:off")


class ClassArchive:
    """The archive for one job: the ``SPARK_SUBMIT_OPTS`` that map it (or dump it), and ``keep`` after the
    job, which puts a dumped archive in place for the next ones."""

    def __init__(self, archive: Path, *, dump: bool) -> None:
        self.archive = archive
        self._dump = dump
        self._dumped: Path | None = None

    def job_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with ``SPARK_SUBMIT_OPTS`` mapping the archive, or dumping it when there is none yet and
        this worker has merged before; else ``env`` as it is."""
        if self.archive.exists():
            option = f"-XX:SharedArchiveFile={self.archive}"
        elif not self._dump:
            return dict(env)
        else:
            # A name of its own, renamed in place by ``keep``: a job beside it never maps half an archive.
            self._dumped = self.archive.with_name(f"{self.archive.stem}.{os.getpid()}.{id(self)}.partial")
            option = f"-XX:ArchiveClassesAtExit={self._dumped}"
        return {**env, SUBMIT_OPTS: " ".join(filter(None, [env.get(SUBMIT_OPTS, ""), option, QUIET]))}

    def keep(self, *, succeeded: bool) -> None:
        """After the job: a complete dumped archive replaces any older one; one from a failed job, whose
        JVM may have died while writing it, is deleted."""
        if self._dumped is None or not self._dumped.exists():
            return
        if not succeeded or self._dumped.stat().st_size == 0:
            self._dumped.unlink(missing_ok=True)
            return
        self._dumped.replace(self.archive)
        # One archive kept (some 170 MB): a JVM that still maps an older one keeps its pages after the unlink.
        for older in self.archive.parent.glob("spark-classes-*.jsa"):
            if older != self.archive:
                older.unlink(missing_ok=True)


def class_archive(env: Mapping[str, str]) -> ClassArchive | None:
    """The archive for a client-mode job started with ``env``; None when the user chose otherwise or
    there is nowhere safe to keep one."""
    if any(option in env.get(SUBMIT_OPTS, "") for option in USERS_OWN):
        return None
    folder = cache_folder(env)
    made_with = _made_with(env)
    if folder is None or made_with is None:
        return None
    merged_here = folder / "merged-here"
    dump = merged_here.exists()
    merged_here.touch()
    return ClassArchive(folder / f"spark-classes-{made_with}.jsa", dump=dump)


def cache_folder(env: Mapping[str, str]) -> Path | None:
    """This user's private folder for the archive, under ``$XDG_CACHE_HOME`` or ``~/.cache``; None when it
    cannot be made, or it or its parent is not this user's alone to change: a JVM loads code from it."""
    base = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    folder = Path(base) / "airflow-provider-deltamerge" / "jvm-classes"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        found, parent = folder.stat(), folder.parent.stat()
    except OSError:
        return None
    if found.st_uid != os.getuid() or found.st_mode & 0o077:
        return None
    if parent.st_uid != os.getuid() or parent.st_mode & 0o022:
        return None
    return folder


def _made_with(env: Mapping[str, str]) -> str | None:
    """A name for the Java runtime and Spark's jars (by path, size and time; the JVM checks the class path
    it runs with against the archive's too), found as ``spark-submit`` finds them; None without either."""
    java_home = env.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java", path=env.get("PATH"))
    jars = _spark_jars(env)
    if java is None or jars is None:
        return None
    try:
        runtime = Path(java).resolve()
        listing = [f"{runtime}:{runtime.stat().st_mtime_ns}", str(jars.resolve())]
        listing += sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar"))
    except OSError:
        return None
    return hashlib.sha256("\n".join(listing).encode()).hexdigest()[:16]


def _spark_jars(env: Mapping[str, str]) -> Path | None:
    """Spark's jars: ``$SPARK_HOME/jars``, else the installed pyspark's (found without importing it)."""
    if env.get("SPARK_HOME"):
        return Path(env["SPARK_HOME"]) / "jars"
    found = importlib.util.find_spec("pyspark")
    if found is None or not found.submodule_search_locations:
        return None
    return Path(next(iter(found.submodule_search_locations))) / "jars"
