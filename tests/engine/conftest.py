"""Engine-test helpers: hypothesis settings for the Spark-backed generated tests, and plan inspection.

Profiles: ``ci`` (default) and ``dev`` (many more examples), chosen with ``HYPOTHESIS_PROFILE=dev``. They
are registered as ``engine-ci`` / ``engine-dev`` and applied with ``@ENGINE_SETTINGS`` on each generated
test, because a merge on Spark costs about a second: the spec tests' global ``ci`` profile (60 examples)
would take far too long here, and a second global ``load_profile`` would override theirs.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_SLOW_EXAMPLES = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# ci: each example runs 1-3 merges of ours (one per executor that can serve it) and one of deltalake's. 30
# examples: 45 took 108 s of tests/engine/test_differential.py in a loaded two-worker run (2026-11-30), and
# CI's whole run 54 minutes, over its 40 (docs/development.md); the differential suite against Delta's own
# runtime judges 150 statements besides.
settings.register_profile("engine-ci", max_examples=30, **_SLOW_EXAMPLES)
settings.register_profile("engine-dev", max_examples=300, **_SLOW_EXAMPLES)
ENGINE_SETTINGS = settings.get_profile("engine-" + os.environ.get("HYPOTHESIS_PROFILE", "ci"))

PYTHON_UDF_OPERATORS = ("BatchEvalPython", "ArrowEvalPython")


def executed_plans(spark: SparkSession, since: int) -> list[str]:
    """The physical plans Spark ran after execution ``since``."""
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    return [
        executions.apply(i).physicalPlanDescription()
        for i in range(executions.size())
        if executions.apply(i).executionId() > since
    ]


def python_udf_plans(spark: SparkSession, *, since: int) -> list[str]:
    """Physical plans of the SQL executions after ``since`` that evaluate Python on the executors.

    Spark records every execution's physical plan in its status store, also with the UI disabled, so the
    plans the engine really ran are inspected, not plans rebuilt for the test.
    """
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    plans = [
        executions.apply(i).physicalPlanDescription()
        for i in range(executions.size())
        if executions.apply(i).executionId() > since
    ]
    return [plan for plan in plans if any(op in plan for op in PYTHON_UDF_OPERATORS)]


# The differential suite against Delta's runtime (tests/engine/test_differential_delta.py). Both profiles draw
# from the run's seed (tests/run_profile.py, printed in pytest's header): in CI the day's, so CI judges new
# statements every day and a failure replays with DIFFERENTIAL_SEED; a statement that failed stays in the
# suite as an explicit example (tests/engine/differential_examples.py). Since the generator draws what users
# write (unique source keys, rare NULL keys: about half the statements change rows, against a quarter
# before) and the whole table is compared, a statement costs 3.8 s on a quiet machine (the 2026-11-28
# seed's 50 took 189 s, 114 s before; 5.5 s each in a loaded two-worker run). CI's 150 (issue 51): a local
# CI run took 35.4 minutes of tests with 50 (2026-11-28), too near CI's 40-minute limit, so 40; since small
# merges run in one query (2026-11-29) CI's whole run took 1,744 s (29 minutes) with 60, and 1,901 s with
# 150 (a local run: 488 s for 157 statements, 3.1 s each); a developer's machine runs 2,000.
settings.register_profile("differential-ci", max_examples=150, **_SLOW_EXAMPLES)
settings.register_profile("differential-dev", max_examples=2000, **_SLOW_EXAMPLES)
DIFFERENTIAL_SETTINGS = settings.get_profile("differential-" + os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def two_phases(monkeypatch) -> None:
    """The engine runs the two phases of a merge as two queries, as it does for a merge too large for one
    (engine/execute/one_query.py): for tests of the plans of either phase."""
    monkeypatch.setattr("airflow_provider_deltamerge.engine.execute.one_query.MAX_BYTES", 0)
