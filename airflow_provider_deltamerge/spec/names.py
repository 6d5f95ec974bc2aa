"""Column paths as Spark SQL writes them (``t.addr.city``, ``` `my col`.x ```): split, quote, compare."""

from __future__ import annotations

import re
import secrets

# One name part: a backtick-quoted identifier (`` inside doubles a backtick) or a run of word characters.
_PART = re.compile(r"`((?:[^`]|``)+)`|([A-Za-z0-9_]+)")


def split_column_path(text: str) -> tuple[str, ...] | None:
    """The name parts of a dotted column path, unquoted, or ``None`` if ``text`` is not one.

    >>> split_column_path("t.`my col`.x")
    ('t', 'my col', 'x')
    """
    parts: list[str] = []
    rest = text.strip()
    while True:
        match = _PART.match(rest)
        if match is None:
            return None
        parts.append(match.group(1).replace("``", "`") if match.group(1) is not None else match.group(2))
        rest = rest[match.end() :]
        if not rest:
            return tuple(parts)
        if not rest.startswith("."):
            return None
        rest = rest[1:]


def quote_name(value: str) -> str:
    """``value`` as the content of a backquoted Spark SQL name (a backtick is written twice)."""
    return value.replace("`", "``")


def quote_part(name: str) -> str:
    """``name`` as a Spark SQL identifier, backtick-quoted only when it has to be."""
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"`{quote_name(name)}`"


def format_path(parts: tuple[str, ...]) -> str:
    """Dotted Spark SQL text of a column path."""
    return ".".join(quote_part(p) for p in parts)


def strip_alias(parts: tuple[str, ...], alias: str) -> tuple[str, ...]:
    """``parts`` without a leading ``alias`` qualifier (Spark compares names case-insensitively)."""
    if len(parts) > 1 and parts[0].lower() == alias.lower():
        return parts[1:]
    return parts


def unqualified(text: str, alias: str) -> tuple[tuple[str, ...], bool]:
    """The parts of the column path ``text`` without a leading ``alias``, and whether ``text`` had it.

    >>> unqualified("`t`.`x`", "t")
    (('x',), True)
    """
    parts = split_column_path(text) or (text.strip(),)
    path = strip_alias(parts, alias)
    return path, len(path) < len(parts)


def folded(parts: tuple[str, ...]) -> tuple[str, ...]:
    """Case-folded parts: Spark's default analysis (``spark.sql.caseSensitive=false``) ignores case."""
    return tuple(p.lower() for p in parts)


# A tag drawn once per process, so the engine's own columns cannot collide with a column of a user's table
# (Delta merges a table with a column named __deltamerge_file; so must we).
_HIDDEN_TAG = secrets.token_hex(4)


def hidden_name(role: str) -> str:
    """The name of an engine column carried next to the table's, e.g. ``__deltamerge_file_1a2b3c4d``."""
    return f"__deltamerge_{role}_{_HIDDEN_TAG}"
