"""Delta's own SQL metrics of a MERGE the delta-spark backend ran, read from the command's executed plan.

Delta's ``MergeIntoCommand`` measures every metric of ``MergeIntoCommandBase.baseMetrics`` in Spark SQL
metrics, and copies only ``DeltaOperationMetrics.MERGE`` into its commit: the files, bytes and partitions
after skipping and ``numSourceRowsInSecondScan`` never reach the log. The DataFrame that
``DeltaMergeBuilder.execute()`` returns was made by running the command, so its executed plan
(``CommandResultExec`` over ``ExecutedCommandExec``) holds the command's metrics with their values. A Spark
Connect client holds no plan of the server's: nothing is read there.
"""

from __future__ import annotations

import logging

from py4j.protocol import Py4JError
from pyspark.sql import DataFrame

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.session_kind import is_connect

log = logging.getLogger(__name__)


def command_metrics(executed: DataFrame) -> dict[str, int]:
    """Delta's SQL metrics of the MERGE whose ``execute()`` returned ``executed``: every declared merge metric
    (``numOutputRows`` derived as Delta's commit derives it); {} where the plan cannot be read (Spark Connect,
    another plan shape)."""
    if is_connect(executed):
        return {}
    try:
        plan = executed._jdf.queryExecution().executedPlan()
        if plan.getClass().getSimpleName() == "CommandResultExec":
            plan = plan.commandPhysicalPlan()
        recorder, seen = m.MetricsRecorder(), {m.NUM_OUTPUT_ROWS}
        entries = plan.metrics().iterator()
        while entries.hasNext():
            entry = entries.next()
            if entry._1() in m.METRIC_DESCRIPTIONS:
                recorder.set(entry._1(), int(entry._2().value()))
                seen.add(entry._1())
        # numOutputRows is no metric of the command's: its commit derives it, as freeze() does.
        return {name: value for name, value in recorder.freeze().items() if name in seen}
    except Py4JError as err:
        # The merge has committed by now: its metrics are reported as not measured, never as a failure.
        log.warning("Delta's SQL metrics of the merge could not be read from its plan: %s", err)
        return {}
