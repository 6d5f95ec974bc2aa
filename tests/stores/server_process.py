"""A storage server the tests start: installed once per machine into a cache, then a process of its own on a
free port of 127.0.0.1, its output in a log, stopped (and, if it will not stop, killed) when the test
session ends."""

from __future__ import annotations

import fcntl
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

CACHE = Path.home() / ".cache" / "airflow-provider-deltamerge" / "test-servers"
START_TIMEOUT_S = 60


def installed_once(product: Path, install: list[str], what: str) -> Path:
    """``product`` (a file in the cache), made by running ``install`` if it is not there yet; one install at
    a time per machine.

    Raises:
        RuntimeError: the install failed, with the end of its output.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{product.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not product.is_file():
            done = subprocess.run(install, capture_output=True, text=True, check=False)
            if done.returncode != 0 or not product.is_file():
                raise RuntimeError(f"Could not install {what}:\n{(done.stdout + done.stderr)[-3000:]}")
    return product


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server_process(
    command: list[str], log: Path, *, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` running, its output in ``log``, until the block ends."""
    with log.open("wb") as out:
        server = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
    try:
        yield server
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def wait_until_up(server: subprocess.Popen[bytes], log: Path, name: str, probe: Callable[[], object]) -> None:
    """Return once ``probe`` runs without an ``OSError`` (the server answers).

    Raises:
        RuntimeError: the server exited first, with the end of its ``log``.
        TimeoutError: it did not answer within ``START_TIMEOUT_S``.
    """
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"{name} exited ({server.returncode}):\n{_end_of(log)}")
        try:
            probe()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{name} did not answer within {START_TIMEOUT_S} s:\n{_end_of(log)}")


def _end_of(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]
