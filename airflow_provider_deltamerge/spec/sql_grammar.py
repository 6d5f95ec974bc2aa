"""The WHEN-clause grammar of Spark's SQL parser, which Delta uses for ``MERGE INTO`` text, checked on tokens.

sqlglot reads more than Spark does: clause kinds in any order, ``* EXCEPT``, ``UPDATE SET *`` under NOT
MATCHED BY SOURCE, an INSERT under WHEN MATCHED. Spark's grammar (Spark 4.2, which Delta 4.4 parses with)
is ``WHEN MATCHED ...* WHEN NOT MATCHED [BY TARGET] ...* WHEN NOT MATCHED BY SOURCE ...*`` with these
actions:

* MATCHED: ``UPDATE SET *``, ``UPDATE SET col = expr, ...`` or ``DELETE``;
* NOT MATCHED [BY TARGET]: ``INSERT *`` or ``INSERT (cols) VALUES (exprs)``;
* NOT MATCHED BY SOURCE: ``UPDATE SET col = expr, ...`` or ``DELETE``.

Anything else is Spark's ``PARSE_SYNTAX_ERROR`` at the first token that leaves this grammar, which is what
``first_violation`` finds. The checks Spark's parser makes after the grammar (value counts, conditions
that only the last clause of a kind may omit) are in ``parse_checks``, in Spark's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot.tokens import Token, TokenType

# Spark's WHEN-clause kinds in the order its grammar requires them.
_RANK = {"matched": 0, "not_matched": 1, "not_matched_by_source": 2}


@dataclass(frozen=True)
class Violation:
    """The token at which Spark's parser stops, and what it expected there."""

    token: Token
    expected: str


@dataclass(frozen=True)
class WhenClause:
    """One WHEN clause as the grammar sees it: its kind, whether it has a condition, its insert's counts."""

    group: str
    action: str  # UPDATE, DELETE or INSERT
    has_condition: bool
    insert_counts: tuple[int, int] | None = None  # (columns, values) of INSERT (cols) VALUES (values)


class _Cursor:
    def __init__(self, tokens: Sequence[Token], start: int, stop: int) -> None:
        self.tokens, self.at, self.stop = tokens, start, stop

    def word(self, offset: int = 0) -> str:
        index = self.at + offset
        return self.tokens[index].text.upper() if index < self.stop else ""

    def kind(self, offset: int = 0) -> TokenType | None:
        index = self.at + offset
        return self.tokens[index].token_type if index < self.stop else None

    def violation(self, offset: int, expected: str) -> Violation:
        # At the clause's end Spark stops at the next WHEN (or the end of the statement): its token is ours.
        index = min(self.at + offset, len(self.tokens) - 1)
        return Violation(self.tokens[index], expected)


def _kind(cursor: _Cursor, least: int) -> str | Violation:
    """The clause kind after WHEN, or where it leaves what Spark allows after kinds of rank ``least``."""
    if cursor.word() == "MATCHED":
        if least > _RANK["matched"]:
            return cursor.violation(0, "NOT (WHEN MATCHED clauses come first)")
        cursor.at += 1
        return "matched"
    if cursor.word() != "NOT":
        return cursor.violation(0, "MATCHED or NOT MATCHED")
    if cursor.word(1) != "MATCHED":
        return cursor.violation(1, "MATCHED")
    if cursor.word(2) != "BY":
        if least > _RANK["not_matched"]:
            return cursor.violation(2, "BY SOURCE (WHEN NOT MATCHED BY SOURCE clauses come last)")
        cursor.at += 2
        return "not_matched"
    side = cursor.word(3)
    if side == "TARGET" and least <= _RANK["not_matched"]:
        cursor.at += 4
        return "not_matched"
    if side == "SOURCE":
        cursor.at += 4
        return "not_matched_by_source"
    return cursor.violation(3, "SOURCE" if least > _RANK["not_matched"] else "TARGET or SOURCE")


def _then(cursor: _Cursor, depth: Sequence[int]) -> bool | None:
    """Move past THEN; whether the clause has a condition (None: no THEN, which sqlglot reports)."""
    has_condition = cursor.kind() == TokenType.AND
    while cursor.at < cursor.stop and not (cursor.kind() == TokenType.THEN and depth[cursor.at] == 0):
        cursor.at += 1
    if cursor.at >= cursor.stop:
        return None
    cursor.at += 1
    return has_condition


