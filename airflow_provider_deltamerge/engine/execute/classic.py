"""The classic executor (Delta's ``ClassicMergeExecutor``): serves every clause mix.

Applies when neither the insert-only nor the matched-only executor can: any NOT MATCHED BY SOURCE clause,
or MATCHED together with NOT MATCHED clauses (or when forced). Phases, from ``phases``:

* ``find_touched_files``: as in Delta, every file with a match is touched, whatever the clause conditions
  say. With a NOT MATCHED BY SOURCE clause, only files some clause acts on are touched, where Delta
  rewrites every candidate file (a deliberate difference: a full sync rewrites what changed, not the table);
* ``rewrite_touched_files``: the touched files joined with the source, and the unmatched source rows.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_deltamerge.engine.execute.phases import FileChanges, run_two_phases
from airflow_provider_deltamerge.engine.execute.touched_files import some_clause_acts
from airflow_provider_deltamerge.engine.plan.planning import MergePlan, has_not_matched_by_source
from airflow_provider_deltamerge.metrics import MetricsRecorder


def run_classic(
    spark: SparkSession, plan: MergePlan, source: DataFrame, recorder: MetricsRecorder
) -> FileChanges:
    """Run the merge in ``plan``."""
    by_source = has_not_matched_by_source(plan.clauses)
    touches = some_clause_acts(plan, "matched") if by_source else F.lit(True)
    return run_two_phases(spark, plan, source, recorder, touches=touches)
