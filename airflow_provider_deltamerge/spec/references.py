"""The column references of a Spark SQL condition or expression, found with sqlglot (no Spark)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from airflow_provider_deltamerge.spec.sql_dialect import SparkSql


@dataclass(frozen=True)
class ExpressionSyntaxError:
    """Why an expression does not parse, with the position inside the expression's own text."""

    line: int
    column: int
    near: str
    description: str


def column_references(sql: str) -> tuple[tuple[str, ...], ...] | ExpressionSyntaxError:
    """The dotted name parts of every column ``sql`` refers to, each once (in sqlglot's tree order).

    ``t.addr.city`` gives ``("t", "addr", "city")``: the caller decides which part is an alias. Names
    bound by lambdas (``x -> x + 1``) are not columns and are left out, as sqlglot parses them.

    Returns:
        The references, or an ``ExpressionSyntaxError`` if ``sql`` is not a Spark SQL expression.
    """
    try:
        tree = sqlglot.parse_one(sql, read=SparkSql, into=exp.Condition)
    except ParseError as err:
        first = err.errors[0] if err.errors else {}
        return ExpressionSyntaxError(
            line=int(first.get("line") or 1),
            column=int(first.get("col") or 1),
            near=str(first.get("highlight") or ""),
            description=str(first.get("description") or err),
        )
    except TokenError as err:
        return ExpressionSyntaxError(line=1, column=1, near=sql[:20], description=str(err))
    found: dict[tuple[str, ...], None] = {}
    for column in tree.find_all(exp.Column):
        if isinstance(column.this, exp.Star):
            continue
        parts = [part.name for part in column.parts]
        node: exp.Expression = column
        # sqlglot keeps at most catalog.db.table.column in a Column; deeper struct fields hang off Dots.
        while isinstance(node.parent, exp.Dot) and node.parent.this is node:
            node = node.parent
            parts.append(node.expression.name)
        found[tuple(parts)] = None
    return tuple(found)


def conjuncts(sql: str) -> list[exp.Expr] | None:
    """The ``AND``-ed parts of a condition, parentheses removed; None if ``sql`` does not parse."""
    try:
        condition = sqlglot.parse_one(sql, read=SparkSql)
    except ParseError:
        return None
    parts = condition.flatten() if isinstance(condition, exp.And) else [condition]
    return [part.unnest() for part in parts]


def called_functions(sql: str) -> set[str]:
    """The lower-cased names called in ``sql`` (``f(`` with ``f`` plain, backquoted or qualified).

    Read from tokens rather than a parse tree, so that text which does not parse is still searched.
    """
    try:
        tokens = Spark().tokenizer().tokenize(sql)
    except TokenError:
        return set()
    return {
        name.text.lower()
        for name, after in itertools.pairwise(tokens)
        if name.token_type in (TokenType.VAR, TokenType.IDENTIFIER) and after.token_type == TokenType.L_PAREN
    }
