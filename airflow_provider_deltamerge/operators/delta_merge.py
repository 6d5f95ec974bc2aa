"""``DeltaMergeOperator``: a Delta Lake MERGE declared in a DAG, run by a Spark job, metrics to XCom."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.common.compat.sdk import BaseOperator

from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.spec import MergeClause, MergeSource, MergeSpec, PathSource
from airflow_provider_deltamerge.spec.validation import check_clauses

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaMergeOperator(BaseOperator):
    """Merge a source into a Delta table with a Spark job and return Delta's merge metrics.

    :param target: Delta table path or URI. (templated)
    :param source: Path of the source files (read with ``source_format``), or a ``PathSource``,
        ``TableSource`` or ``QuerySource``. (templated when a string)
    :param condition: The ON condition, Spark SQL over the aliases, e.g. ``t.id = s.id``. (templated)
    :param clauses: WHEN clauses, in evaluation order (``update_all()``, ``insert_all()``, ...).
    :param source_format: Reader format of a string ``source``: parquet, delta, csv, json or orc.
    :param source_options: Spark reader options of a string ``source``. (templated)
    :param target_alias: Alias of the target in conditions and expressions.
    :param source_alias: Alias of the source in conditions and expressions.
    :param spark_conn_id: Spark connection used for spark-submit.
    :param conf: Spark configuration of the merge job. (templated)
    :param spark_submit_kwargs: Further SparkSubmitHook arguments (executor_memory, packages, ...).

    Returns (as XCom ``return_value``) Delta's merge metrics (``numTargetRowsInserted``, ...) plus
    ``tableVersion``, ``executor`` and ``specHash``.
    """

    template_fields: Sequence[str] = ("target", "source", "condition", "source_options", "conf")
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "condition": "sql",
        "conf": "json",
        "source_options": "json",
    }
    ui_color = "#00add4"

    def __init__(
        self,
        *,
        target: str,
        source: str | MergeSource,
        condition: str,
        clauses: Sequence[MergeClause],
        source_format: str = "parquet",
        source_options: Mapping[str, str] | None = None,
        target_alias: str = "t",
        source_alias: str = "s",
        spark_conn_id: str = DeltaMergeHook.default_conn_name,
        conf: Mapping[str, Any] | None = None,
        spark_submit_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.target, self.source, self.condition = target, source, condition
        self.clauses = tuple(clauses)
        self.source_format, self.source_options = source_format, dict(source_options or {})
        self.target_alias, self.source_alias = target_alias, source_alias
        self.spark_conn_id, self.conf = spark_conn_id, dict(conf or {})
        self.spark_submit_kwargs = dict(spark_submit_kwargs or {})
        self._hook: DeltaMergeHook | None = None
        check_clauses(self.clauses)  # pure Python, no I/O: a bad DAG fails when it is parsed

    def build_spec(self) -> MergeSpec:
        """The merge spec from the (rendered) arguments."""
        source = (
            PathSource(self.source, format=self.source_format, options=tuple(self.source_options.items()))
            if isinstance(self.source, str)
            else self.source
        )
        return MergeSpec(
            target=self.target,
            source=source,
            condition=self.condition,
            clauses=self.clauses,
            target_alias=self.target_alias,
            source_alias=self.source_alias,
        )

    def execute(self, context: Context) -> dict[str, Any]:
        spec = self.build_spec()  # templates are rendered by now
        ti = context["ti"]
        provenance = {
            "dagId": ti.dag_id,
            "taskId": ti.task_id,
            "runId": ti.run_id,
            "mapIndex": ti.map_index,
            "tryNumber": ti.try_number,
        }
        self._hook = DeltaMergeHook(
            self.spark_conn_id, conf=self.conf, spark_submit_kwargs=self.spark_submit_kwargs
        )
        metrics = self._hook.run_merge(spec, provenance=provenance)
        self.log.info("Merge into %s done: %s", spec.target, metrics)
        return metrics

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()
