"""A real Spark Connect server, started from the installed pyspark once per test session."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 180


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``sc://127.0.0.1:<port>`` of a local Spark Connect server, up until the session's end."""
    home = Path(pyspark.__file__).parent
    port = _free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                str(home / "bin" / "spark-submit"),
                "--master",
                "local[2]",
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
            env={**os.environ, "SPARK_HOME": str(home)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while f"started at: 127.0.0.1:{port}" not in log.read_text():
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"The Spark Connect server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=60)
