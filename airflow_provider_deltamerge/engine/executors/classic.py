"""The classic executor (Delta's ``ClassicMergeExecutor``): serves every clause mix.

Applies when neither the insert-only nor the matched-only executor can: any NOT MATCHED BY SOURCE clause,
or MATCHED together with NOT MATCHED clauses (or when forced). Phases, from ``phases``:

* ``find_touched_files``: every file with a match is touched (every candidate file with a NOT MATCHED BY
  SOURCE clause), after the multiple-match check;
* ``rewrite_touched_files``: full outer join when a NOT MATCHED clause may insert, else right outer;
* ``write_inserts`` when nothing is touched.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_deltamerge.engine.executors.phases import FileChanges, run_two_phases
from airflow_provider_deltamerge.engine.metrics import MetricsRecorder
from airflow_provider_deltamerge.engine.planning import MergePlan


def run_classic(
    spark: SparkSession, plan: MergePlan, source: DataFrame, recorder: MetricsRecorder
) -> FileChanges:
    """Run the merge in ``plan``; any match touches its file, whatever the clause conditions say."""
    return run_two_phases(spark, plan, source, recorder, touches=F.lit(True))
