"""``DeltaMergeCheckOperator``: fail (or skip downstream) when an upstream merge's metrics break bounds."""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
    BaseOperator,
)

from airflow_provider_deltamerge.delta.log.commit_match import MetricBounds
from airflow_provider_deltamerge.exceptions import MetricBoundsError

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context

ON_FAILURE = ("fail", "skip")


class DeltaMergeCheckOperator(BaseOperator):
    """Check the metrics of an upstream ``DeltaMergeOperator`` against declared bounds.

    Bounds map a metric, or a ratio ``"a / b"`` of two metrics, to ``{"min": x, "max": y}`` (either or
    both, inclusive), e.g. ``{"numTargetRowsDeleted": {"max": 1000},
    "numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.1}}``. Names are Delta's merge metrics
    (``metrics.py``) and ``tableVersion``; an unknown name fails the DAG at parse time. A ratio
    ``a / b`` with ``b == 0`` is 0 when ``a == 0``, else infinite.

    :param bounds: Metric (or ratio) -> ``{"min": x, "max": y}``.
    :param merge_task_id: The merge task whose ``return_value`` XCom holds the metrics (when ``metrics``
        is not given).
    :param metrics: The metrics dict itself, e.g. ``merge.output``. (templated)
    :param on_failure: ``fail`` fails this task (no retries: the metrics will not change); ``skip`` skips
        it, and so its downstream tasks with the default trigger rule.

    Returns (as XCom ``return_value``) the metrics that were checked.
    """

    template_fields: Sequence[str] = ("metrics",)
    ui_color = "#b3e5f2"

    def __init__(
        self,
        *,
        bounds: Mapping[str, Mapping[str, float]],
        merge_task_id: str | None = None,
        metrics: Mapping[str, Any] | str | None = None,
        on_failure: Literal["fail", "skip"] = "fail",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.bounds = MetricBounds(bounds)  # a wrong metric name fails at DAG parse time
        if on_failure not in ON_FAILURE:
            raise ValueError(f"on_failure must be one of {', '.join(ON_FAILURE)}, got {on_failure!r}.")
        if metrics is None and merge_task_id is None:
            raise ValueError(
                f"{self.task_id}: give merge_task_id (the DeltaMergeOperator's task id) or metrics "
                "(e.g. merge.output, or the XComArg of a @task)."
            )
        self.merge_task_id, self.metrics, self.on_failure = merge_task_id, metrics, on_failure

    @property
    def declared_bounds(self) -> str:
        """The bounds as declared, as JSON: serialized with the DAG so the merge history page can draw them
        (a string, as Airflow's serializer keeps an operator's own fields only when they are plain values)."""
        return json.dumps({expression: dict(limits) for expression, limits in self.bounds.declared.items()})

    @classmethod
    def get_serialized_fields(cls) -> frozenset[str]:
        return frozenset(super().get_serialized_fields() | {"declared_bounds"})

    def execute(self, context: Context) -> dict[str, Any]:
        metrics = self._metrics(context)
        try:
            broken = self.bounds.broken(metrics)
        except MetricBoundsError as err:
            # A bound on a metric the merge did not measure: a retry would measure it no better.
            raise AirflowFailException(str(err)) from err
        if not broken:
            self.log.info("All %d metric bounds hold: %s", len(self.bounds.bounds), metrics)
            return metrics
        listed = "\n".join(f"  {i}. {reason}" for i, reason in enumerate(broken, 1))
        message = (
            f"{len(broken)} of {len(self.bounds.bounds)} metric bounds broken by merge "
            f"{self.merge_task_id or 'metrics'}:\n{listed}\n"
            "Look at the merge's source before rerunning, or widen the bounds if this change is expected."
        )
        if self.on_failure == "skip":
            raise AirflowSkipException(message)
        raise AirflowFailException(message)

    def _metrics(self, context: Context) -> dict[str, Any]:
        value: Any = self.metrics
        if value is None:
            value = context["ti"].xcom_pull(task_ids=self.merge_task_id)
        if isinstance(value, str):
            # A template renders to the text of a dict unless the DAG renders native objects.
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError) as err:
                raise AirflowException(
                    f"metrics rendered to text that is not a dict: {value[:200]!r}. Pass merge.output or "
                    "set render_template_as_native_obj=True on the DAG."
                ) from err
        if not isinstance(value, Mapping):
            raise AirflowException(
                f"No metrics dict to check (got {value!r}): does task {self.merge_task_id!r} exist upstream "
                "of this one and return its metrics (do_xcom_push=True)?"
            )
        return dict(value)
