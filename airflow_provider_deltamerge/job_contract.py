"""What the Airflow side and the Spark job agree on, in a module that imports nothing: the job's arguments,
its start line, the confs its session starts with.

The job (``job/main.py``) imports this before its SparkSession starts, and the rest of the package (sqlglot,
pyarrow, deltalake: seconds of imports) while the session starts.
"""

from __future__ import annotations

REQUEST_FILE_ARG = "--request-file"
ANSWER_FILE_ARG = "--answer-file"
# The job's line once its SparkSession is up: the task log treats Spark's output before it as start-up.
SPARK_STARTED = "Spark started"
# How that line names the Spark UI's address, which the task's "Spark application" link points at.
SPARK_UI = "UI at"

# The job's SparkSession starts with these (static confs: they cannot change once a session runs).
# PySpark's DataFrame debugging records the Python call site of every DataFrame and Column call in the JVM:
# about ten extra JVM round trips per call, so the thousands of calls the engine makes to build one merge's
# queries cost three times what they need, and the call sites it records only ever point into the engine.
ENGINE_SESSION_CONF: dict[str, bool | float | int | str | None] = {
    "spark.python.sql.dataFrameDebugging.enabled": "false"
}
