"""``MERGE INTO`` as a second front door: Spark/Databricks MERGE text parsed into the same ``MergeSpec``.

sqlglot checks the syntax (errors report line and column) and gives the statement's structure: the
tables, the WHEN clauses, ``*`` and ``* EXCEPT``. Conditions, expressions and a source query are then
taken from the statement *verbatim* (sliced between sqlglot's tokens), never re-generated, so the text
that reaches Spark is the author's and ``parse_merge_sql(to_merge_sql(spec)) == spec``.

sqlglot 30 reads every Delta clause form but not ``MERGE WITH SCHEMA EVOLUTION INTO``; those three words
are blanked out before parsing (keeping every position) and recorded as ``schema_evolution=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec.clauses import (
    MatchedDelete,
    MatchedUpdate,
    MergeClause,
    NotMatchedBySourceDelete,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
    describe_action,
)
from airflow_provider_deltamerge.spec.delta_messages import delta_message
from airflow_provider_deltamerge.spec.merge_spec import MergeSpec, assemble_spec
from airflow_provider_deltamerge.spec.source import (
    PATH_FORMATS,
    MergeSource,
    PathSource,
    QuerySource,
    TableSource,
)
from airflow_provider_deltamerge.spec.validation import (
    Problem,
    action_not_allowed,
    clause_problems,
    problem,
    raise_problems,
)

_OPENERS = (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.CASE)
_CLOSERS = (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.END)


def is_path_like(name: str) -> bool:
    """Whether a target or source name is a path or URI rather than a catalog table name."""
    return "/" in name or "\\" in name


class _Tokens:
    """The statement's tokens with their nesting depth (parentheses, brackets, CASE ... END)."""

    def __init__(self, sql: str, tokens: list[Token]) -> None:
        self.sql = sql
        self.tokens = [t for t in tokens if t.token_type != TokenType.SEMICOLON]
        self.depth: list[int] = []
        level = 0
        for token in self.tokens:
            if token.token_type in _CLOSERS:
                level -= 1
            self.depth.append(level)
            if token.token_type in _OPENERS:
                level += 1

    def text(self, first: int, last: int) -> str:
        """The statement's own text from token ``first`` through token ``last``."""
        if last < first:
            return ""
        return self.sql[self.tokens[first].start : self.tokens[last].end + 1]

    def find(self, kind: TokenType, start: int, stop: int, depth: int = 0) -> int:
        """Index of the first ``kind`` token at ``depth`` in ``[start, stop)``, or ``stop`` if none."""
        return next(
            (i for i in range(start, stop) if self.tokens[i].token_type == kind and self.depth[i] == depth),
            stop,
        )

    def split(self, start: int, stop: int, depth: int) -> list[tuple[int, int]]:
        """``[start, stop)`` cut at the commas of ``depth``, as inclusive ``(first, last)`` token ranges."""
        items, first = [], start
        for i in range(start, stop + 1):
            if i == stop or (self.tokens[i].token_type == TokenType.COMMA and self.depth[i] == depth):
                if i > first:
                    items.append((first, i - 1))
                first = i + 1
        return items

    def closing(self, opener: int) -> int:
        """Index of the token closing the parenthesis at ``opener``."""
        return next(
            i
            for i in range(opener + 1, len(self.tokens))
            if self.tokens[i].token_type in _CLOSERS and self.depth[i] == self.depth[opener]
        )


@dataclass(frozen=True)
class _ClauseText:
    """The verbatim pieces of one WHEN clause."""

    condition: str | None
    columns: tuple[str, ...]
    expressions: tuple[str, ...]


def _syntax_error(sql: str, line: int, column: int, near: str, detail: str) -> MergeSpecError:
    shown = sql.splitlines()[line - 1] if 0 < line <= len(sql.splitlines()) else ""
    return MergeSpecError(
        f"{delta_message('PARSE_SYNTAX_ERROR', error=repr(near))} (line {line}, column {column}: {detail})\n"
        f"  {shown}\n  {' ' * max(column - 1, 0)}^\n"
        "Fix the MERGE INTO statement at that position; see the Delta Lake MERGE INTO syntax.",
        error_class="PARSE_SYNTAX_ERROR",
    )


def _tokenize(sql: str) -> list[Token]:
    try:
        return Spark().tokenize(sql)
    except TokenError as err:
        raise MergeSpecError(
            f"{delta_message('PARSE_SYNTAX_ERROR', error='an unterminated quote or comment')} ({err}) "
            "Close every string, backtick-quoted name and /* comment of the MERGE INTO statement.",
            error_class="PARSE_SYNTAX_ERROR",
        ) from err


