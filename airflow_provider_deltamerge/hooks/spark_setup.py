"""Where a merge job runs: the Spark connection (this machine's Spark when none is set) and ``spark-submit``.

The Spark provider falls back to YARN when its connection is missing and expects ``spark-submit`` on PATH;
on a fresh Airflow with pyspark installed neither holds, and the first merge failed with Hadoop's or the
shell's words. Here the default connection falls back to ``local[*]`` instead, and ``spark-submit`` is
also looked for beside the installed pyspark; what cannot be found fails with what to set.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import DEFAULT_SPARK_BINARY, SparkSubmitHook
from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowNotFoundException,
    BaseHook,
    Connection,
)

from airflow_provider_deltamerge.hooks.submit_log import SubmitOutputLog

DEFAULT_CONN_ID = "spark_default"
LOCAL_MASTER = "local[*]"
CONNECTION_EXAMPLE = '\'{"conn_type": "spark", "host": "spark://HOST:7077"}\''
# spark-submit reads $SPARK_CONF_DIR/spark-defaults.conf only when no --properties-file is given; with this
# flag (Spark 4) it reads both, the file's keys winning.
LOAD_SPARK_DEFAULTS = "--load-spark-defaults"


def spark_connection(conn_id: str) -> Connection:
    """The Spark connection ``conn_id``; the default one, when not defined, runs Spark on this worker.

    Raises:
        AirflowException: a connection named on purpose (not the default) does not exist.
    """
    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException as err:
        if conn_id != DEFAULT_CONN_ID:
            variable = f"AIRFLOW_CONN_{conn_id.upper()}"
            raise AirflowException(
                f"The Spark connection {conn_id!r} is not defined. Create it (Admin > Connections, type "
                f"Spark, host local[*] or spark://HOST:7077) or set the environment variable {variable}="
                f"{CONNECTION_EXAMPLE}; or leave spark_conn_id at its default to run Spark on this worker."
            ) from err
        return Connection(conn_id=conn_id, conn_type="spark", host=LOCAL_MASTER)


def is_local_default(connection: Connection) -> bool:
    """Whether ``connection`` is the stand-in for an undefined default connection."""
    return connection.conn_id == DEFAULT_CONN_ID and connection.host == LOCAL_MASTER and not connection.extra


def spark_submit_binary(name: str | None) -> str | None:
    """The spark-submit to run: None when ``name`` (default ``spark-submit``) is found on PATH, which is how
    SparkSubmitHook runs it; else the one installed with pyspark.

    Raises:
        AirflowException: no spark-submit anywhere, with the ways to provide one.
    """
    wanted = name or DEFAULT_SPARK_BINARY
    if shutil.which(wanted):
        return None
    for folder in _pyspark_bin_folders():
        candidate = folder / Path(wanted).name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise AirflowException(
        f"{wanted} is not on this worker's PATH and no pyspark is installed beside Airflow "
        f"({sys.executable}). Install pyspark into Airflow's Python environment, put Spark's bin folder on "
        "the PATH of the Airflow worker, or give its full path as "
        "spark_submit_kwargs={'spark_binary': '/opt/spark/bin/spark-submit'}."
    )


def _pyspark_bin_folders() -> list[Path]:
    """Where pip puts spark-submit: pyspark's own ``bin`` and the environment's (found without importing
    pyspark, which the Airflow side need not have)."""
    folders = []
    found = importlib.util.find_spec("pyspark")
    if found is not None and found.submodule_search_locations:
        folders += [Path(location) / "bin" for location in found.submodule_search_locations]
    return [*folders, Path(sys.executable).parent]


class JobSubmitHook(SparkSubmitHook):
    """SparkSubmitHook as the merge job needs it: an undefined default connection means ``local[*]`` rather
    than YARN, and spark-submit's output reaches the task log at each line's own level."""

    _output_log: SubmitOutputLog | None = None

    @classmethod
    def get_connection(cls, conn_id: str) -> Any:
        return spark_connection(conn_id)

    @property
    def log(self) -> Any:
        if self._output_log is None:
            self._output_log = SubmitOutputLog(super().log)
        return self._output_log

    @property
    def output_log(self) -> SubmitOutputLog | None:
        """What spark-submit's output has said so far (its UI, tracking URL, start); None before any line."""
        return self._output_log

    def _build_spark_common_args(self) -> list[str]:
        """The provider's options, plus ``--load-spark-defaults`` beside a ``--properties-file``: the hook
        passes one for credentials and private conf, and the cluster's packages, endpoints and event log
        settings in spark-defaults.conf must keep applying to those merges too."""
        args: list[str] = super()._build_spark_common_args()
        if self._properties_file:
            args.insert(args.index("--properties-file"), LOAD_SPARK_DEFAULTS)
        return args