def _action(cursor: _Cursor, group: str, depth: Sequence[int]) -> tuple[int, int] | Violation | None:
    """Check the action after THEN; the (columns, values) counts of an explicit INSERT."""
    action = cursor.word()
    if action == "DELETE" and group != "not_matched":
        return None
    if action == "UPDATE" and group != "not_matched":
        if cursor.word(1) != "SET":
            return cursor.violation(1, "SET")
        if cursor.kind(2) == TokenType.STAR:
            if group == "not_matched_by_source":
                return cursor.violation(2, "a column (NOT MATCHED BY SOURCE has no source row for *)")
            if cursor.kind(3) == TokenType.EXCEPT:
                return cursor.violation(3, "the end of the clause (* EXCEPT is not Spark SQL)")
        return None
    if action == "INSERT" and group == "not_matched":
        if cursor.kind(1) == TokenType.STAR:
            if cursor.kind(2) == TokenType.EXCEPT:
                return cursor.violation(2, "the end of the clause (* EXCEPT is not Spark SQL)")
            return None
        if cursor.kind(1) != TokenType.L_PAREN:
            return cursor.violation(1, "* or (columns)")
        return _insert_counts(cursor, depth)
    allowed = {
        "matched": "UPDATE or DELETE",
        "not_matched": "INSERT",
        "not_matched_by_source": "UPDATE SET col = expr or DELETE",
    }[group]
    return cursor.violation(0, allowed)


def _insert_counts(cursor: _Cursor, depth: Sequence[int]) -> tuple[int, int] | None:
    """The column and value counts of ``INSERT (cols) VALUES (values)``; None if sqlglot must judge."""
    counts = []
    index = cursor.at + 1
    for _ in range(2):
        if index >= cursor.stop or cursor.tokens[index].token_type != TokenType.L_PAREN:
            return None
        inner = depth[index] + 1
        closing = next(
            (
                i
                for i in range(index + 1, cursor.stop)
                if cursor.tokens[i].token_type == TokenType.R_PAREN and depth[i] == depth[index]
            ),
            None,
        )
        if closing is None:
            return None
        commas = sum(
            1
            for i in range(index + 1, closing)
            if cursor.tokens[i].token_type == TokenType.COMMA and depth[i] == inner
        )
        counts.append(commas + 1 if closing > index + 1 else 0)
        index = closing + 2  # past ')' and VALUES
    return counts[0], counts[1]


def read_clauses(
    tokens: Sequence[Token], depth: Sequence[int], starts: Sequence[int]
) -> list[WhenClause] | Violation:
    """The WHEN clauses starting at token indexes ``starts``, or the first place Spark's grammar refuses."""
    clauses: list[WhenClause] = []
    least = 0
    for n, start in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else len(tokens)
        cursor = _Cursor(tokens, start + 1, stop)
        group = _kind(cursor, least)
        if isinstance(group, Violation):
            return group
        least = _RANK[group]
        has_condition = _then(cursor, depth)
        if has_condition is None:
            return clauses
        action = cursor.word()
        counts = _action(cursor, group, depth)
        if isinstance(counts, Violation):
            return counts
        clauses.append(WhenClause(group, action, has_condition, counts))
    return clauses


# Spark's own classes for the checks its parser makes after the grammar (the Python API's clauses get
# Delta's DELTA_NON_LAST_* classes instead, as DeltaMergeBuilder raises them).
NON_LAST_OMIT_CONDITION = {
    "matched": "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
    "not_matched": "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION",
    "not_matched_by_source": "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
}


def parse_checks(clauses: Sequence[WhenClause]) -> tuple[str, int, dict[str, object]] | None:
    """The first error Spark's parser raises after the grammar, as (error class, clause position, params),
    or None.

    Spark checks every INSERT's value count while it builds the clauses, then, kind by kind, that only the
    last clause of a kind omits its condition.
    """
    for position, clause in enumerate(clauses, start=1):
        if clause.insert_counts and clause.insert_counts[0] != clause.insert_counts[1]:
            columns, values = clause.insert_counts
            return (
                "MERGE_INSERT_VALUE_COUNT_MISMATCH",
                position,
                {
                    "actualCount": values,
                    "expectedCount": columns,
                },
            )
    for group, error_class in NON_LAST_OMIT_CONDITION.items():
        of_group = [(n, c) for n, c in enumerate(clauses, start=1) if c.group == group]
        for position, clause in of_group[:-1]:
            if not clause.has_condition:
                return error_class, position, {}
    return None
