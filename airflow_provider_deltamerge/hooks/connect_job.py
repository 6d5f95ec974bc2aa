"""Run the merge job against a Spark Connect server, in a child Python process of the Airflow worker.

With a ``spark_connect`` connection nothing is submitted: the job (``job/main.py``, the same entry point
spark-submit runs) starts as ``python -m airflow_provider_deltamerge.job.main`` on the worker and opens a
Connect session to the long-lived server, so a merge pays for no JVM start. A child process, not the
worker's own: pyspark's gRPC client, its session and its threads stay out of the worker, a hung or killed
merge takes only its process with it, and the job's request, answer and exit status are the same files and
codes as under spark-submit. The server's URL (which may carry a token) reaches the child in its
environment, which only the worker's user can read, never on its command line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_deltamerge.hooks.submit_log import SubmitOutputLog
from airflow_provider_deltamerge.job_contract import CONNECT_CONF_ENV, CONNECT_REMOTE_ENV

JOB_MODULE = "airflow_provider_deltamerge.job.main"


class ConnectJob:
    """One run of the job against a Spark Connect server; its output goes to ``logger`` line by line."""

    def __init__(self, url: str, logger: Any) -> None:
        self._url = url
        self.output_log = SubmitOutputLog(logger)
        self._process: subprocess.Popen[str] | None = None

    def run(self, arguments: Sequence[str], *, env: Mapping[str, str], conf: Mapping[str, Any]) -> int:
        """Run the job with ``arguments`` until it ends; its exit status (0: the merge answered success)."""
        child_env = {
            **env,
            CONNECT_REMOTE_ENV: self._url,
            CONNECT_CONF_ENV: json.dumps({k: str(v) for k, v in conf.items()}),
        }
        self._process = subprocess.Popen(
            [sys.executable, "-m", JOB_MODULE, *arguments],
            env=child_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self.output_log.info(line.rstrip("\n"))
        return self._process.wait()

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
