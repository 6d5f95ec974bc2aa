"""The grammar rules of MERGE, checked in pure Python (no I/O) when a spec is built.

Every check adds a ``Problem``; ``raise_problems`` turns them into one ``MergeSpecError`` so that an author
sees every mistake at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from airflow_provider_deltamerge.exceptions import DeltaMergeError, MergeSpecError
from airflow_provider_deltamerge.spec.clauses import (
    GROUP_SQL_NAMES,
    MatchedUpdate,
    MergeClause,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
    describe_action,
    describe_clause,
)
from airflow_provider_deltamerge.spec.delta_messages import delta_message
from airflow_provider_deltamerge.spec.names import folded, format_path, split_column_path, strip_alias
from airflow_provider_deltamerge.spec.references import called_functions, column_references
from airflow_provider_deltamerge.spec.source import MergeSource, QuerySource

ErrorT = TypeVar("ErrorT", bound=DeltaMergeError)

_NON_LAST_OMIT_CONDITION = {
    "matched": "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
    "not_matched": "DELTA_NON_LAST_NOT_MATCHED_CLAUSE_OMIT_CONDITION",
    "not_matched_by_source": "DELTA_NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: Delta's error class and the full message (Delta's text, where, fix)."""

    error_class: str
    message: str


def problem(error_class: str, where: str, fix: str, **params: object) -> Problem:
    """A ``Problem`` worded as Delta's message for ``error_class``, then ``(where)``, then the fix."""
    return Problem(error_class, f"{delta_message(error_class, **params)} ({where}) {fix}")


def as_error(found: Problem, error: type[ErrorT]) -> ErrorT:
    """``found`` as an exception of the layer that met it (resolution, schema evolution, ...)."""
    return error(found.message, error_class=found.error_class)


def raise_problems(problems: Sequence[Problem], error: type[DeltaMergeError] = MergeSpecError) -> None:
    """Raise one ``error`` listing every problem, if there is any.

    Raises:
        DeltaMergeError: ``error``, with the first problem's error class and a numbered list of all of them.
    """
    if not problems:
        return
    if len(problems) == 1:
        raise error(problems[0].message, error_class=problems[0].error_class)
    listing = "\n".join(f"{n}. [{p.error_class}] {p.message}" for n, p in enumerate(problems, start=1))
    raise error(
        f"{len(problems)} problems in the merge spec:\n{listing}", error_class=problems[0].error_class
    )


_ALLOWED_ACTIONS = {
    "matched": "A WHEN MATCHED clause can UPDATE or DELETE the matched target row; inserting belongs under "
    "WHEN NOT MATCHED.",
    "not_matched": "A WHEN NOT MATCHED clause can only INSERT (there is no target row); update or delete "
    "under WHEN MATCHED or WHEN NOT MATCHED BY SOURCE.",
    "not_matched_by_source": "A WHEN NOT MATCHED BY SOURCE clause can UPDATE SET col = expr or DELETE; "
    "it has no source row, so neither * nor INSERT.",
}


def action_not_allowed(position: int, group: str, action: str) -> Problem:
    """A clause whose action its WHEN group does not allow, such as INSERT under WHEN MATCHED."""
    return problem(
        "DELTAMERGE_INVALID_CLAUSE_ACTION",
        describe_action(position, group, action),
        _ALLOWED_ACTIONS[group],
        action=action,
        group=GROUP_SQL_NAMES[group],
    )


def _blank(text: str | None) -> bool:
    return text is not None and not text.strip()


def _column_paths(
    names: Sequence[str], where: str, target_alias: str
) -> tuple[list[tuple[str, ...]], list[Problem]]:
    """Split assignment targets into name parts without the target alias; unparsable names are problems."""
    paths, problems = [], []
    for name in names:
        parts = split_column_path(name)
        if parts is None:
            problems.append(
                problem(
                    "DELTAMERGE_INVALID_COLUMN_NAME",
                    where,
                    "Write a column such as `city` or `addr.city`; quote odd names with backticks.",
                    name=repr(name),
                )
            )
        else:
            paths.append(strip_alias(parts, target_alias))
    return paths, problems


def _set_conflicts(paths: list[tuple[str, ...]], where: str) -> list[Problem]:
    """DELTA_CONFLICT_SET_COLUMN: a column assigned twice, or a column together with one of its fields."""
    keys = [folded(p) for p in paths]
    conflicting = [
        format_path(paths[i])
        for i, key in enumerate(keys)
        if any(
            j != i and (other[: len(key)] == key or key[: len(other)] == other)
            for j, other in enumerate(keys)
        )
    ]
    if not conflicting:
        return []
    column_list = "[" + ", ".join(f"`{c}`" for c in conflicting) + "]"
    return [
        problem(
            "DELTA_CONFLICT_SET_COLUMN",
            where,
            "Assign each column once, and either a whole struct or some of its fields, not both.",
            columnList=column_list,
        )
    ]


