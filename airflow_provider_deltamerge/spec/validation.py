"""The grammar rules of MERGE clauses, checked in pure Python when a spec is built."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec.clauses import MergeClause, describe_clause
from airflow_provider_deltamerge.spec.delta_messages import delta_message

_NON_LAST_OMIT_CONDITION = {
    "matched": "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
    "not_matched": "DELTA_NON_LAST_NOT_MATCHED_CLAUSE_OMIT_CONDITION",
    "not_matched_by_source": "DELTA_NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
}


def clause_problems(clauses: Sequence[MergeClause]) -> list[tuple[str, str]]:
    """Every grammar problem of ``clauses`` as ``(error_class, message with the fix)`` pairs."""
    if not clauses:
        return [
            (
                "DELTA_MERGE_MISSING_WHEN",
                delta_message("DELTA_MERGE_MISSING_WHEN")
                + " Add a clause such as update_all() or insert_all().",
            )
        ]
    problems = []
    for position, clause in enumerate(clauses, start=1):
        later_same_group = [c for c in clauses[position:] if c.group == clause.group]
        if clause.condition is None and later_same_group:
            error_class = _NON_LAST_OMIT_CONDITION[clause.group]
            problems.append(
                (
                    error_class,
                    f"{describe_clause(position, clause)}: {delta_message(error_class).rstrip('.')}. "
                    "Give this clause a condition or move it after the others of its kind.",
                )
            )
    return problems


def check_clauses(clauses: Sequence[MergeClause]) -> None:
    """Raise one ``MergeSpecError`` listing every grammar problem of ``clauses``, if there is any.

    Raises:
        MergeSpecError: with the first problem's Delta error class and a numbered list of all of them.
    """
    problems = clause_problems(clauses)
    if not problems:
        return
    if len(problems) == 1:
        raise MergeSpecError(problems[0][1], error_class=problems[0][0])
    listing = "\n".join(f"{n}. [{cls}] {text}" for n, (cls, text) in enumerate(problems, start=1))
    raise MergeSpecError(
        f"{len(problems)} problems in the MERGE clauses:\n{listing}", error_class=problems[0][0]
    )
