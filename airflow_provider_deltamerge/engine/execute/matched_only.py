"""The matched-only executor (Delta's classic executor with its matched-only optimisations).

Applies when every clause is WHEN MATCHED: unmatched source rows cannot act, so no full outer join is
needed. Phases, from ``phases``:

* ``find_touched_files``: a file is touched only by a match that satisfies some clause condition, so a
  file whose matches no clause acts on is not rewritten (Delta 4.4 behaves so); the multiple-match check
  still sees every match;
* ``rewrite_touched_files``: right outer join of the source onto the touched files' rows.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from airflow_provider_deltamerge.engine.execute.phases import FileChanges, run_two_phases
from airflow_provider_deltamerge.engine.execute.touched_files import some_clause_acts
from airflow_provider_deltamerge.engine.plan.planning import MergePlan
from airflow_provider_deltamerge.metrics import MetricsRecorder


def run_matched_only(
    spark: SparkSession, plan: MergePlan, source: DataFrame, recorder: MetricsRecorder
) -> FileChanges:
    """Run the matched-only merge in ``plan``."""
    return run_two_phases(spark, plan, source, recorder, touches=some_clause_acts(plan, "matched"))
