"""The insert-only executor (Delta's ``InsertOnlyMergeExecutor``): one job, no file rewritten.

Applies when every clause is WHEN NOT MATCHED: no target row can change. The source is counted
(``numSourceRows``, before any clause filter), LEFT ANTI JOINed with the candidate target rows on the
merge condition, and the remaining rows go through ``phases.write_inserts``, which evaluates the NOT
MATCHED clauses in order and appends new files. As in Delta's optimised path there is no multiple-match
check: duplicated unmatched source rows are all inserted.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine.execute.joins import join_condition, target_rows
from airflow_provider_deltamerge.engine.execute.phases import FileChanges
from airflow_provider_deltamerge.engine.execute.rewrite import write_inserts
from airflow_provider_deltamerge.engine.observed import observe, observed_count
from airflow_provider_deltamerge.engine.plan.planning import MergePlan
from airflow_provider_deltamerge.engine.progress import enter_phase
from airflow_provider_deltamerge.metrics import MetricsRecorder


def run_insert_only(
    spark: SparkSession, plan: MergePlan, source: DataFrame, recorder: MetricsRecorder
) -> FileChanges:
    """Append the source rows that match no candidate target row and that a NOT MATCHED clause inserts."""
    with recorder.timed(m.REWRITE_TIME_MS):
        enter_phase("inserts: source rows against the candidate files", files=len(plan.candidate_files))
        counted, source_count = observe(source, F.count(F.lit(1)).alias("rows"))
        target = target_rows(spark, plan, plan.candidate_files)
        condition = join_condition(plan, plan.source_schema)
        unmatched = counted.alias(plan.spec.source_alias).join(target, condition, "left_anti")
        # With no candidate file the anti join is dropped: the source's own scan is written.
        written = write_inserts(spark, plan, unmatched, recorder, presized=not plan.candidate_files)
        recorder.set(m.NUM_SOURCE_ROWS, observed_count(source_count, "rows", fallback=source))
    return FileChanges(removed=(), added=written.files)
