"""A local Spark Connect server started from the installed pyspark, for the overhead benchmark and tests."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 180
# The variable Spark's Connect server reads its pre-shared token from (pyspark's own local server sets it).
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"


@dataclass(frozen=True)
class ConnectServer:
    """A running server: where it listens, the token it demands, and the seconds it took to start."""

    host: str
    port: int
    token: str
    startup_seconds: float

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}/;token={self.token}"


class ConnectServerError(RuntimeError):
    """The server did not start; the message ends with its log's last lines."""


@contextmanager
def connect_server(log: Path, *, token: str, master: str = "local[2]") -> Iterator[ConnectServer]:
    """A Spark Connect server on a free port of this machine, up until the block ends.

    It listens on localhost only and demands ``token``: pyspark sends a token over a plain channel to
    ``localhost`` alone, so the URL names the host that way.
    """
    home = Path(pyspark.__file__).parent
    port = _free_port()
    start = time.perf_counter()
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                str(home / "bin" / "spark-submit"),
                "--master",
                master,
                "--class",
                CONNECT_SERVER_CLASS,
                "--conf",
                f"spark.connect.grpc.binding.port={port}",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                "spark.ui.enabled=false",
                "spark-internal",
            ],
            env={**os.environ, "SPARK_HOME": str(home), TOKEN_ENV: token},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while f"started at: 127.0.0.1:{port}" not in log.read_text():
            if server.poll() is not None or time.monotonic() > deadline:
                raise ConnectServerError(
                    f"The Spark Connect server did not start:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.2)
        yield ConnectServer("localhost", port, token, time.perf_counter() - start)
    finally:
        server.terminate()
        server.wait(timeout=60)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server_for(
    ways: Sequence[str], work: Path, progress: Callable[[str], None]
) -> Iterator[ConnectServer | None]:
    """A warm Connect server on ``local[*]`` (its start reported) when ``ways`` has ``connect``, else None;
    the benchmarks' ways to merge (bench/overhead.py, bench/first_dag.py)."""
    if "connect" not in ways:
        yield None
        return
    with connect_server(
        work / "connect-server.log", token=f"bench-{uuid.uuid4().hex}", master="local[*]"
    ) as server:
        progress(f"Spark Connect server started in {server.startup_seconds:.1f} s")
        yield server


def connection_of(server: ConnectServer) -> dict[str, object]:
    """Airflow's ``spark_connect`` connection to ``server``, as ``AIRFLOW_CONN_<ID>`` holds it."""
    return {"conn_type": "spark_connect", "host": server.host, "port": server.port, "password": server.token}
