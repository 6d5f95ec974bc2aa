"""A storage server the tests start: installed once per machine into a cache, then a process of its own on a
free port of 127.0.0.1, its output in a log, stopped (and, if it will not stop, killed) when the test
session ends."""

from __future__ import annotations

import fcntl
import socket
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

CACHE = Path.home() / ".cache" / "airflow-provider-deltamerge" / "test-servers"


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
