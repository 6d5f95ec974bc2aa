"""Turn joined (source, target) rows into output rows by evaluating the clauses in order, as Spark SQL.

Like Delta's MergeOutputGeneration, with no Python on the executors: each joined row gets an action code
(the position of the clause that acts, ``COPY`` or ``DROP``) from one CASE WHEN chain, the merge metrics
are observed on that code during the write, and every output column is one CASE over the code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField

from airflow_provider_deltamerge.engine import metrics as m
from airflow_provider_deltamerge.engine.casting import conform
from airflow_provider_deltamerge.engine.planning import MergePlan
from airflow_provider_deltamerge.engine.resolution import ResolvedClause, quote
from airflow_provider_deltamerge.spec.names import hidden_name

SOURCE_PRESENT = hidden_name("source_present")
TARGET_PRESENT = hidden_name("target_present")
ACTION = hidden_name("action")
COPY = 0  # a target row written back unchanged
DROP = -1  # a source row no clause inserts

_GROUP_SPLITS = {
    ("matched", False): (m.NUM_TARGET_ROWS_UPDATED, m.NUM_TARGET_ROWS_MATCHED_UPDATED),
    ("not_matched_by_source", False): (
        m.NUM_TARGET_ROWS_UPDATED,
        m.NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_UPDATED,
    ),
    ("matched", True): (m.NUM_TARGET_ROWS_DELETED, m.NUM_TARGET_ROWS_MATCHED_DELETED),
    ("not_matched_by_source", True): (
        m.NUM_TARGET_ROWS_DELETED,
        m.NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_DELETED,
    ),
}


def _first_acting(clauses: Sequence[ResolvedClause], otherwise: int) -> Column:
    """The position of the first clause whose condition holds (NULL counts as false), else ``otherwise``."""
    chain: Column | None = None
    for clause in clauses:
        holds = F.expr(clause.condition) if clause.condition else F.lit(True)
        chain = F.when(holds, clause.position) if chain is None else chain.when(holds, clause.position)
        if clause.condition is None:
            break
    return F.lit(otherwise) if chain is None else chain.otherwise(otherwise)


def action_column(plan: MergePlan) -> Column:
    """Which clause acts on each joined row: MATCHED clauses when both sides are present, NOT MATCHED when
    only the source is, NOT MATCHED BY SOURCE when only the target is."""
    source_present = F.col(SOURCE_PRESENT).isNotNull()
    target_present = F.col(TARGET_PRESENT).isNotNull()
    return (
        F.when(source_present & target_present, _first_acting(plan.of_group("matched"), COPY))
        .when(source_present, _first_acting(plan.of_group("not_matched"), DROP))
        .otherwise(_first_acting(plan.of_group("not_matched_by_source"), COPY))
    )


def observed_counts(plan: MergePlan) -> list[Column]:
    """Aggregates over the action code, one per row metric, named by the metric."""
    positions: dict[str, list[int]] = {m.NUM_TARGET_ROWS_INSERTED: []}
    for clause in plan.clauses:
        if clause.is_insert:
            positions[m.NUM_TARGET_ROWS_INSERTED].append(clause.position)
            continue
        for name in _GROUP_SPLITS[(clause.group, clause.is_delete)]:
            positions.setdefault(name, []).append(clause.position)
    action = F.col(ACTION)
    counts = [F.sum(F.when(action.isin(p), 1).otherwise(0)).alias(name) for name, p in positions.items() if p]
    counts.append(F.sum(F.when(action == COPY, 1).otherwise(0)).alias(m.NUM_TARGET_ROWS_COPIED))
    return counts


def rows_written(plan: MergePlan, joined: DataFrame) -> DataFrame:
    """The output rows: deleted and dropped rows filtered out, then every target column from its CASE."""
    removed = [c.position for c in plan.clauses if c.is_delete] + [DROP]
    action = F.col(ACTION)
    kept = joined.filter(~action.isin(removed))
    read = {f.name: f.dataType for f in plan.target_schema.fields}
    return kept.select(*[_output_column(plan, field, read) for field in plan.final_schema.fields])


def _output_column(plan: MergePlan, field: StructField, read: Mapping[str, DataType]) -> Column:
    """A column of the written rows; its current value (for rows no clause assigns) in the final type.

    Args:
        read: the type of each column as the target rows were read (before schema evolution).
    """
    column = field.name
    current = (
        conform(F.col(f"{plan.spec.target_alias}.{quote(column)}"), read[column], field.dataType)
        if column in read
        else F.lit(None).cast(field.dataType)  # a column schema evolution adds
    )
    chain: Column | None = None
    for clause in plan.clauses:
        if column not in clause.assignments:
            continue
        value = plan.values[(clause.position, column)]
        hit = F.col(ACTION) == clause.position
        chain = F.when(hit, value) if chain is None else chain.when(hit, value)
    return (current if chain is None else chain.otherwise(current)).alias(column)
