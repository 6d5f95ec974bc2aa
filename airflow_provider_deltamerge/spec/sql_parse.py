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
from airflow_provider_deltamerge.spec.sql_dialect import SparkSql
from airflow_provider_deltamerge.spec.sql_grammar import Violation, WhenClause, parse_checks, read_clauses
from airflow_provider_deltamerge.spec.validation import problem, raise_problems

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


def _violation_error(sql: str, violation: Violation) -> MergeSpecError:
    token = violation.token
    return _syntax_error(
        sql,
        token.line,
        _start_column(token),
        token.text,
        f"Spark's MERGE grammar expects {violation.expected}",
    )


def _start_column(token: Token) -> int:
    return token.col - len(token.text) + 1


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


def _parse_statement(sql: str, violation: Violation | None) -> exp.Merge:
    """The statement's tree; a syntax error is the earlier of sqlglot's and Spark's grammar ``violation``."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=SparkSql) if s is not None]
    except ParseError as err:
        first = err.errors[0] if err.errors else {}
        line, column = int(first.get("line") or 0), int(first.get("col") or 0)
        if violation is not None and (violation.token.line, _start_column(violation.token)) < (line, column):
            raise _violation_error(sql, violation) from err
        raise _syntax_error(
            sql,
            line,
            column,
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
        raise MergeSpecError(
            f"MERGE INTO needs a table or delta.`path` target, not {table.sql('spark')}.",
            error_class="DELTAMERGE_UNSUPPORTED_MERGE_TARGET",
        )
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
        f"MERGE INTO ... USING needs a table, a format.`path` or a (subquery), not {node.sql('spark')}.",
        error_class="DELTAMERGE_UNSUPPORTED_MERGE_SOURCE",
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


def _clause(when: exp.When, grammar: WhenClause, text: _ClauseText) -> MergeClause:
    """The spec clause of one WHEN that Spark's grammar accepted."""
    action = when.args["then"]
    star, except_columns = _star_except(action)
    pairs = tuple(zip(text.columns, text.expressions, strict=True))
    is_delete = isinstance(action, exp.Var)
    if grammar.group == "matched":
        if is_delete:
            return MatchedDelete(condition=text.condition)
        return MatchedUpdate(set=pairs, star=star, except_columns=except_columns, condition=text.condition)
    if grammar.group == "not_matched":
        return NotMatchedInsert(
            values=pairs, star=star, except_columns=except_columns, condition=text.condition
        )
    if is_delete:
        return NotMatchedBySourceDelete(condition=text.condition)
    return NotMatchedBySourceUpdate(set=pairs, condition=text.condition)


def _raise_parse_check(grammar: list[WhenClause]) -> None:
    """Raise what Spark's parser raises after its grammar (value counts, omitted conditions), if anything."""
    found = parse_checks(grammar)
    if found is None:
        return
    error_class, position, params = found
    fix = (
        "Give one value for each column the INSERT names."
        if error_class == "MERGE_INSERT_VALUE_COUNT_MISMATCH"
        else "Give this clause a condition or move it after the others of its kind."
    )
    clause = grammar[position - 1]
    where = describe_action(position, clause.group, clause.action)
    raise_problems([problem(error_class, where, fix, **params)])


def _missing_alias(role: str) -> MergeSpecError:
    return MergeSpecError(
        f"The {role} of the MERGE INTO statement is a path or a subquery without an alias. "
        f"Give it one, e.g. ... AS {'t' if role == 'target' else 's'}.",
        error_class="DELTAMERGE_MISSING_ALIAS",
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
    tokens = _Tokens(sql, _tokenize(sql))
    words = [t.token_type for t in tokens.tokens]
    # sqlglot calls a MERGE without WHEN a syntax error; Spark's parser has a class of its own for it.
    if words[:1] == [TokenType.MERGE] and TokenType.WHEN not in words:
        raise MergeSpecError(
            delta_message("MERGE_WITHOUT_WHEN") + " Add a clause such as WHEN MATCHED THEN UPDATE SET *.",
            error_class="MERGE_WITHOUT_WHEN",
        )
    using = tokens.find(TokenType.USING, 0, len(tokens.tokens))
    on = tokens.find(TokenType.ON, using, len(tokens.tokens))
    starts = [
        i
        for i in range(min(on, using), len(tokens.tokens))
        if tokens.tokens[i].token_type == TokenType.WHEN and tokens.depth[i] == 0
    ]
    grammar = read_clauses(tokens.tokens, tokens.depth, starts)
    merge = _parse_statement(sql, grammar if isinstance(grammar, Violation) else None)
    if isinstance(grammar, Violation):
        raise _violation_error(sql, grammar)
    if on == len(tokens.tokens):
        first_when = tokens.tokens[starts[0]]
        raise _syntax_error(sql, first_when.line, _start_column(first_when), "WHEN", "no ON <condition>")
    bounds = [*starts, len(tokens.tokens)]
    whens: Sequence[exp.When] = merge.args["whens"].expressions
    texts = [_clause_text(tokens, bounds[n], bounds[n + 1]) for n in range(len(starts))]
    _raise_parse_check(grammar)
    clauses = [_clause(*parts) for parts in zip(whens, grammar, texts, strict=True)]
    target, target_alias = _target(merge.this)
    source, source_alias = _source(merge.args["using"], tokens, using)
    if target_alias is None:
        raise _missing_alias("target")
    if source_alias is None:
        raise _missing_alias("source")
    return assemble_spec(
        clauses,
        target=target,
        source=source,
        condition=tokens.text(on + 1, starts[0] - 1),
        target_alias=target_alias,
        source_alias=source_alias,
        schema_evolution=schema_evolution,
    )