def _without_schema_evolution(sql: str, tokens: list[Token]) -> tuple[str, bool]:
    """``sql`` with ``WITH SCHEMA EVOLUTION`` blanked (sqlglot cannot read it), and whether it was there."""
    words = [t.text.upper() for t in tokens[:5]]
    if words[:5] != ["MERGE", "WITH", "SCHEMA", "EVOLUTION", "INTO"]:
        return sql, False
    start, end = tokens[1].start, tokens[3].end + 1
    return sql[:start] + " " * (end - start) + sql[end:], True


def _parse_statement(sql: str) -> exp.Merge:
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except ParseError as err:
        first = err.errors[0] if err.errors else {}
        raise _syntax_error(
            sql,
            int(first.get("line") or 0),
            int(first.get("col") or 0),
            str(first.get("highlight") or ""),
            str(first.get("description") or err),
        ) from err
    if len(statements) != 1 or not isinstance(statements[0], exp.Merge):
        kinds = ", ".join(type(s).__name__.upper() for s in statements) or "nothing"
        raise MergeSpecError(
            f"Expected one MERGE INTO statement, found {kinds}. Pass a single MERGE INTO ... statement.",
            error_class="PARSE_SYNTAX_ERROR",
        )
    return statements[0]


def _table_name(table: exp.Table) -> str:
    bare = table.copy()
    bare.set("alias", None)
    return bare.sql(dialect="spark")


def _target(table: exp.Expression) -> tuple[str, str | None]:
    """The target path or table name, and its alias if the statement gives one."""
    if not isinstance(table, exp.Table):
        raise MergeSpecError(f"MERGE INTO needs a table or delta.`path` target, not {table.sql('spark')}.")
    is_delta_path = table.db.lower() == "delta" and not table.catalog
    is_bare_path = not table.db and table.this.args.get("quoted") and is_path_like(table.name)
    target = table.name if is_delta_path or is_bare_path else _table_name(table)
    return target, table.alias or (None if is_path_like(target) else table.name)


def _source(node: exp.Expression, tokens: _Tokens, using: int) -> tuple[MergeSource, str | None]:
    """The source and its alias if the statement gives one (a table's own name counts as its alias)."""
    if isinstance(node, exp.Subquery):
        opener = using + 1
        return QuerySource(sql=tokens.text(opener + 1, tokens.closing(opener) - 1)), node.alias or None
    if isinstance(node, exp.Table):
        if node.db.lower() in PATH_FORMATS and not node.catalog:
            return PathSource(path=node.name, format=node.db.lower()), node.alias or None
        return TableSource(name=_table_name(node)), node.alias or node.name
    raise MergeSpecError(
        f"MERGE INTO ... USING needs a table, a format.`path` or a (subquery), not {node.sql('spark')}."
    )


def _clause_text(tokens: _Tokens, when: int, stop: int) -> _ClauseText:
    """Slice one WHEN clause (tokens ``[when, stop)``) into its condition, columns and expressions."""
    then = tokens.find(TokenType.THEN, when, stop)
    and_ = tokens.find(TokenType.AND, when, then)
    condition = tokens.text(and_ + 1, then - 1) if and_ < then else None
    action = tokens.tokens[then + 1].token_type if then + 1 < stop else None
    columns: list[str] = []
    expressions: list[str] = []
    if action == TokenType.UPDATE and not _is_star(tokens, then + 3):
        for first, last in tokens.split(then + 3, stop, depth=0):
            equals = tokens.find(TokenType.EQ, first, last + 1)
            columns.append(tokens.text(first, equals - 1))
            expressions.append(tokens.text(equals + 1, last))
    elif action == TokenType.INSERT and not _is_star(tokens, then + 2):
        names_end = tokens.closing(then + 2)
        values_open = names_end + 2
        columns = [tokens.text(a, b) for a, b in tokens.split(then + 3, names_end, depth=1)]
        expressions = [
            tokens.text(a, b) for a, b in tokens.split(values_open + 1, tokens.closing(values_open), 1)
        ]
    return _ClauseText(condition, tuple(columns), tuple(expressions))


def _is_star(tokens: _Tokens, index: int) -> bool:
    return index < len(tokens.tokens) and tokens.tokens[index].token_type == TokenType.STAR


def _star_except(action: exp.Expression) -> tuple[bool, tuple[str, ...]]:
    """Whether an UPDATE/INSERT action is ``*``, and its ``EXCEPT`` columns."""
    star = action.this if isinstance(action, exp.Insert) else (action.expressions or [None])[0]
    if not isinstance(star, exp.Star):
        return False, ()
    return True, tuple(c.sql(dialect="spark") for c in star.args.get("except_") or ())


