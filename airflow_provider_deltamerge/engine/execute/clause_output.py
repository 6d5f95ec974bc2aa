"""Turn joined (source, target) rows into output rows by evaluating the clauses in order, as Spark SQL.

Like Delta's MergeOutputGeneration, with no Python on the executors: each joined row gets an action code
(the position of the clause that acts, ``COPY`` or ``DROP``) from one CASE WHEN chain, the merge metrics
are observed on that code during the write, and every output column is one CASE over the code.

Each function takes the kinds of joined rows its input can hold (``RowKind``): a branch that holds only
unmatched source rows (the inserts) or only target rows (a rewrite) gets expressions over only the
clauses that can act there, so the per-row work stays as small as the clauses allow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.files.reader import (
    ROW_COMMIT_VERSION_COLUMN,
    ROW_ID_COLUMN,
    row_tracking_columns,
)
from airflow_provider_deltamerge.delta.log.protocol import GENERATION_EXPRESSION_KEY
from airflow_provider_deltamerge.engine.execute.change_rows import (
    ChangeRows,
    preimage_column,
    with_change_rows,
)
from airflow_provider_deltamerge.engine.identity import Identity, generated_values, identities, value_column
from airflow_provider_deltamerge.engine.observed import observe
from airflow_provider_deltamerge.engine.plan.planning import MergePlan
from airflow_provider_deltamerge.engine.resolve.casting import conform
from airflow_provider_deltamerge.engine.resolve.resolution import ResolvedClause, quote
from airflow_provider_deltamerge.spec.names import hidden_name

SOURCE_PRESENT = hidden_name("source_present")
TARGET_PRESENT = hidden_name("target_present")
ACTION = hidden_name("action")
COPY = 0  # a target row written back unchanged
DROP = -1  # a source row no clause inserts

# A joined row is a match, an unmatched source row or an unmatched target row; each kind is acted on by
# one clause group, and left alone (copied or dropped) when none of its clauses acts.
RowKind = Literal["matched", "source_only", "target_only"]
ALL_ROW_KINDS: frozenset[RowKind] = frozenset({"matched", "source_only", "target_only"})
_KIND_CLAUSES: dict[RowKind, tuple[str, int]] = {
    "matched": ("matched", COPY),
    "source_only": ("not_matched", DROP),
    "target_only": ("not_matched_by_source", COPY),
}

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


def action_column(plan: MergePlan, kinds: frozenset[RowKind] = ALL_ROW_KINDS) -> Column:
    """Which clause acts on each joined row of ``kinds``: MATCHED clauses when both sides are present, NOT
    MATCHED when only the source is, NOT MATCHED BY SOURCE when only the target is."""
    tests: dict[RowKind, Column] = {
        "matched": F.col(SOURCE_PRESENT).isNotNull() & F.col(TARGET_PRESENT).isNotNull(),
        "source_only": F.col(SOURCE_PRESENT).isNotNull(),
    }
    # In this order each test needs only the ones before it; the last kind needs none.
    present = [kind for kind in _KIND_CLAUSES if kind in kinds]
    chain: Column | None = None
    for kind in present[:-1]:
        group, otherwise = _KIND_CLAUSES[kind]
        acting = _first_acting(plan.of_group(group), otherwise)
        chain = F.when(tests[kind], acting) if chain is None else chain.when(tests[kind], acting)
    group, otherwise = _KIND_CLAUSES[present[-1]]
    last = _first_acting(plan.of_group(group), otherwise)
    return last if chain is None else chain.otherwise(last)


def _clauses_of(plan: MergePlan, kinds: frozenset[RowKind]) -> list[ResolvedClause]:
    groups = {_KIND_CLAUSES[kind][0] for kind in kinds}
    return [c for c in plan.clauses if c.group in groups]


def observed_counts(
    plan: MergePlan, kinds: frozenset[RowKind] = ALL_ROW_KINDS, *, rows_as: str | None = None
) -> list[Column]:
    """Aggregates over the action code of rows of ``kinds``, one per row metric, named by the metric; with
    ``rows_as``, the count of all rows too, named so (rows of the source, say, when they are all here)."""
    positions: dict[str, list[int]] = {m.NUM_TARGET_ROWS_INSERTED: []}
    for clause in _clauses_of(plan, kinds):
        if clause.is_insert:
            positions[m.NUM_TARGET_ROWS_INSERTED].append(clause.position)
            continue
        for name in _GROUP_SPLITS[(clause.group, clause.is_delete)]:
            positions.setdefault(name, []).append(clause.position)
    action = F.col(ACTION)
    counts = [F.sum(F.when(action.isin(p), 1).otherwise(0)).alias(name) for name, p in positions.items() if p]
    if kinds != {"source_only"}:  # only target rows are copied
        counts.append(F.sum(F.when(action == COPY, 1).otherwise(0)).alias(m.NUM_TARGET_ROWS_COPIED))
    if rows_as is not None:
        counts.append(F.count(F.lit(1)).alias(rows_as))
    return counts


def rows_written(
    plan: MergePlan,
    joined: DataFrame,
    kinds: frozenset[RowKind] = ALL_ROW_KINDS,
    *,
    changes: ChangeRows | None = None,
    rows_as: str | None = None,
) -> tuple[DataFrame, Observation]:
    """The output rows: every target column from its CASE, then deleted and dropped rows filtered out; and
    the row metrics (``observed_counts``, with ``rows_as``), observed as the rows are written.

    The counts are observed over the output columns and the action code, not over the joined rows: Spark's
    observation is not part of whole-stage code generation, so each row that crosses it is copied whole, and
    a joined row holds both sides. A merge that writes deletion vectors is the exception: most of its joined
    rows are copies left in place, cheaper to drop before their columns are computed than to project.

    A merge that writes deletion vectors leaves unchanged rows where they are: no copies are written. With
    ``changes``, the change data feed's rows come with the data rows (``change_rows``).
    """
    clauses = _clauses_of(plan, kinds)
    removed = [DROP] + ([COPY] if plan.writes_deletion_vectors else [])
    if changes is None:  # deleted rows give change rows
        removed += [c.position for c in clauses if c.is_delete]
    action = F.col(ACTION)
    kept = ~action.isin(removed)
    rows = joined
    for identity in identities_generated(plan, clauses):
        # One column per identity, computed once per row: a second evaluation would draw other values. Rows
        # about to be filtered out draw none (their value could overflow where no written row's does).
        value = F.when(kept, generated_values(identity))
        rows = rows.withColumn(value_column(identity.column), value)
    read = {f.name: f.dataType for f in plan.target_schema.fields}
    fields = plan.final_schema.fields
    columns = [_output_column(plan, clauses, field, read) for field in fields]
    tracked = row_tracking_columns(plan.snapshot)
    preserved = _preserved_row_ids(plan, kinds, tracked.names) if tracked else []
    carried = [action, *preserved]
    if changes is not None:
        carried += [_current(plan, f, read).alias(preimage_column(i)) for i, f in enumerate(fields)]
        # Change rows carry the materialized row tracking columns too (readers of the feed ignore them).
        carried += [c.alias(preimage_column(len(fields) + i)) for i, c in enumerate(preserved)]
        carried += [F.col(c) for c in changes.carried()]
    if plan.writes_deletion_vectors:
        counted, counts = observe(rows, *observed_counts(plan, kinds, rows_as=rows_as))
        written = counted.filter(kept).select(*columns, *carried)
    else:
        counted, counts = observe(
            rows.select(*columns, *carried), *observed_counts(plan, kinds, rows_as=rows_as)
        )
        written = counted.filter(kept)
    generating = [c for c in clauses if c.generated]
    if generating:
        hidden = [F.col(c) for c in written.columns[len(fields) :]]
        written = written.select(*[_generated_column(field, generating) for field in fields], *hidden)
    names = output_names(plan)
    if changes is None:
        return written.select(*[F.col(quote(n)) for n in names]), counts
    return with_change_rows(written, names, clauses, action, changes), counts


def output_names(plan: MergePlan) -> list[str]:
    """The columns of ``rows_written``'s rows without change rows: the table's, then row tracking's
    materialized ones where the table has them."""
    tracked = row_tracking_columns(plan.snapshot)
    return [f.name for f in plan.final_schema.fields] + ([*tracked.names] if tracked else [])


def _preserved_row_ids(plan: MergePlan, kinds: frozenset[RowKind], names: tuple[str, str]) -> list[Column]:
    """The materialized row id and commit version of each output row, as Delta's MERGE writes them under row
    tracking (delta/log/row_tracking.py): a copied row keeps both, an updated one its id (its commit version
    is then the commit's, NULL here), an inserted one neither (its file's base row id gives it a fresh
    one)."""
    row_id, version = names
    if kinds == {"source_only"}:
        return [F.lit(None).cast("long").alias(row_id), F.lit(None).cast("long").alias(version)]
    target = plan.spec.target_alias
    return [
        F.col(f"{target}.{quote(ROW_ID_COLUMN)}").alias(row_id),  # NULL on an unmatched source row
        F.when(F.col(ACTION) == COPY, F.col(f"{target}.{quote(ROW_COMMIT_VERSION_COLUMN)}")).alias(version),
    ]


def identities_generated(plan: MergePlan, clauses: Sequence[ResolvedClause] | None = None) -> list[Identity]:
    """The identity columns some of ``clauses`` (by default, all of the merge's) generate values for."""
    columns = {c for clause in (plan.clauses if clauses is None else clauses) for c in clause.identity}
    return [i for name, i in identities(plan.target_schema).items() if name in columns]


def _generated_column(field: StructField, clauses: Sequence[ResolvedClause]) -> Column:
    """A column of the written rows where the rows of ``clauses`` that leave it to its generation expression
    get that expression, evaluated over the row as written (Delta's generated columns)."""
    positions = [c.position for c in clauses if field.name in c.generated]
    current = F.col(quote(field.name))
    if not positions:
        return current
    expression = F.expr(field.metadata[GENERATION_EXPRESSION_KEY]).cast(field.dataType)
    return F.when(F.col(ACTION).isin(positions), expression).otherwise(current).alias(field.name)


def _current(plan: MergePlan, field: StructField, read: Mapping[str, DataType]) -> Column:
    """The target row's value of a column, in the column's final type (NULL for a column being added)."""
    if field.name not in read:
        return F.lit(None).cast(field.dataType)
    return conform(F.col(f"{plan.spec.target_alias}.{quote(field.name)}"), read[field.name], field.dataType)


def _output_column(
    plan: MergePlan, clauses: Sequence[ResolvedClause], field: StructField, read: Mapping[str, DataType]
) -> Column:
    """A column of the written rows; its current value (for rows no clause assigns) in the final type.

    Args:
        clauses: the clauses that can act on the rows.
        read: the type of each column as the target rows were read (before schema evolution).
    """
    column = field.name
    current = _current(plan, field, read)
    chain: Column | None = None
    for clause in clauses:
        if column in clause.identity:
            value = F.col(value_column(column))
        elif column in clause.assignments:
            value = plan.values[(clause.position, column)]
        else:
            continue
        hit = F.col(ACTION) == clause.position
        chain = F.when(hit, value) if chain is None else chain.when(hit, value)
    return (current if chain is None else chain.otherwise(current)).alias(column)
