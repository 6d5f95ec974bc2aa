"""What a check or sensor accepts: bounds on merge metrics, and criteria for a commit in the Delta log.

Pure Python (no ``deltalake``, no Spark), shared by ``DeltaMergeCheckOperator``, ``DeltaTableSensor``,
``DeltaTableTrigger`` and the merge job's guards: one evaluation of bounds, one matching of commits. The
operators and the sensor validate their bounds with it when a DAG is parsed; the log is read by
``merge_commits.find_commit``.

Bounds are a dict from a metric, or a ratio of two metrics written ``"a / b"``, to ``{"min": x, "max": y}``
(either or both, inclusive)::

    {
        "numSourceRows": {"min": 1},
        "numTargetRowsDeleted": {"max": 1000},
        "numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.1},
    }

A ratio ``a / b`` with ``b == 0`` is 0 when ``a == 0`` (nothing happened) and infinite otherwise.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_deltamerge.delta.format.provenance import COMMIT_INFO_KEY, provenance_of
from airflow_provider_deltamerge.exceptions import MetricBoundsError
from airflow_provider_deltamerge.metrics import METRIC_DESCRIPTIONS, TABLE_VERSION

# Every name a bound may use: Delta's merge metrics, plus the version the merge committed.
KNOWN_METRICS: tuple[str, ...] = (*METRIC_DESCRIPTIONS, TABLE_VERSION)
RATIO = "/"
LIMITS = ("min", "max")
# What the log records for a merge made by this provider's engine: delta-rs writes it as a WRITE.
MERGE = "MERGE"
_DELTA_RS_WRITE = "WRITE"


def metric_number(value: Any) -> float | None:
    """A metric value as a number (Delta's log keeps metrics as strings); None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                return None
    return None


@dataclass(frozen=True)
class Bound:
    """One declared bound: ``metric`` (or ``metric / per``) within ``[minimum, maximum]``."""

    expression: str
    metric: str
    per: str | None
    minimum: float | None
    maximum: float | None

    def broken(self, metrics: Mapping[str, Any]) -> str | None:
        """Why ``metrics`` break this bound, or None when they keep it."""
        numerator = metric_number(metrics.get(self.metric))
        denominator = 1 if self.per is None else metric_number(metrics.get(self.per))
        if numerator is None or denominator is None:
            missing = [n for n in (self.metric, self.per) if n and metric_number(metrics.get(n)) is None]
            return f"{self.expression}: {' and '.join(missing)} missing from the metrics"
        if self.per is None:
            value: float = numerator
            shown = f"{self.expression} = {numerator}"
        else:
            value = numerator / denominator if denominator else (0.0 if numerator == 0 else math.inf)
            shown = f"{self.expression} = {value:.4g} ({numerator} / {denominator})"
        if self.minimum is not None and value < self.minimum:
            return f"{shown}, below min {self.minimum}"
        if self.maximum is not None and value > self.maximum:
            return f"{shown}, above max {self.maximum}"
        return None


@dataclass(frozen=True)
class MetricBounds:
    """Declared bounds, validated when built (so a wrong name fails the DAG at parse time).

    Raises:
        MetricBoundsError: listing every problem, numbered, and the known metric names.
    """

    declared: Mapping[str, Mapping[str, float]]
    bounds: tuple[Bound, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        problems: list[str] = []
        bounds: list[Bound] = []
        if not isinstance(self.declared, Mapping):
            raise MetricBoundsError(
                f"Metric bounds must be a dict of metric -> {{'min': x, 'max': y}}, got {self.declared!r}.",
                error_class="DELTAMERGE_INVALID_METRIC_BOUNDS",
            )
        for expression, limits in self.declared.items():
            names = [part.strip() for part in str(expression).split(RATIO)]
            unknown = [name for name in names if name not in KNOWN_METRICS]
            if len(names) > 2:
                problems.append(f"{expression!r}: a ratio divides exactly two metrics, 'a / b'")
            elif unknown:
                problems.append(f"{expression!r}: unknown metric {', '.join(map(repr, unknown))}")
            if not isinstance(limits, Mapping) or not limits or set(limits) - set(LIMITS):
                problems.append(f"{expression!r}: give {{'min': x}}, {{'max': y}} or both, got {limits!r}")
                continue
            numbers = {k: metric_number(v) for k, v in limits.items()}
            if any(v is None for v in numbers.values()):
                problems.append(f"{expression!r}: min and max must be numbers, got {dict(limits)!r}")
                continue
            low, high = numbers.get("min"), numbers.get("max")
            if low is not None and high is not None and low > high:
                problems.append(f"{expression!r}: min {low} is greater than max {high}")
            if len(names) <= 2 and not unknown:
                per = names[1] if len(names) == 2 else None
                bounds.append(Bound(" / ".join(names), names[0], per, low, high))
        if problems:
            listed = "\n".join(f"  {i}. {p}" for i, p in enumerate(problems, 1))
            raise MetricBoundsError(
                f"Invalid metric bounds:\n{listed}\nKnown metrics: {', '.join(KNOWN_METRICS)}. "
                "Write a ratio as 'numTargetRowsDeleted / numTargetRowsCopied'.",
                error_class="DELTAMERGE_INVALID_METRIC_BOUNDS",
            )
        object.__setattr__(self, "bounds", tuple(bounds))

    def broken(self, metrics: Mapping[str, Any]) -> list[str]:
        """Every bound that ``metrics`` break, described with the values seen; [] when all hold.

        Raises:
            MetricBoundsError: DELTAMERGE_METRIC_NOT_MEASURED, listing the bounds on metrics the merge did not
                measure (None: Delta's own MERGE keeps them in its SQL metrics only). Such a bound can
                neither hold nor break, and passing or skipping on it would hide that it checks nothing.
        """
        unmeasured = [
            f"{bound.expression}: {name}"
            for bound in self.bounds
            for name in (bound.metric, bound.per)
            if name is not None and name in metrics and metrics[name] is None
        ]
        if unmeasured:
            listed = "\n".join(f"  {i}. {item}" for i, item in enumerate(unmeasured, 1))
            raise MetricBoundsError(
                f"These bounds use metrics the merge did not measure (None):\n{listed}\nDelta's own MERGE "
                "(backend 'delta-spark') records them only in its Spark SQL metrics, not in its commit. "
                "Bound metrics it records (row counts, files and bytes added or removed) instead, or run "
                "the merge with backend='engine'.",
                error_class="DELTAMERGE_METRIC_NOT_MEASURED",
            )
        return [reason for bound in self.bounds if (reason := bound.broken(metrics)) is not None]


def operation_of(entry: Mapping[str, Any]) -> str:
    """The operation of one entry of ``DeltaTable.history()``: ``MERGE`` for a commit carrying this provider's
    provenance record, also where delta-rs recorded it as a ``WRITE`` (older commits; stores without a
    conditional put); otherwise the log's."""
    operation = str(entry.get("operation", ""))
    if isinstance(entry.get(COMMIT_INFO_KEY), dict) and operation == _DELTA_RS_WRITE:
        return MERGE
    return operation


@dataclass(frozen=True)
class Commit:
    """One commit of a Delta table as a sensor reports it (``to_xcom()`` is its XCom value).

    ``operation`` as ``operation_of`` reads it.
    """

    version: int
    timestamp: datetime.datetime
    operation: str
    metrics: Mapping[str, float]
    provenance: Mapping[str, Any]

    @classmethod
    def from_history(cls, entry: Mapping[str, Any]) -> Commit:
        """The commit described by one entry of ``DeltaTable.history()``."""
        provenance = provenance_of(entry)
        operation = operation_of(entry)
        raw_metrics = entry.get("operationMetrics") or {}
        metrics = {k: n for k, v in raw_metrics.items() if (n := metric_number(v)) is not None}
        return cls(
            version=int(entry["version"]),
            timestamp=datetime.datetime.fromtimestamp(int(entry["timestamp"]) / 1000, tz=datetime.UTC),
            operation=operation,
            metrics=metrics,
            provenance=provenance,
        )

    def to_xcom(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "timestamp": self.timestamp.isoformat(),
            "operation": self.operation,
            "metrics": dict(self.metrics),
            "provenance": dict(self.provenance),
        }


def _as_time(value: datetime.datetime | str | None, name: str) -> datetime.datetime | None:
    """A datetime or ISO 8601 string as an aware datetime (UTC when naive); None for "not given".

    Raises:
        MetricBoundsError: naming the criterion ``name`` and the form expected.
    """
    if value is None or value == "":
        return None
    try:
        moment = value if isinstance(value, datetime.datetime) else datetime.datetime.fromisoformat(value)
    except (TypeError, ValueError) as err:
        raise MetricBoundsError(
            f"{name} must be a datetime or an ISO 8601 string, got {value!r}.",
            error_class="DELTAMERGE_INVALID_COMMIT_CRITERIA",
        ) from err
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def _logical_date(commit: Commit) -> datetime.datetime | None:
    """The logical date of the DAG run that made ``commit``; None for commits that record none."""
    try:
        return _as_time(commit.provenance.get("logicalDate"), "logicalDate")
    except MetricBoundsError:
        return None


@dataclass(frozen=True)
class CommitCriteria:
    """What a commit must have for a sensor to accept it; every given criterion must hold.

    ``dag_id``, ``task_id``, ``run_id`` and ``logical_date`` are compared with the provenance record of the
    commit (``dagId``, ``taskId``, ``runId``, ``logicalDate``: the logical date of the DAG run that merged);
    metric bounds apply to its ``operationMetrics`` plus ``tableVersion`` (its version). Build with
    ``from_values`` when the values come from templates.
    """

    operation: str | None = None
    after_version: int | None = None
    after_time: datetime.datetime | None = None
    dag_id: str | None = None
    task_id: str | None = None
    run_id: str | None = None
    metrics: MetricBounds | None = None
    logical_date: datetime.datetime | None = None

    @classmethod
    def from_values(
        cls,
        *,
        operation: str | None = None,
        after_version: int | str | None = None,
        after_time: datetime.datetime | str | None = None,
        dag_id: str | None = None,
        task_id: str | None = None,
        run_id: str | None = None,
        metrics: Mapping[str, Mapping[str, float]] | None = None,
        logical_date: datetime.datetime | str | None = None,
    ) -> CommitCriteria:
        """Criteria from rendered template values (strings), empty strings meaning "not given".

        Raises:
            MetricBoundsError: when a value cannot be read (naming it and the form expected).
        """
        try:
            version = None if after_version in (None, "") else int(after_version)
        except ValueError as err:
            raise MetricBoundsError(
                f"after_version must be a table version (an int), got {after_version!r}.",
                error_class="DELTAMERGE_INVALID_COMMIT_CRITERIA",
            ) from err
        return cls(
            operation=operation or None,
            after_version=version,
            after_time=_as_time(after_time, "after_time"),
            dag_id=dag_id or None,
            task_id=task_id or None,
            run_id=run_id or None,
            metrics=MetricBounds(metrics) if metrics else None,
            logical_date=_as_time(logical_date, "logical_date"),
        )

    def to_json(self) -> dict[str, Any]:
        """The criteria as JSON-safe keyword arguments of ``from_values`` (a trigger's serialized form)."""
        return {
            "operation": self.operation,
            "after_version": self.after_version,
            "after_time": self.after_time.isoformat() if self.after_time else None,
            "dag_id": self.dag_id,
            "task_id": self.task_id,
            "run_id": self.run_id,
            "metrics": {k: dict(v) for k, v in self.metrics.declared.items()} if self.metrics else None,
            "logical_date": self.logical_date.isoformat() if self.logical_date else None,
        }

    def describe(self) -> str:
        """The given criteria in one line, for logs and timeout messages."""
        given = {k: v for k, v in self.to_json().items() if v is not None}
        return ", ".join(f"{k}={v}" for k, v in given.items()) or "any commit"

    def matches(self, commit: Commit) -> bool:
        provenance = {"dagId": self.dag_id, "taskId": self.task_id, "runId": self.run_id}
        return (
            (self.operation is None or commit.operation.upper() == self.operation.upper())
            and (self.after_version is None or commit.version > self.after_version)
            and (self.after_time is None or commit.timestamp > self.after_time)
            and all(want is None or commit.provenance.get(key) == want for key, want in provenance.items())
            and (self.logical_date is None or _logical_date(commit) == self.logical_date)
            and (
                self.metrics is None
                or not self.metrics.broken({**commit.metrics, TABLE_VERSION: commit.version})
            )
        )
