"""The job's session has no reflection functions: no SQL the merge runs can call a Java method."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

from airflow_provider_deltamerge.job.answer import drop_reflection_functions

CALLS = [
    "reflect('java.lang.System', 'getProperty', 'java.version')",
    "java_method('java.lang.System', 'getProperty', 'java.version')",
    "try_reflect('java.lang.System', 'getProperty', 'java.version')",
    "`JAVA_METHOD`('java.lang.System', 'getProperty', 'java.version')",
]


@pytest.mark.parametrize("call", CALLS)
def test_reflection_is_gone_from_the_jobs_session(spark, call):
    # A session of its own: the shared test session keeps its functions.
    job_session = spark.newSession()
    assert job_session.sql(f"SELECT {call} AS v").collect()[0]["v"]

    drop_reflection_functions(job_session)

    with pytest.raises(AnalysisException, match="UNRESOLVED_ROUTINE"):
        job_session.sql(f"SELECT {call} AS v").collect()
    with pytest.raises(AnalysisException, match="UNRESOLVED_ROUTINE"):
        job_session.range(1).selectExpr(call).collect()
    assert job_session.sql("SELECT upper('still here') AS v").collect()[0]["v"] == "STILL HERE"