def _insert_column_problems(paths: list[tuple[str, ...]], where: str) -> list[Problem]:
    problems = [
        problem(
            "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION",
            where,
            f"Insert the whole struct `{path[0]}`, e.g. {path[0]} = named_struct(...).",
            operation="INSERT clause of MERGE operation",
            fieldName=format_path(path),
        )
        for path in paths
        if len(path) > 1
    ]
    keys = [folded(p) for p in paths]
    repeated = sorted({format_path(p) for p, k in zip(paths, keys, strict=True) if keys.count(k) > 1})
    if repeated:
        problems.append(
            problem(
                "DELTA_DUPLICATE_COLUMNS_ON_INSERT",
                where,
                f"Give a value for {', '.join(repeated)} only once.",
            )
        )
    return problems


def _action_problems(position: int, clause: MergeClause, target_alias: str) -> list[Problem]:
    """Problems of a clause's action: its assignments, ``*`` and ``EXCEPT``."""
    if not isinstance(clause, MatchedUpdate | NotMatchedInsert | NotMatchedBySourceUpdate):
        return []
    where = describe_clause(position, clause)
    is_insert = isinstance(clause, NotMatchedInsert)
    action = "INSERT" if is_insert else "UPDATE SET"
    assignments = clause.values if isinstance(clause, NotMatchedInsert) else clause.set
    star = not isinstance(clause, NotMatchedBySourceUpdate) and clause.star
    except_columns = () if isinstance(clause, NotMatchedBySourceUpdate) else clause.except_columns
    problems: list[Problem] = []
    if star and assignments:
        problems.append(
            problem(
                "DELTAMERGE_STAR_WITH_ASSIGNMENTS",
                where,
                "Use update_all()/insert_all() for *, or list the columns, but not both.",
                action=action,
            )
        )
    elif not star and not assignments:
        star_hint = {
            "matched_update": "or use update_all() for *",
            "not_matched_insert": "or use insert_all() for *",
            "not_matched_by_source_update": "or use delete_by_source() to drop the rows",
        }[clause.kind]
        problems.append(
            problem(
                "DELTAMERGE_EMPTY_ASSIGNMENTS",
                where,
                f"Assign at least one column, {star_hint}.",
                action=action,
            )
        )
    if except_columns and not star:
        problems.append(
            problem(
                "DELTAMERGE_EXCEPT_WITHOUT_STAR",
                where,
                "Drop except_columns, or use update_all()/insert_all() with it.",
                columns=", ".join(except_columns),
            )
        )
    paths, name_problems = _column_paths([column for column, _ in assignments], where, target_alias)
    _, except_problems = _column_paths(except_columns, where, target_alias)
    problems += name_problems + except_problems
    problems += _insert_column_problems(paths, where) if is_insert else _set_conflicts(paths, where)
    return problems


def clause_problems(clauses: Sequence[MergeClause | Problem], *, target_alias: str = "t") -> list[Problem]:
    """Every grammar problem of ``clauses``, in clause order.

    Args:
        clauses: the WHEN clauses in evaluation order; a ``Problem`` stands in for a clause that a front door
            (JSON, SQL) could not build, so that the positions of the others stay right.
        target_alias: the target's alias, which may qualify assignment targets (``t.addr.city``).
    """
    if not clauses:
        return [
            Problem(
                "DELTA_MERGE_MISSING_WHEN",
                delta_message("DELTA_MERGE_MISSING_WHEN")
                + " Add a clause such as update_all() or insert_all().",
            )
        ]
    problems: list[Problem] = []
    for position, clause in enumerate(clauses, start=1):
        if isinstance(clause, Problem):
            problems.append(clause)
            continue
        where = describe_clause(position, clause)
        later_same_group = [
            c for c in clauses[position:] if not isinstance(c, Problem) and c.group == clause.group
        ]
        if clause.condition is None and later_same_group:
            problems.append(
                problem(
                    _NON_LAST_OMIT_CONDITION[clause.group],
                    where,
                    "Give this clause a condition or move it after the others of its kind.",
                )
            )
        if _blank(clause.condition):
            problems.append(
                problem(
                    "DELTAMERGE_BLANK_CONDITION",
                    where,
                    "Write a condition, or pass condition=None for a clause that always applies.",
                    part="clause condition",
                )
            )
        problems += _action_problems(position, clause, target_alias)
    return problems


def _same_alias(alias: str, condition: str) -> Problem:
    """Target and source under one alias: Spark's AMBIGUOUS_REFERENCE for the ON condition's first
    ``alias.column``, as Delta's analysis reports it (our own class when no reference uses the alias)."""
    references = column_references(condition)
    qualified = [
        parts
        for parts in (references if isinstance(references, tuple) else ())
        if len(parts) > 1 and parts[0].lower() == alias.lower()
    ]
    fix = "Give the target and the source different aliases."
    if not qualified:
        return problem("DELTAMERGE_SAME_ALIAS", "aliases", fix, alias=alias)
    name = ".".join(f"`{part}`" for part in qualified[0][:2])
    return problem("AMBIGUOUS_REFERENCE", "ON", fix, name=name, referenceNames=f"[{name}, {name}]")


