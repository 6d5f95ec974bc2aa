"""Rendered paths and table names: checked to be a path or a name, and to lie under the lake roots allowed.

A path or name may come from run conf, so it is checked after templating, before anything reads it: no
quote, backtick, statement break or control character (each could end the SQL text a path is placed in),
and, where the DAG or the deployment names lake roots, inside one of them once ``..`` is resolved.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec.merge_spec import MergeSpec
from airflow_provider_deltamerge.spec.names import split_column_path
from airflow_provider_deltamerge.spec.source import (
    PATH_FORMATS,
    MergeSource,
    PathSource,
    QuerySource,
    TableSource,
)
from airflow_provider_deltamerge.spec.sql_parse import is_path_like

UNSAFE_PATH = "DELTAMERGE_UNSAFE_PATH"
PATH_NOT_ALLOWED = "DELTAMERGE_PATH_NOT_ALLOWED"
INVALID_TABLE_NAME = "DELTAMERGE_INVALID_TABLE_NAME"
_UNSAFE_PATH_CHARS = re.compile(r"['\"`;\x00-\x1f\x7f]")
# The formats Spark reads as ``format.`path``` in a query, which a query can point anywhere.
_FILE_TABLE_FORMATS = frozenset({*PATH_FORMATS, "text", "avro", "binaryfile"})


def check_path(path: str, *, where: str, allowed_roots: Sequence[str] = ()) -> str:
    """``path`` itself, once it is known to be a plain path or URI under one of ``allowed_roots`` (if any).

    Raises:
        MergeSpecError: UNSAFE_PATH for a quote, backtick, ``;`` or control character;
            PATH_NOT_ALLOWED for a path outside every allowed root.
    """
    bad = _UNSAFE_PATH_CHARS.search(path)
    if not path.strip() or bad:
        what = f"holds {bad.group()!r}" if bad else "is empty"
        raise MergeSpecError(
            f"The {where} path {path!r} {what}. A path may not hold quotes, backticks, ';' or control "
            "characters: check the value it was rendered from.",
            error_class=UNSAFE_PATH,
        )
    if allowed_roots and not any(_under(path, root) for root in allowed_roots):
        raise MergeSpecError(
            f"The {where} path {path!r} lies outside the allowed lake roots ({', '.join(allowed_roots)}). "
            "Use a path under one of them, or add its root to allowed_paths.",
            error_class=PATH_NOT_ALLOWED,
        )
    return path


def check_table_name(name: str, *, where: str) -> str:
    """``name`` itself, once it is known to be a dotted catalog name (``shop.orders``, ``` `my db`.t ```).

    Raises:
        MergeSpecError: INVALID_TABLE_NAME for anything else.
    """
    parts = split_column_path(name)
    if parts is None or len(parts) > 3 or any(_UNSAFE_PATH_CHARS.search(p) for p in parts):
        raise MergeSpecError(
            f"The {where} {name!r} is not a table name. Give a name such as shop.orders (parts with other "
            "characters in backticks), or a path.",
            error_class=INVALID_TABLE_NAME,
        )
    return name


def check_source(source: MergeSource, *, allowed_roots: Sequence[str] = ()) -> None:
    """Check a source's path, table name, or the file paths its query reads (``parquet.`/x```)."""
    match source:
        case PathSource(path=path):
            check_path(path, where="source", allowed_roots=allowed_roots)
        case TableSource(name=name):
            check_table_name(name, where="source table")
        case QuerySource(sql=sql):
            for path in file_paths_in_query(sql):
                check_path(path, where="source query's", allowed_roots=allowed_roots)


def file_paths_in_query(sql: str) -> Iterable[str]:
    """The paths a query reads as ``format.`path``` (``delta``, ``parquet``, ``csv``, ...).

    None if it does not parse: such a query fails in Spark before it reads anything.
    """
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except (ParseError, TokenError):
        return ()
    return [
        table.name
        for table in tree.find_all(exp.Table)
        if table.db and table.db.lower() in _FILE_TABLE_FORMATS and not table.catalog
    ]


def _under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it, after ``..`` and ``.`` are resolved in both."""
    path_place, root_place = _place(path), _place(root)
    if path_place[0] != root_place[0]:
        return False
    inside, top = path_place[1], root_place[1].rstrip("/") or "/"
    return inside == top or inside.startswith(top if top.endswith("/") else top + "/")


def _place(path: str) -> tuple[str, str]:
    """(scheme://authority, normalised path); ``file:`` URIs and plain paths share the empty authority."""
    parts = urlsplit(path)
    if (len(parts.scheme) > 1 and "://" in path) or parts.scheme == "file":
        authority = "" if parts.scheme == "file" else f"{parts.scheme.lower()}://{parts.netloc.lower()}"
        return authority, posixpath.normpath("/" + parts.path.lstrip("/"))
    return "", posixpath.normpath(path)


def check_spec_locations(spec: MergeSpec, *, allowed_roots: Sequence[str] = ()) -> None:
    """Check a rendered spec's target (a path or a table name) and its source (``check_source``)."""
    if is_path_like(spec.target):
        check_path(spec.target, where="target", allowed_roots=allowed_roots)
    else:
        check_table_name(spec.target, where="target table")
    check_source(spec.source, allowed_roots=allowed_roots)
