"""The driver's memory: the Python process's resident set and the JVM's heap, read around engine runs.

In ``local`` mode the JVM is driver and executors at once, so its heap also holds the executors' work;
the Python process is the driver's own share, which must not grow with the table.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession


@dataclass(frozen=True)
class DriverMemory:
    """Bytes: Python resident set now and at its peak so far, JVM heap peak since the last reset."""

    python_rss: int
    python_peak_rss: int
    jvm_heap_peak: int


def python_rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _heap_pools(spark: SparkSession) -> list[Any]:
    jvm: Any = spark._jvm
    pools = jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
    return [pool for pool in pools if pool.getType().toString() == "Heap memory"]


def reset_jvm_peaks(spark: SparkSession) -> None:
    for pool in _heap_pools(spark):
        pool.resetPeakUsage()


def driver_memory(spark: SparkSession) -> DriverMemory:
    """The driver's memory now; the JVM figure sums each heap pool's peak since ``reset_jvm_peaks``."""
    return DriverMemory(
        python_rss=python_rss(),
        python_peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        jvm_heap_peak=sum(pool.getPeakUsage().getUsed() for pool in _heap_pools(spark)),
    )
