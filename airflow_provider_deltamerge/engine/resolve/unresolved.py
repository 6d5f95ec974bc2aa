"""Delta's error for a name a MERGE clause cannot resolve, raised where resolution finds one."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_deltamerge.exceptions import ClauseResolutionError
from airflow_provider_deltamerge.spec import MergeClause
from airflow_provider_deltamerge.spec.clauses import describe_clause
from airflow_provider_deltamerge.spec.validation import as_error, problem


def unresolved(
    position: int, clause: MergeClause, name: str, columns: Sequence[str], clause_name: str, fix: str
) -> ClauseResolutionError:
    """Delta's DELTA_MERGE_UNRESOLVED_EXPRESSION for ``name``, then where it stands and how to fix it."""
    return as_error(
        problem(
            "DELTA_MERGE_UNRESOLVED_EXPRESSION",
            describe_clause(position, clause),
            fix,
            sqlExpr=name,
            clause=clause_name,
            cols=", ".join(columns),
        ),
        ClauseResolutionError,
    )
