"""What the engine's SparkSession can do: a classic session (spark-submit, a driver JVM reached through py4j)
or a Spark Connect client (a gRPC client of a long-lived server: no JVM, no RDDs, no SparkContext).

The engine asks this module, never the session's private attributes, wherever the two kinds differ; each
answer costs a classic session what it cost before (the benchmark counts its py4j round trips).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyspark.sql import SparkSession

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
# Spark's own defaults of the memory confs a Connect client reads in place of the JVM's heap.
_DEFAULT_MEMORY = "1g"


def is_connect(spark: SparkSession | Any) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no JVM in this process)."""
    # By module, not isinstance: importing pyspark.sql.connect needs grpc, which a classic job need not load.
    return type(spark).__module__.startswith("pyspark.sql.connect")


def conf_keys(spark: SparkSession) -> list[str]:
    """The keys of every conf set on the session."""
    if is_connect(spark):
        return list(spark.conf.getAll)
    # The keys as one string: spark.conf.getAll converts the JVM's map entry by entry, a round trip each.
    return list(spark._jsparkSession.conf().getAll().keys().mkString("\n").splitlines())


def heap_bytes(spark: SparkSession) -> int:
    """The smaller of the driver's and (on a cluster) an executor's heap, in bytes.

    A classic session asks its own JVM; a Connect client cannot, and takes ``spark.driver.memory`` and
    ``spark.executor.memory`` as the server reports them (Spark's 1g where unset).
    """
    if is_connect(spark):
        sizes = [spark.conf.get(key, _DEFAULT_MEMORY) or _DEFAULT_MEMORY for key in _MEMORY_KEYS]
        return min(byte_size(size) for size in sizes)
    jvm: Any = spark._jvm
    heap = int(jvm.java.lang.Runtime.getRuntime().maxMemory())
    if not str(spark.sparkContext.master).startswith("local"):
        executor = spark.sparkContext.getConf().get("spark.executor.memory", _DEFAULT_MEMORY)
        heap = min(heap, int(jvm.org.apache.spark.network.util.JavaUtils.byteStringAsBytes(executor)))
    return heap


_MEMORY_KEYS = ("spark.driver.memory", "spark.executor.memory")


def byte_size(text: str) -> int:
    """A JVM memory string (``512m``, ``4g``, ``1073741824``) in bytes, as Spark reads it (binary units)."""
    found = _SIZE.match(text)
    if found is None:
        raise ValueError(f"not a memory size: {text!r}")
    return int(found.group(1)) * _UNITS[found.group(2).lower()]


@contextmanager
def session_confs_set(spark: SparkSession, values: Mapping[str, str]) -> Iterator[None]:
    """Set session confs for the ``with`` block, then restore each one's previous value (or unset it)."""
    previous = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, earlier in previous.items():
            if earlier is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, earlier)
