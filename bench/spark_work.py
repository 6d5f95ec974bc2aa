"""The Spark jobs and SQL queries a contender ran: the work a merge asks of Spark, counted, not timed.

A small merge's time is mostly what each query and each job costs whatever its data (planning it, scheduling
its stages, on a cold JVM compiling its code), so the report sets the engine's counts beside the floor's
(one query: read the changed files, write them back) and Delta's own MERGE's. Like the JVM calls, the
counts do not move with the machine's load.

Jobs are counted by a job tag the block adds to the driver's thread (the engine starts every Spark job from
its calling thread); queries are SQL executions, counted by their ids, which the session hands out in
order. Both come from Spark's status store, which its listener bus fills asynchronously: the bus is drained
before counting.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import SparkSession


@dataclass
class SparkWork:
    """Spark jobs and SQL queries (executions) started while ``counting_spark_work`` was open."""

    jobs: int = 0
    queries: int = 0


@contextmanager
def counting_spark_work(spark: SparkSession) -> Iterator[SparkWork]:
    """Count the jobs and SQL executions this thread starts until the block ends."""
    work = SparkWork()
    context = spark.sparkContext
    tag = f"deltamerge-bench-{uuid.uuid4().hex}"
    before = last_execution_id(spark)
    context.addJobTag(tag)
    try:
        yield work
    finally:
        context.removeJobTag(tag)
        _drain_listener_bus(spark)
        work.jobs = len(context._jsc.sc().statusTracker().getJobIdsForTag(tag))
        work.queries = last_execution_id(spark) - before


def last_execution_id(spark: SparkSession) -> int:
    """The id of the session's newest SQL execution (-1 before the first): ids grow by one per execution,
    and the status store keeps the newest however many it drops."""
    _drain_listener_bus(spark)
    store = spark._jsparkSession.sharedState().statusStore()
    count = store.executionsCount()
    return int(store.executionsList(count - 1, 1).apply(0).executionId()) if count else -1


def _drain_listener_bus(spark: SparkSession) -> None:
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
