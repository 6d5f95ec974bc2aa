"""Rendered paths and table names: checked to be a path or a name, and to lie where the DAG lets them.

A path or name may come from run conf or params, which whoever may trigger the DAG sets, so it is checked
after templating, before anything reads it. It may not hold a quote, backtick, statement break or control
character (each could end the SQL text a path is placed in). Then, unless the DAG says ``ANY_PATH``, a path
must lie under a lake root once ``..`` is resolved and, for a local path, symbolic links are followed: under
one of ``allowed_paths``, or by default under one the DAG wrote itself (``WrittenPlaces``), and a merge into
a remote table reads no worker-local system path. A table name must lie in a namespace the DAG wrote.
"""

from __future__ import annotations

import enum
import os
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote, urlsplit

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
from airflow_provider_deltamerge.spec.sql_dialect import SparkSql
from airflow_provider_deltamerge.spec.sql_parse import is_path_like

UNSAFE_PATH = "DELTAMERGE_UNSAFE_PATH"
PATH_NOT_ALLOWED = "DELTAMERGE_PATH_NOT_ALLOWED"
INVALID_TABLE_NAME = "DELTAMERGE_INVALID_TABLE_NAME"
TABLE_NOT_ALLOWED = "DELTAMERGE_TABLE_NOT_ALLOWED"
_UNSAFE_PATH_CHARS = re.compile(r"['\"`;\x00-\x1f\x7f]")
# The formats Spark reads as ``format.`path``` in a query or a table name, which can point anywhere.
_FILE_TABLE_FORMATS = frozenset({*PATH_FORMATS, "text", "avro", "binaryfile"})
# What a template value is in the text ``WrittenPlaces`` reads: a name Spark SQL takes bare or in backticks.
VALUE_MARK: Final = "__deltamerge_value__"
# Worker folders no merge into a remote table has a reason to read (the worker's home is added at run time).
_SYSTEM_FOLDERS = (
    *("/etc", "/proc", "/sys", "/dev", "/boot", "/root"),
    *("/run", "/var/run", "/var/lib", "/var/log"),
)
_HOW_TO_ALLOW = (
    "Write the lake's root in front of the template (target='/lake/{{ params.table }}'), list the roots in "
    "allowed_paths=[...] (or Airflow's [deltamerge] allowed_paths), or let run conf and params choose any "
    "path with allowed_paths=ANY_PATH."
)


class AnyPath(enum.Enum):
    """The type of ``ANY_PATH``."""

    ANY_PATH = "ANY_PATH"


ANY_PATH: Final = AnyPath.ANY_PATH
"""``allowed_paths=ANY_PATH``: run conf and params may point the merge at any path or table."""


@dataclass(frozen=True)
class WrittenPlaces:
    """The lake roots and table namespaces a DAG wrote literally, below which its template values may choose.

    Each place (the target, a source path or table, the files and tables a source query reads) is read from
    its template rendered with every printed value replaced by ``VALUE_MARK``. A path's root is its text up to
    the last ``/`` before the first value (``/lake/{{ params.t }}/orders`` gives ``/lake/``), or all of it
    when it holds no value; a root must name a folder or a bucket (``/``, ``file:///`` or ``s3://`` alone is
    none). A name's namespace is its parts before the first part that holds a value (``shop.{{ params.t }}``
    gives ``shop``), or all of them. A place that starts with a value gives nothing.
    """

    roots: tuple[str, ...] = ()
    namespaces: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def of(cls, target: str | None, source: MergeSource | None) -> WrittenPlaces:
        """The roots and namespaces of a target and source as the DAG wrote them (values marked)."""
        paths, names = _places(target, source)
        roots = (_written_root(path) for _, path in paths)
        namespaces = (_written_namespace(parts) for _, _, parts in names)
        return cls(
            roots=tuple(dict.fromkeys(r for r in roots if r)),
            namespaces=tuple(dict.fromkeys(n for n in namespaces if n)),
        )


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
    if allowed_roots:
        _check_under(
            path,
            allowed_roots,
            where=where,
            outside=f"lies outside the allowed lake roots ({', '.join(allowed_roots)}). Use a path under one "
            "of them, or add its root to allowed_paths.",
        )
    return path


def check_table_name(name: str, *, where: str) -> str:
    """``name`` itself, once it is known to be a dotted catalog name (``shop.orders``, ``` `my db`.t ```).

    Raises:
        MergeSpecError: INVALID_TABLE_NAME for anything else.
    """
    if _name_parts(name) is None:
        raise MergeSpecError(
            f"The {where} {name!r} is not a table name. Give a name such as shop.orders (parts with other "
            "characters in backticks), or a path.",
            error_class=INVALID_TABLE_NAME,
        )
    return name