def _alias_problems(target_alias: str, source_alias: str, condition: str) -> list[Problem]:
    problems = [
        problem(
            "DELTAMERGE_INVALID_ALIAS",
            f"{role} alias",
            "Use a plain name such as t or s.",
            name=repr(alias),
        )
        for role, alias in (("target", target_alias), ("source", source_alias))
        if split_column_path(alias) is None or len(split_column_path(alias) or ()) != 1
    ]
    if not problems and target_alias.lower() == source_alias.lower():
        problems.append(_same_alias(target_alias, condition))
    return problems


def _deduplication_problems(keys: Sequence[str], order_by: Sequence[str]) -> list[Problem]:
    where = "source de-duplication"
    if keys and not order_by:
        return [
            problem(
                "DELTAMERGE_INVALID_DEDUPLICATION",
                where,
                "Set deduplicate_order_by to the source column(s) whose greatest value marks the latest row.",
                missing="an ordering (deduplicate_order_by)",
            )
        ]
    if order_by and not keys:
        return [
            problem(
                "DELTAMERGE_INVALID_DEDUPLICATION",
                where,
                "Set deduplicate_source_by to the source key column(s), usually those of the ON condition.",
                missing="key columns (deduplicate_source_by)",
            )
        ]
    return [
        problem(
            "DELTAMERGE_INVALID_COLUMN_NAME",
            where,
            "Name a source column, without the source alias.",
            name=repr(name),
        )
        for name in (*keys, *order_by)
        if split_column_path(name) is None
    ]


# Spark's functions that call any Java method: with them a template value or a clause runs JVM code with the
# job's credentials (``java_method('java.lang.System', 'getenv', ...)`` reads its secrets).
REFLECTION_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})


def reflection_problems(texts: Iterable[tuple[str, str]]) -> list[Problem]:
    """A problem for each call of a reflection function in the ``(where, sql)`` texts of a merge."""
    return [
        problem(
            "DELTAMERGE_REFLECTION_REFUSED",
            where,
            "Reflection runs arbitrary JVM code in the job; compute the value with Spark SQL's built-in "
            "functions, or upstream of the merge.",
            function=name,
        )
        for where, sql in texts
        for name in sorted(called_functions(sql) & REFLECTION_FUNCTIONS)
    ]


def _merge_texts(
    condition: str, clauses: Sequence[MergeClause | Problem], source: MergeSource | None
) -> Iterable[tuple[str, str]]:
    """Every SQL text of a merge with where it stands: the ON condition, the clauses, the source query."""
    yield "ON", condition
    for position, clause in enumerate(clauses, start=1):
        if isinstance(clause, Problem):
            continue
        where = describe_clause(position, clause)
        if clause.condition:
            yield where, clause.condition
        if isinstance(clause, NotMatchedInsert):
            yield from ((where, sql) for _, sql in clause.values)
        elif isinstance(clause, MatchedUpdate | NotMatchedBySourceUpdate):
            yield from ((where, sql) for _, sql in clause.set)
    if isinstance(source, QuerySource):
        yield "source query", source.sql


def merge_problems(
    clauses: Sequence[MergeClause | Problem],
    *,
    condition: str,
    source: MergeSource | None = None,
    target_alias: str,
    source_alias: str,
    deduplicate_source_by: Sequence[str],
    deduplicate_order_by: Sequence[str],
) -> list[Problem]:
    """Every problem of a whole MERGE: the ON condition, aliases, source de-duplication, then the clauses."""
    problems: list[Problem] = []
    if _blank(condition):
        problems.append(
            problem(
                "DELTAMERGE_BLANK_CONDITION",
                "ON",
                "Write the merge condition that matches source rows to target rows, e.g. t.id = s.id.",
                part="merge condition",
            )
        )
    problems += _alias_problems(target_alias, source_alias, condition)
    problems += _deduplication_problems(deduplicate_source_by, deduplicate_order_by)
    problems += clause_problems(clauses, target_alias=target_alias)
    return problems + reflection_problems(_merge_texts(condition, clauses, source))


def check_clauses(clauses: Sequence[MergeClause], *, target_alias: str = "t") -> None:
    """Raise one ``MergeSpecError`` listing every grammar problem of ``clauses``, if there is any.

    Cheap and pure, so an operator can call it at DAG parse time.

    Raises:
        MergeSpecError: with the first problem's Delta error class and a numbered list of all of them.
    """
    raise_problems(clause_problems(clauses, target_alias=target_alias))