def _clause(position: int, when: exp.When, text: _ClauseText) -> MergeClause | Problem:
    """The spec clause of one WHEN, or the problem if its group does not allow its action."""
    if when.args.get("matched"):
        group = "matched"
    else:
        group = "not_matched_by_source" if when.args.get("source") else "not_matched"
    action = when.args["then"]
    star, except_columns = _star_except(action)
    if len(text.columns) != len(text.expressions):
        return problem(
            "MERGE_INSERT_VALUE_COUNT_MISMATCH",
            describe_action(position, group, "INSERT"),
            "Give one value for each column the INSERT names.",
            actualCount=len(text.expressions),
            expectedCount=len(text.columns),
        )
    pairs = tuple(zip(text.columns, text.expressions, strict=True))
    name = (
        "DELETE"
        if isinstance(action, exp.Var)
        else ("INSERT" if isinstance(action, exp.Insert) else "UPDATE SET") + (" *" if star else "")
    )
    if group == "matched" and name.startswith("UPDATE"):
        return MatchedUpdate(set=pairs, star=star, except_columns=except_columns, condition=text.condition)
    if group == "matched" and name == "DELETE":
        return MatchedDelete(condition=text.condition)
    if group == "not_matched" and name.startswith("INSERT"):
        return NotMatchedInsert(
            values=pairs, star=star, except_columns=except_columns, condition=text.condition
        )
    if group == "not_matched_by_source" and name == "UPDATE SET":
        return NotMatchedBySourceUpdate(set=pairs, condition=text.condition)
    if group == "not_matched_by_source" and name == "DELETE":
        return NotMatchedBySourceDelete(condition=text.condition)
    return action_not_allowed(position, group, name)


def _missing_alias(role: str) -> MergeSpecError:
    return MergeSpecError(
        f"The {role} of the MERGE INTO statement is a path or a subquery without an alias. "
        f"Give it one, e.g. ... AS {'t' if role == 'target' else 's'}."
    )


def parse_merge_sql(sql: str) -> MergeSpec:
    """Parse a Spark/Databricks ``MERGE INTO`` statement into a ``MergeSpec``.

    Accepts table, ``delta.`path``` and backtick-quoted path targets; table, ``format.`path``` and
    subquery sources; aliases; ``MERGE WITH SCHEMA EVOLUTION``; and every WHEN clause of Delta Lake,
    including ``NOT MATCHED BY SOURCE``, ``NOT MATCHED BY TARGET``, ``UPDATE SET *``, ``INSERT *`` and
    ``* EXCEPT (cols)``. A table without an alias is referred to by its own name, as in Spark.

    Raises:
        MergeSpecError: for a syntax error (with line and column) and for every problem the spec's own
            checks find, such as an INSERT under WHEN MATCHED.
    """
    sql, schema_evolution = _without_schema_evolution(sql, _tokenize(sql))
    words = [t.token_type for t in _tokenize(sql)]
    # sqlglot calls a MERGE without WHEN a syntax error; Delta (and Spark) have a class of their own for it.
    if words[:1] == [TokenType.MERGE] and TokenType.WHEN not in words:
        raise_problems(clause_problems(()))
    merge = _parse_statement(sql)
    tokens = _Tokens(sql, _tokenize(sql))
    using = tokens.find(TokenType.USING, 0, len(tokens.tokens))
    on = tokens.find(TokenType.ON, using, len(tokens.tokens))
    if on == len(tokens.tokens):
        first_when = next(t for t in tokens.tokens if t.token_type == TokenType.WHEN)
        raise _syntax_error(
            sql, first_when.line, first_when.col - len(first_when.text) + 1, "WHEN", "no ON <condition>"
        )
    starts = [i for i in range(on, len(tokens.tokens)) if tokens.tokens[i].token_type == TokenType.WHEN]
    starts = [i for i in starts if tokens.depth[i] == 0]
    bounds = [*starts, len(tokens.tokens)]
    whens: Sequence[exp.When] = merge.args["whens"].expressions
    texts = [_clause_text(tokens, bounds[n], bounds[n + 1]) for n in range(len(starts))]
    target, target_alias = _target(merge.this)
    source, source_alias = _source(merge.args["using"], tokens, using)
    if target_alias is None:
        raise _missing_alias("target")
    if source_alias is None:
        raise _missing_alias("source")
    clauses = [
        _clause(n, when, text) for n, (when, text) in enumerate(zip(whens, texts, strict=True), start=1)
    ]
    return assemble_spec(
        clauses,
        target=target,
        source=source,
        condition=tokens.text(on + 1, starts[0] - 1 if starts else len(tokens.tokens) - 1),
        target_alias=target_alias,
        source_alias=source_alias,
        schema_evolution=schema_evolution,
    )
