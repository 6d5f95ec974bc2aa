"""How ``make test`` shares the suite between two pytest-xdist workers (``-n 2``).

Run one after the other, the suite leaves one of the CI machine's two cores idle for much of its time: a JVM
starting, a scheduler polling, a test waiting for its ``spark-submit``. Two workers fill it. Each worker is a
pytest session of its own, with its own session fixtures (its SparkSession, its Airflow home), so xdist's
controller hands out units of work (``PlannedScheduling``), each run whole by one worker:

* the tests that need the session's throw-away PostgreSQL server or its Spark Connect server, together, so
  neither server is started twice;
* the tests of a module with a module-scoped fixture (one DAG run read by several tests, a standalone
  cluster), together, so the fixture runs once, as in a serial run;
* every other test on its own, to whichever worker is free, the longest first, so that no worker is left
  finishing a several-minute test alone at the end. The order only decides how the work is spread, never
  what a test sees; a stale entry in ``LONGEST_FIRST`` costs balance, not correctness.

The controller sees only test ids, so the units are named by module here; tests/test_worker_plan.py checks
the two lists against the fixtures the tests really use.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

# Session fixtures that start a server, and the modules whose tests use them.
SERVER_FIXTURES = frozenset({"postgres", "spark_connect_server"})
SERVER_MODULES = frozenset(
    {
        "tests/connect/test_connect_dags.py",
        "tests/connect/test_connect_kill.py",
        "tests/connect/test_connect_merges.py",
        "tests/e2e/test_asset_triggered_consumer.py",
        "tests/e2e/test_clear_reprocesses.py",
        "tests/e2e/test_scheduler_backfill.py",
        "tests/history/test_history_page.py",
    }
)
SERVERS = "servers"
# Modules with a module-scoped fixture.
SHARED_FIXTURE_MODULES = frozenset(
    {
        "tests/airflow/test_dags.py",
        "tests/airflow/test_google_credentials.py",
        "tests/e2e/test_example_dags.py",
        "tests/engine/test_delta_runtime.py",
        "tests/engine/test_differential_comparisons.py",
        "tests/engine/test_materialize_source.py",
        "tests/job/test_standalone_cluster.py",
        "tests/spec/test_sql_grammar_spark.py",
        "tests/test_docker_compose.py",
    }
)
SHARED_SCOPES = frozenset({"module", "class", "package"})
# The longest tests and modules of a full run (pytest --durations), longest first.
LONGEST_FIRST = (
    "tests/engine/test_differential_delta.py",
    "tests/e2e/test_example_dags.py",
    "tests/delta/test_concurrency.py",
    "tests/delta/test_durability.py",
    "tests/engine/test_differential.py",
    "tests/bench/test_bench_smoke.py",
    "tests/e2e/test_backfill.py",
    "tests/engine/test_delta_runtime.py",
    "tests/job/test_spark_submit.py",
)


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: the servers', its module's, or its own."""
    module = nodeid.split("::", 1)[0]
    if module in SERVER_MODULES:
        return SERVERS
    return module if module in SHARED_FIXTURE_MODULES else nodeid


class PlannedScheduling(LoadScopeScheduling):
    """xdist's scope scheduler with the units of ``unit_of``, handed out in the workers' collection order."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


def longest_first(items: list[pytest.Item]) -> None:
    """Sort a worker's collection, in place: the servers' unit, then ``LONGEST_FIRST``, then slow tests."""
    items.sort(key=_rank)


def _rank(item: pytest.Item) -> tuple[int, int]:
    module = item.nodeid.split("::", 1)[0]
    if module in SERVER_MODULES:
        return (0, 0)  # the largest unit: several scheduler runs and the servers' start
    if module in LONGEST_FIRST:
        return (1, LONGEST_FIRST.index(module))
    return (2, 0) if item.get_closest_marker("slow") else (3, 0)
