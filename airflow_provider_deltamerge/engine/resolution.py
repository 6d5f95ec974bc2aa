"""Resolve a spec's clauses against the real target and source schemas: ``*`` expansion and assignments.

Every UPDATE and INSERT clause comes out as a full map from target column to a Spark SQL expression, so
the executors only evaluate; they never need to know how a clause was written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql.types import StructType

from airflow_provider_deltamerge.exceptions import ClauseResolutionError
from airflow_provider_deltamerge.spec import (
    MatchedUpdate,
    MergeClause,
    MergeSpec,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
)
from airflow_provider_deltamerge.spec.clauses import ClauseKind, MatchGroup, describe_clause
from airflow_provider_deltamerge.spec.delta_messages import delta_message

NULL = "NULL"


@dataclass(frozen=True)
class ResolvedClause:
    """A clause ready to evaluate: its position, kind, condition, and target column -> SQL expression."""

    position: int
    kind: ClauseKind
    group: MatchGroup
    condition: str | None
    assignments: Mapping[str, str]  # empty for DELETE; for INSERT every target column

    @property
    def is_delete(self) -> bool:
        return self.kind in ("matched_delete", "not_matched_by_source_delete")

    @property
    def is_insert(self) -> bool:
        return self.kind == "not_matched_insert"


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def resolve_clauses(spec: MergeSpec, target: StructType, source: StructType) -> tuple[ResolvedClause, ...]:
    """Expand and check every clause of ``spec`` against the target and source schemas.

    Raises:
        ClauseResolutionError: with Delta's wording, naming the clause and the columns it could use.
    """
    target_names = [f.name for f in target.fields]
    source_names = [f.name for f in source.fields]
    return tuple(
        _resolve(spec, position, clause, target_names, source_names)
        for position, clause in enumerate(spec.clauses, start=1)
    )


def _resolve(
    spec: MergeSpec, position: int, clause: MergeClause, target: Sequence[str], source: Sequence[str]
) -> ResolvedClause:
    assignments: dict[str, str] = {}
    match clause:
        case MatchedUpdate(star=True):
            assignments = _star(spec, position, clause, target, source, missing_is_null=False)
        case MatchedUpdate() | NotMatchedBySourceUpdate():
            assignments = _explicit(spec, position, clause, clause.set, target)
        case NotMatchedInsert(star=True):
            assignments = _star(spec, position, clause, target, source, missing_is_null=True)
        case NotMatchedInsert():
            given = _explicit(spec, position, clause, clause.values, target)
            assignments = {column: given.get(column, NULL) for column in target}
    return ResolvedClause(position, clause.kind, clause.group, clause.condition, assignments)


def _star(
    spec: MergeSpec,
    position: int,
    clause: MatchedUpdate | NotMatchedInsert,
    target: Sequence[str],
    source: Sequence[str],
    *,
    missing_is_null: bool,
) -> dict[str, str]:
    """``*`` as Delta expands it without schema evolution: over the target's columns, from same-named
    source columns; a target column the source lacks is an error for UPDATE and NULL for INSERT."""
    by_lower = {name.lower(): name for name in source}
    excluded = {name.lower() for name in clause.except_columns}
    out: dict[str, str] = {}
    for column in target:
        if column.lower() in excluded:
            continue
        source_column = by_lower.get(column.lower())
        if source_column is not None:
            out[column] = f"{spec.source_alias}.{quote(source_column)}"
        elif missing_is_null:
            out[column] = NULL
        else:
            raise _unresolved(
                spec, position, clause, f"{spec.source_alias}.{column}", source, "UPDATE clause"
            )
    return out


def _explicit(
    spec: MergeSpec,
    position: int,
    clause: MergeClause,
    pairs: Sequence[tuple[str, str]],
    target: Sequence[str],
) -> dict[str, str]:
    by_lower = {name.lower(): name for name in target}
    out: dict[str, str] = {}
    for raw_column, expression in pairs:
        column = _strip_alias(raw_column, spec.target_alias)
        if "." in column:
            raise ClauseResolutionError(
                f"{describe_clause(position, clause)}: assigning the nested field {raw_column} is not "
                "supported by this engine version. Assign the whole struct column instead, e.g. "
                f"SET {column.split('.')[0]} = named_struct(...).",
                error_class="DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION",
            )
        resolved = by_lower.get(column.lower())
        if resolved is None:
            clause_name = "INSERT clause" if clause.kind == "not_matched_insert" else "UPDATE clause"
            raise _unresolved(spec, position, clause, raw_column, target, clause_name, side=spec.target_alias)
        out[resolved] = expression
    return out


def _strip_alias(column: str, alias: str) -> str:
    name = column.strip()
    if name.lower().startswith(alias.lower() + "."):
        name = name[len(alias) + 1 :]
    return name.replace("`", "")


def _unresolved(
    spec: MergeSpec,
    position: int,
    clause: MergeClause,
    expression: str,
    columns: Sequence[str],
    clause_name: str,
    *,
    side: str | None = None,
) -> ClauseResolutionError:
    alias = side or spec.source_alias
    given = ", ".join(f"{alias}.{c}" for c in columns)
    return ClauseResolutionError(
        f"{describe_clause(position, clause)}: "
        + delta_message(
            "DELTA_MERGE_UNRESOLVED_EXPRESSION", sqlExpr=expression, clause=clause_name, cols=given
        )
        + " Fix the column name, or list the columns explicitly instead of using *.",
        error_class="DELTA_MERGE_UNRESOLVED_EXPRESSION",
    )
