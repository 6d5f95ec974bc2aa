"""The JIT options of a merge job's driver (hooks/driver_jit.py): a real JVM takes them and runs with C2's
thresholds raised; a user's own choice of how to compile is left alone."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

import pytest

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.hooks.class_archive import SUBMIT_OPTS
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.hooks.driver_jit import driver_jit_env
from airflow_provider_deltamerge.hooks.submit_log import SubmitOutputLog
from tests.conftest import SHORT_LIVED_JVM, make_table, upsert_from_extract

# A line of -XX:+PrintFlagsFinal's table: "intx Tier4InvocationThreshold = 5000 {product} {default}".
FLAG = r"\b(Tier4\w+)\s+= (\d+)"
C2_THRESHOLDS = (
    "Tier4InvocationThreshold",
    "Tier4MinInvocationThreshold",
    "Tier4CompileThreshold",
    "Tier4BackEdgeThreshold",
)


def final_flags(opts: str) -> dict[str, str]:
    """The JVM's own values of its Tier4 thresholds when started with ``opts``."""
    java = shutil.which("java")
    assert java is not None, "the tests need a Java runtime on PATH"
    command = [java, *shlex.split(opts), "-XX:+PrintFlagsFinal", "-version"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return dict(re.findall(FLAG, done.stdout))


@pytest.mark.parametrize("users", ["", "-Dsome.property=1"])
def test_the_driver_runs_with_c2_later_and_the_other_options_kept(users: str) -> None:
    env = {"PATH": "/usr/bin", SUBMIT_OPTS: users}

    job_env = driver_jit_env(env)

    assert job_env["PATH"] == "/usr/bin"
    assert job_env[SUBMIT_OPTS].endswith(users)
    assert_c2_later(final_flags(job_env[SUBMIT_OPTS]))


def assert_c2_later(flags: dict[str, str]) -> None:
    """Each of C2's four thresholds at ten times the JVM's default."""
    defaults = final_flags("")
    assert set(flags) >= set(C2_THRESHOLDS)
    for flag in C2_THRESHOLDS:
        assert int(flags[flag]) == 10 * int(defaults[flag]), flag


@pytest.mark.slow
def test_a_merge_s_driver_runs_with_c2_later(tmp_path, local_spark_connection, monkeypatch) -> None:
    # The tests give every JVM C1 alone, a choice the hook leaves alone: here the driver runs as a user's
    # does, and prints the flags it really runs with among spark-submit's lines, which are recorded as the
    # hook reads them (the task log has them at DEBUG, as all of Spark's start-up).
    lines: list[str] = []
    level_of = SubmitOutputLog.level_of
    monkeypatch.setattr(
        SubmitOutputLog, "level_of", lambda self, line: (lines.append(line), level_of(self, line))[1]
    )
    opts = os.environ.get(SUBMIT_OPTS, "").replace(SHORT_LIVED_JVM, "")
    monkeypatch.setenv(SUBMIT_OPTS, f"{opts} -XX:+PrintFlagsFinal")
    target = make_table(tmp_path / "orders")
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 7, "us"), (42, 8, "eu")])

    metrics = DeltaMergeHook(local_spark_connection).run_merge(spec)

    assert (metrics[m.NUM_TARGET_ROWS_UPDATED], metrics[m.NUM_TARGET_ROWS_INSERTED]) == (1, 1)
    assert_c2_later(dict(re.findall(FLAG, "\n".join(lines))))


@pytest.mark.parametrize(
    "own", ["-XX:TieredStopAtLevel=1", "-XX:-TieredCompilation", "-XX:Tier4InvocationThreshold=1000", "-Xint"]
)
def test_a_users_own_jit_choice_is_left_alone(own: str) -> None:
    env = {SUBMIT_OPTS: f"-Xmx2g {own}"}

    assert driver_jit_env(env) == env
