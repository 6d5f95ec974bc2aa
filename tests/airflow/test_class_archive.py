"""The JVM class archive of spark-submit jobs (hooks/class_archive.py): dumped by a worker's second job,
mapped by the next, never in the way. The options go to a real JVM (``java -version``), which must accept
them."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from airflow_provider_deltamerge.hooks.class_archive import SUBMIT_OPTS, class_archive

MARKER = "merged-here"  # the file that says a worker has merged before


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A worker's environment with a cache folder of its own and no archive options of the user's."""
    return {
        "PATH": str(Path(shutil.which("java") or "java").parent),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }


def run_java(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """``java -version`` with the job's ``SPARK_SUBMIT_OPTS`` as its options."""
    java = shutil.which("java")
    assert java is not None, "the tests need a Java runtime on PATH"
    options = shlex.split(env[SUBMIT_OPTS])
    return subprocess.run([java, *options, *extra, "-version"], capture_output=True, text=True, check=False)


def test_a_worker_s_first_job_leaves_the_jvm_alone(env: dict[str, str]) -> None:
    # A worker that runs one merge and goes (a pod per task) never pays for dumping an archive.
    archive = class_archive(env)
    assert archive is not None
    assert archive.job_env(env) == env
    archive.keep(succeeded=True)
    assert not archive.archive.exists()


def test_the_second_job_dumps_the_archive_and_the_next_maps_it(env: dict[str, str]) -> None:
    # Given: a worker that merged before, and no archive yet
    assert class_archive(env) is not None
    first = class_archive(env)
    assert first is not None and not first.archive.exists()
    # When: a job's JVM runs with the options and ends well
    dumping = first.job_env(env)
    assert run_java(dumping).returncode == 0
    first.keep(succeeded=True)
    # Then: the archive is in the private cache folder, under its final name only
    assert first.archive.exists()
    assert sorted(p.name for p in first.archive.parent.iterdir()) == sorted(
        [first.archive.name, "merged-here"]
    )
    assert first.archive.parent.stat().st_mode & 0o777 == 0o700
    # And: the next job maps it, which a JVM told to use it or fail (-Xshare:on) accepts
    second = class_archive(env)
    assert second is not None and second.archive == first.archive
    mapping = second.job_env(env)
    assert f"-XX:SharedArchiveFile={first.archive}" in mapping[SUBMIT_OPTS]
    used = run_java(mapping, "-Xshare:on")
    assert used.returncode == 0, used.stderr
    second.keep(succeeded=True)
    assert first.archive.exists()


def test_a_failed_job_leaves_no_archive(env: dict[str, str]) -> None:
    assert class_archive(env) is not None
    archive = class_archive(env)
    assert archive is not None
    assert run_java(archive.job_env(env)).returncode == 0
    # When: the job failed (its JVM may have died while writing)
    archive.keep(succeeded=False)
    # Then: nothing is kept; the next job dumps again
    assert [p.name for p in archive.archive.parent.iterdir()] == [MARKER]


@pytest.mark.parametrize(
    "users_opts",
    ["-XX:SharedArchiveFile=/opt/own.jsa", "-Xshare:off", "-Dx=1 -XX:ArchiveClassesAtExit=/tmp/x.jsa"],
)
def test_the_users_own_sharing_options_are_left_alone(env: dict[str, str], users_opts: str) -> None:
    assert class_archive({**env, SUBMIT_OPTS: users_opts}) is None


def test_the_users_other_options_are_kept(env: dict[str, str]) -> None:
    assert class_archive(env) is not None
    archive = class_archive({**env, SUBMIT_OPTS: "-Dfoo=bar"})
    assert archive is not None
    assert archive.job_env({**env, SUBMIT_OPTS: "-Dfoo=bar"})[SUBMIT_OPTS].startswith("-Dfoo=bar -XX:")


def test_no_private_cache_folder_means_no_archive(env: dict[str, str], tmp_path: Path) -> None:
    # Given: cache folders others can write to (the archive's own, or its parent), and one that cannot be
    # made (a file stands in its place)
    shared = tmp_path / "shared"
    (shared / "airflow-provider-deltamerge" / "jvm-classes").mkdir(parents=True)
    (shared / "airflow-provider-deltamerge" / "jvm-classes").chmod(0o755)
    open_parent = tmp_path / "open-parent"
    (open_parent / "airflow-provider-deltamerge").mkdir(parents=True)
    (open_parent / "airflow-provider-deltamerge").chmod(0o777)
    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder")
    # Then: the job runs without an archive, as before
    for cache in (shared, open_parent, blocked):
        assert class_archive({**env, "XDG_CACHE_HOME": str(cache)}) is None


def test_a_shared_cache_parent_of_this_user_is_fine(env: dict[str, str], tmp_path: Path) -> None:
    # Given: the provider's cache folder made readable to all by another of its users (Delta's jars)
    (tmp_path / "cache" / "airflow-provider-deltamerge").mkdir(parents=True, mode=0o755)
    # Then: the archive gets a private folder of its own inside it
    archive = class_archive(env)
    assert archive is not None
    assert archive.archive.parent.stat().st_mode & 0o777 == 0o700


def test_no_java_means_no_archive(env: dict[str, str], tmp_path: Path) -> None:
    assert class_archive({**env, "PATH": str(tmp_path)}) is None