def check_spec_locations(
    spec: MergeSpec,
    *,
    allowed_paths: Sequence[str] | AnyPath | None = None,
    written: WrittenPlaces | None = None,
) -> None:
    """Check a rendered spec's paths and table names: each is one, and lies where the DAG lets it.

    Args:
        spec: The merge as it will run.
        allowed_paths: The lake roots every path must lie under. None: the roots in ``written``, and then a
            merge into a remote table may read no worker-local system path either. ``ANY_PATH``: any path
            and any table name.
        written: The places the DAG wrote (``WrittenPlaces.of``); table names must lie in its namespaces.
            None: the spec's own places, for a spec written with no template.

    Raises:
        MergeSpecError: UNSAFE_PATH, INVALID_TABLE_NAME, PATH_NOT_ALLOWED or TABLE_NOT_ALLOWED.
    """
    paths, names = _places(spec.target, spec.source)
    for where, path in paths:
        check_path(path, where=where)
    if allowed_paths is ANY_PATH:
        return
    written = written if written is not None else WrittenPlaces.of(spec.target, spec.source)
    if allowed_paths is None:
        roots, told = written.roots, _outside_written(written.roots)
    else:
        roots = tuple(allowed_paths)
        told = (
            f"lies outside the allowed lake roots ({', '.join(roots)}). Use a path under one of them, or add "
            "its root to allowed_paths."
        )
    for where, path in paths:
        _check_under(path, roots, where=where, outside=told)
    if allowed_paths is None and _is_remote(spec.target):
        for where, path in paths:
            _check_not_worker_private(path, where=where, target=spec.target)
    for where, name, parts in names:
        if not any(parts[: len(space)] == space for space in written.namespaces):
            spaces = ", ".join(".".join(space) for space in written.namespaces) or "none"
            raise MergeSpecError(
                f"The {where} {name!r} lies outside the table namespaces the DAG writes ({spaces}): a "
                "template value (run conf, params) may only choose the name parts after those written before "
                "it. Write the namespace in front of the template (target='shop.{{ params.table }}'), or let "
                "run conf and params choose any table with allowed_paths=ANY_PATH.",
                error_class=TABLE_NOT_ALLOWED,
            )


def spec_paths(spec: MergeSpec) -> list[str]:
    """Every path the merge reads or writes: a path target, a path source, a query's ``format.`path```."""
    return [path for _, path in _places(spec.target, spec.source)[0]]


def file_paths_in_query(sql: str) -> Iterable[str]:
    """The paths a query reads as ``format.`path``` (``delta``, ``parquet``, ``csv``, ...).

    None if it does not parse: such a query fails in Spark before it reads anything.
    """
    return [path for path, _ in _query_places(sql) if path is not None]


def _query_places(sql: str) -> list[tuple[str | None, tuple[str, ...]]]:
    """Each table a query reads: (its path, for ``format.`path```, else None; its name parts, lower case)."""
    try:
        tree = sqlglot.parse_one(sql, read=SparkSql)
    except (ParseError, TokenError):
        return []
    places: list[tuple[str | None, tuple[str, ...]]] = []
    for table in tree.find_all(exp.Table):
        parts = tuple(p for p in (table.catalog, table.db, table.name) if p)
        if table.name:  # a table function (range(10)) has none
            places.append((_file_path(parts), tuple(p.lower() for p in parts)))
    return places


def _places(
    target: str | None, source: MergeSource | None
) -> tuple[list[tuple[str, str]], list[tuple[str, str, tuple[str, ...]]]]:
    """The paths (where, path) and table names (where, name, lower-case parts) a merge reads or writes.

    A table name ``format.`path``` (``csv.`/etc/passwd```) is Spark's way of reading a path: it counts as one.
    """
    paths: list[tuple[str, str]] = []
    names: list[tuple[str, str, tuple[str, ...]]] = []

    def name(where: str, text: str) -> None:
        parts = _name_parts(text)
        if parts is None:
            check_table_name(text, where=where)
        elif (file_path := _file_path(parts)) is not None:
            paths.append((where.replace(" table", ""), file_path))
        else:
            names.append((where, text, tuple(p.lower() for p in parts)))

    if target is not None:
        if is_path_like(target):
            paths.append(("target", target))
        else:
            name("target table", target)
    match source:
        case PathSource(path=path):
            paths.append(("source", path))
        case TableSource(name=text):
            name("source table", text)
        case QuerySource(sql=sql):
            for read_path, parts in _query_places(sql):
                if read_path is not None:
                    paths.append(("source query's", read_path))
                else:
                    names.append(("source query's table", ".".join(parts), parts))
    return paths, names


