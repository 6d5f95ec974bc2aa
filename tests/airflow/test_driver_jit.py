"""The JIT options of a merge job's driver (hooks/driver_jit.py): a real JVM takes them and runs with C2's
thresholds raised; a user's own choice of how to compile is left alone."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest

from airflow_provider_deltamerge.hooks.class_archive import SUBMIT_OPTS
from airflow_provider_deltamerge.hooks.driver_jit import driver_jit_env


def final_flags(opts: str) -> dict[str, str]:
    """The JVM's own values of its Tier4 thresholds when started with ``opts``."""
    java = shutil.which("java")
    assert java is not None, "the tests need a Java runtime on PATH"
    command = [java, *shlex.split(opts), "-XX:+PrintFlagsFinal", "-version"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return dict(re.findall(r"\b(Tier4\w+)\s+= (\d+)", done.stdout))


def test_the_driver_runs_with_c2_later_and_the_other_options_kept() -> None:
    env = {"PATH": "/usr/bin", SUBMIT_OPTS: "-Dsome.property=1"}

    job_env = driver_jit_env(env)

    assert job_env["PATH"] == "/usr/bin"
    assert job_env[SUBMIT_OPTS].endswith("-Dsome.property=1")
    defaults, raised = final_flags(""), final_flags(job_env[SUBMIT_OPTS])
    for flag in ("Tier4InvocationThreshold", "Tier4CompileThreshold", "Tier4BackEdgeThreshold"):
        assert int(raised[flag]) == 10 * int(defaults[flag]), flag


def test_without_options_of_the_user_only_the_jit_s_are_set() -> None:
    assert driver_jit_env({})[SUBMIT_OPTS].split() == [
        "-XX:Tier4InvocationThreshold=50000",
        "-XX:Tier4MinInvocationThreshold=6000",
        "-XX:Tier4CompileThreshold=150000",
        "-XX:Tier4BackEdgeThreshold=400000",
    ]


@pytest.mark.parametrize(
    "own", ["-XX:TieredStopAtLevel=1", "-XX:-TieredCompilation", "-XX:Tier4InvocationThreshold=1000", "-Xint"]
)
def test_a_users_own_jit_choice_is_left_alone(own: str) -> None:
    env = {SUBMIT_OPTS: f"-Xmx2g {own}"}

    assert driver_jit_env(env) == env
