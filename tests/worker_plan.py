"""How ``make test`` shares the suite between two pytest-xdist workers (``-n 2 --dist loadgroup``).

Run one after the other, the suite leaves one of the CI machine's two cores idle for much of its time: a JVM
starting, a scheduler polling, a test waiting for its ``spark-submit``. Two workers fill it. Each worker is a
pytest session of its own, with its own session fixtures (its SparkSession, its Airflow home), so:

* the tests that need the session's throw-away PostgreSQL server or its Spark Connect server run on one
  worker, as one unit: neither server is started twice;
* the tests that share a module-scoped fixture (one DAG run read by several tests, a standalone cluster)
  stay together on one worker, so the fixture runs once, as it does in a serial run;
* everything else goes to whichever worker is free, longest first, so that no worker is left finishing a
  several-minute test alone at the end. The order only decides how the work is spread, never what a test
  sees; a stale entry in ``LONGEST_FIRST`` costs balance, not correctness.
"""

from __future__ import annotations

import pytest

# Session fixtures that start a server: every test that needs one runs on the same worker.
SERVER_FIXTURES = frozenset({"postgres", "spark_connect_server"})
SERVER_GROUP = "servers"
# The longest tests and modules of a full run (pytest --durations), longest first.
LONGEST_FIRST = (
    "tests/engine/test_differential_delta.py",
    "tests/e2e/test_example_dags.py::test_upsert_example_merges_and_pushes_metrics",
    "tests/delta/test_concurrency.py",
    "tests/delta/test_durability.py",
    "tests/engine/test_differential.py",
    "tests/e2e/test_example_dags.py",
    "tests/bench/test_bench_smoke.py",
    "tests/e2e/test_backfill.py",
    "tests/engine/test_delta_runtime.py",
    "tests/job/test_spark_submit.py",
)
_SHARED_SCOPES = frozenset({"module", "class", "package"})


def plan_workers(items: list[pytest.Item]) -> None:
    """Mark each test's worker group (xdist's ``xdist_group``) and put the longest work first, in place."""
    for item in items:
        group = _group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_rank)


def _group(item: pytest.Item) -> str | None:
    if not isinstance(item, pytest.Function):
        return None
    if SERVER_FIXTURES & set(item.fixturenames):
        return SERVER_GROUP
    definitions = item._fixtureinfo.name2fixturedefs.values()
    if any(fixture.scope in _SHARED_SCOPES for defs in definitions for fixture in defs):
        return item.nodeid.split("::", 1)[0]
    return None


def _rank(item: pytest.Item) -> tuple[int, int]:
    if _group(item) == SERVER_GROUP:
        return (0, 0)  # the largest unit: several scheduler runs and the servers' start
    for position, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid == prefix or item.nodeid.startswith(prefix + "::"):
            return (1, position)
    return (2, 0) if item.get_closest_marker("slow") else (3, 0)