def _name_parts(name: str) -> tuple[str, ...] | None:
    parts = split_column_path(name)
    if parts is None or len(parts) > 3 or any(_UNSAFE_PATH_CHARS.search(p) for p in parts):
        return None
    return parts


def _file_path(parts: tuple[str, ...]) -> str | None:
    """The path of a table name ``format.`path```, which Spark reads as files; None for a catalog name."""
    if len(parts) == 2 and parts[0].lower() in _FILE_TABLE_FORMATS:
        return parts[1]
    return None


def _written_root(path: str) -> str | None:
    head, marked, _ = path.partition(VALUE_MARK)
    if marked:
        head = head[: head.rfind("/") + 1]  # the folder the value is in: a value can only add below it
    if not head:
        return None
    authority, inside = _place(head)
    if authority:
        return None if authority.endswith("://") else head  # a bucket or host is a root, a bare scheme none
    names_a_folder = inside not in ("", ".", "/", "..") and not inside.startswith("../")
    return head if names_a_folder else None


def _written_namespace(parts: tuple[str, ...]) -> tuple[str, ...] | None:
    kept = tuple(part for part in parts[: next((i for i, p in enumerate(parts) if VALUE_MARK in p), None)])
    return kept or None


def _outside_written(roots: Sequence[str]) -> str:
    if not roots:
        return (
            "comes from a template that starts with a value, so run conf or params could point it anywhere, "
            f"and the DAG writes no lake root for it to lie under. {_HOW_TO_ALLOW}"
        )
    return (
        f"lies outside the lake roots the DAG writes ({', '.join(roots)}): a template value (run conf, "
        f"params) may only choose a place below the folder written before it. {_HOW_TO_ALLOW}"
    )


def _check_under(path: str, roots: Sequence[str], *, where: str, outside: str) -> None:
    """Refuse ``path`` unless it lies under one of ``roots``, also once a local one's links are followed."""
    if not any(_under(path, root) for root in roots):
        raise MergeSpecError(f"The {where} path {path!r} {outside}", error_class=PATH_NOT_ALLOWED)
    authority, local = _place(path)
    if authority:
        return
    real = os.path.realpath(local)
    if not any(_place(root)[0] == "" and _within(real, os.path.realpath(_place(root)[1])) for root in roots):
        raise MergeSpecError(
            f"The {where} path {path!r} is, once its symbolic links are followed, {real!r}, which lies "
            f"outside the lake roots ({', '.join(roots)}). Point it at the data itself, or add the link's "
            "target to allowed_paths.",
            error_class=PATH_NOT_ALLOWED,
        )


def _check_not_worker_private(path: str, *, where: str, target: str) -> None:
    """Refuse a local ``path`` in a system folder or the worker's home (its links followed)."""
    authority, local = _place(path)
    if authority:
        return
    real = os.path.realpath(local)
    for folder in worker_private_folders():
        if _within(real, os.path.realpath(folder)):
            raise MergeSpecError(
                f"The {where} path {path!r} is {real!r}, in the worker's {folder}, while the target "
                f"{target!r} is a remote table: a merge into a remote table reads no worker-local system "
                "files. Put the source in the lake, or name its folder in allowed_paths.",
                error_class=PATH_NOT_ALLOWED,
            )


def worker_private_folders() -> tuple[str, ...]:
    """System folders, the worker's home and ``AIRFLOW_HOME`` (which holds Airflow's configuration)."""
    homes = (os.path.expanduser("~"), os.environ.get("AIRFLOW_HOME", ""))
    return (*_SYSTEM_FOLDERS, *(h for h in homes if h and posixpath.normpath(h) != "/"))


def _is_remote(target: str) -> bool:
    """Whether the target is a table in an object store or another file system than the worker's."""
    return is_path_like(target) and bool(_place(target)[0])


def _under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it, after ``..`` and ``.`` are resolved in both."""
    path_place, root_place = _place(path), _place(root)
    return path_place[0] == root_place[0] and _within(path_place[1], root_place[1])


def _within(inside: str, folder: str) -> bool:
    top = folder.rstrip("/") or "/"
    return inside == top or inside.startswith(top if top.endswith("/") else top + "/")


def _place(path: str) -> tuple[str, str]:
    """(scheme://authority, normalised path); ``file:`` URIs and plain paths share the empty authority.

    A URI's path is percent-decoded first: Hadoop reads ``file:///lake/%2e%2e/etc`` as ``/etc``.
    """
    parts = urlsplit(path)
    if (len(parts.scheme) > 1 and "://" in path) or parts.scheme == "file":
        authority = "" if parts.scheme == "file" else f"{parts.scheme.lower()}://{parts.netloc.lower()}"
        return authority, posixpath.normpath("/" + unquote(parts.path).lstrip("/"))
    return "", posixpath.normpath(path)
