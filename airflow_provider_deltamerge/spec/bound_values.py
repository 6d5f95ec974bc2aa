"""Template values placed into SQL by where they land: quoted inside a string or a name, refused elsewhere.

A value rendered into a condition, a clause or a ``MERGE INTO`` statement comes from run conf, params or
XCom, which a user who may only trigger a DAG controls. Each value is first rendered as an opaque marker;
the marked text is then split into Spark SQL tokens, and each marker is replaced by its value escaped for
the token it sits in: inside ``'...'`` or ``"..."`` as string content, inside backticks as name content. A
value cannot end the token it is in, so it can never add SQL of its own. Outside quotes only a number or a
boolean may stand; anything else needs ``| sql_literal`` or ``| sql_identifier``, whose output
(``SqlText``) is already quoted and is placed as it is.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from collections.abc import Sequence
from typing import Any

from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec.names import quote_name

UNSAFE_TEMPLATE_VALUE = "DELTAMERGE_UNSAFE_TEMPLATE_VALUE"
# A number or boolean keeps its meaning wherever it stands and cannot start a new expression.
_BARE_VALUE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|true|false", re.IGNORECASE)
_SHOWN_CHARS = 40


class SqlText(str):
    """SQL that ``sql_literal`` or ``sql_identifier`` made from a value: complete, quoted, placed as it is."""


def quote_string(value: str, quote: str = "'") -> str:
    """``value`` as the content of a Spark SQL string in ``quote``, backslash-escaped as Spark reads it."""
    return value.replace("\\", "\\\\").replace(quote, "\\" + quote)


def sql_literal(value: Any) -> SqlText:
    """A Spark SQL literal of ``value``: strings quoted, numbers and booleans as they are, lists ``(a, b)``.

    Raises:
        MergeSpecError: for a value that has no SQL literal (a dict, an object).
    """
    match value:
        case None:
            return SqlText("NULL")
        case bool():
            return SqlText("true" if value else "false")
        case int() | decimal.Decimal():
            return SqlText(str(value))
        case float() if math.isfinite(value):
            return SqlText(repr(value))
        case float():
            return SqlText(f"CAST('{value}' AS DOUBLE)")
        case datetime.datetime():
            return SqlText(f"TIMESTAMP'{value.isoformat(sep=' ')}'")
        case datetime.date():
            return SqlText(f"DATE'{value.isoformat()}'")
        case str():
            return SqlText(f"'{quote_string(value)}'")
        case list() | tuple() | set() | frozenset():
            return SqlText("(" + ", ".join(sql_literal(v) for v in value) + ")")
    raise MergeSpecError(
        f"A {type(value).__name__} value has no SQL literal. Pass a string, number, boolean, date or a list "
        "of them to sql_literal.",
        error_class=UNSAFE_TEMPLATE_VALUE,
    )


def sql_identifier(value: Any) -> SqlText:
    """A backquoted Spark SQL name for a column, alias or table part (quoted always: it may be a keyword)."""
    return SqlText(f"`{quote_name(str(value))}`")


def bind_values(marked: str, values: Sequence[str], markers: re.Pattern[str], *, where: str) -> str:
    """``marked`` with each marker (``markers`` group 1 is an index into ``values``) replaced by its value.

    Args:
        marked: SQL text as the template rendered it, with a marker where each value goes.
        values: The rendered values, in marker order.
        markers: The pattern of this render's markers (with a nonce, so a value cannot forge one).
        where: The field, for the error message.

    Raises:
        MergeSpecError: UNSAFE_TEMPLATE_VALUE when a value stands outside quotes and is not a number or
            boolean, sits in a comment or a raw string, or the text around it does not tokenize.
    """
    found = list(markers.finditer(marked))
    if not found:
        return marked
    try:
        tokens = Spark().tokenizer().tokenize(marked)
    except TokenError as err:
        raise _unsafe(where, "the text around a template value is not Spark SQL", str(err)) from err

    def replacement(match: re.Match[str]) -> str:
        value = values[int(match.group(1))]
        token = _token_at(tokens, match.start())
        opener = marked[token.start] if token is not None else ""
        if token is not None and token.token_type == TokenType.STRING and opener in "'\"":
            return quote_string(value, opener)
        if token is not None and token.token_type == TokenType.IDENTIFIER and opener == "`":
            return quote_name(value)
        if token is not None and token.token_type in (TokenType.VAR, TokenType.NUMBER):
            if _BARE_VALUE.fullmatch(value):
                return value
            raise _unsafe(where, f"the value {_shown(value)} stands outside quotes", _BARE_FIX)
        raise _unsafe(
            where,
            f"the value {_shown(value)} stands in a comment or a raw or prefixed string",
            "Template values may stand inside '...' or `...`, or outside quotes through | sql_literal.",
        )

    return markers.sub(replacement, marked)


_BARE_FIX = (
    "Quote it where it stands: '{{ value }}' for text, `{{ value }}` for a name, or write "
    "{{ value | sql_literal }} (a quoted literal; lists become (a, b)) or {{ value | sql_identifier }}. "
    "Choose SQL with {% if %} blocks, never with a value."
)


def _token_at(tokens: Sequence[Token], position: int) -> Token | None:
    return next((t for t in tokens if t.start <= position <= t.end), None)


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "...")


def _unsafe(where: str, what: str, fix: str) -> MergeSpecError:
    return MergeSpecError(
        f"A template value cannot be placed safely into the SQL of {where}: {what}. {fix}",
        error_class=UNSAFE_TEMPLATE_VALUE,
    )
