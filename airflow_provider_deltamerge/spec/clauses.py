"""The WHEN clauses of a MERGE, one frozen value class per clause kind, named after the SQL grammar."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

ClauseKind = Literal[
    "matched_update",
    "matched_delete",
    "not_matched_insert",
    "not_matched_by_source_update",
    "not_matched_by_source_delete",
]

# Which rows a clause can see and act on: the three WHEN groups of the grammar.
MatchGroup = Literal["matched", "not_matched", "not_matched_by_source"]

Assignments = tuple[tuple[str, str], ...]


def _assignments(value: Mapping[str, str] | Iterable[tuple[str, str]]) -> Assignments:
    """Freeze a column -> expression mapping, keeping the author's order."""
    pairs = value.items() if isinstance(value, Mapping) else value
    return tuple((str(column), str(expression)) for column, expression in pairs)


class _ReadableRepr:
    """A repr that shows only what differs from the defaults, and assignments as ``{column: expr}``."""

    def __repr__(self) -> str:
        shown = []
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if value != field.default:
                # A mapping reads best, but would hide a column assigned twice.
                as_mapping = field.name in ("set", "values") and len(dict(value)) == len(value)
                shown.append(f"{field.name}={dict(value) if as_mapping else value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


@dataclass(frozen=True, repr=False)
class MatchedUpdate(_ReadableRepr):
    """WHEN MATCHED [AND condition] THEN UPDATE SET col = expr, ... | UPDATE SET * [EXCEPT (cols)]."""

    set: Assignments = ()
    star: bool = False
    except_columns: tuple[str, ...] = ()
    condition: str | None = None
    kind: ClassVar[ClauseKind] = "matched_update"
    group: ClassVar[MatchGroup] = "matched"

    def __post_init__(self) -> None:
        object.__setattr__(self, "set", _assignments(self.set))
        object.__setattr__(self, "except_columns", tuple(self.except_columns))


@dataclass(frozen=True, repr=False)
class MatchedDelete(_ReadableRepr):
    """WHEN MATCHED [AND condition] THEN DELETE."""

    condition: str | None = None
    kind: ClassVar[ClauseKind] = "matched_delete"
    group: ClassVar[MatchGroup] = "matched"


@dataclass(frozen=True, repr=False)
class NotMatchedInsert(_ReadableRepr):
    """WHEN NOT MATCHED [AND condition] THEN INSERT (cols) VALUES (exprs) | INSERT * [EXCEPT (cols)]."""

    values: Assignments = ()
    star: bool = False
    except_columns: tuple[str, ...] = ()
    condition: str | None = None
    kind: ClassVar[ClauseKind] = "not_matched_insert"
    group: ClassVar[MatchGroup] = "not_matched"

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _assignments(self.values))
        object.__setattr__(self, "except_columns", tuple(self.except_columns))


@dataclass(frozen=True, repr=False)
class NotMatchedBySourceUpdate(_ReadableRepr):
    """WHEN NOT MATCHED BY SOURCE [AND condition] THEN UPDATE SET col = expr, ... (no ``*``)."""

    set: Assignments = ()
    condition: str | None = None
    kind: ClassVar[ClauseKind] = "not_matched_by_source_update"
    group: ClassVar[MatchGroup] = "not_matched_by_source"

    def __post_init__(self) -> None:
        object.__setattr__(self, "set", _assignments(self.set))


@dataclass(frozen=True, repr=False)
class NotMatchedBySourceDelete(_ReadableRepr):
    """WHEN NOT MATCHED BY SOURCE [AND condition] THEN DELETE."""

    condition: str | None = None
    kind: ClassVar[ClauseKind] = "not_matched_by_source_delete"
    group: ClassVar[MatchGroup] = "not_matched_by_source"


MergeClause = (
    MatchedUpdate | MatchedDelete | NotMatchedInsert | NotMatchedBySourceUpdate | NotMatchedBySourceDelete
)

CLAUSE_TYPES: dict[str, type[MergeClause]] = {
    cls.kind: cls
    for cls in (
        MatchedUpdate,
        MatchedDelete,
        NotMatchedInsert,
        NotMatchedBySourceUpdate,
        NotMatchedBySourceDelete,
    )
}

# SQL wording of each WHEN group and each kind, as Delta's messages name clauses.
GROUP_SQL_NAMES: dict[str, str] = {
    "matched": "WHEN MATCHED",
    "not_matched": "WHEN NOT MATCHED",
    "not_matched_by_source": "WHEN NOT MATCHED BY SOURCE",
}
CLAUSE_SQL_NAMES: dict[str, str] = {
    "matched_update": "WHEN MATCHED UPDATE",
    "matched_delete": "WHEN MATCHED DELETE",
    "not_matched_insert": "WHEN NOT MATCHED INSERT",
    "not_matched_by_source_update": "WHEN NOT MATCHED BY SOURCE UPDATE",
    "not_matched_by_source_delete": "WHEN NOT MATCHED BY SOURCE DELETE",
}


def describe_clause(position: int, clause: MergeClause) -> str:
    """Name a clause for an error message: ``clause 2, WHEN MATCHED UPDATE`` (positions count from 1)."""
    return f"clause {position}, {CLAUSE_SQL_NAMES[clause.kind]}"


def describe_action(position: int, group: str, action: str) -> str:
    """Name a clause that has no kind of its own, such as ``clause 1, WHEN MATCHED INSERT``."""
    return f"clause {position}, {GROUP_SQL_NAMES[group]} {action}"


# Friendly constructors for DAG authors; they read like the SQL they stand for.


def update(set: Mapping[str, str], *, condition: str | None = None) -> MatchedUpdate:
    """WHEN MATCHED [AND condition] THEN UPDATE SET col = expr, ..."""
    return MatchedUpdate(set=_assignments(set), condition=condition)


def update_all(*, except_columns: Iterable[str] = (), condition: str | None = None) -> MatchedUpdate:
    """WHEN MATCHED [AND condition] THEN UPDATE SET * [EXCEPT (cols)]."""
    return MatchedUpdate(star=True, except_columns=tuple(except_columns), condition=condition)


def delete(*, condition: str | None = None) -> MatchedDelete:
    """WHEN MATCHED [AND condition] THEN DELETE."""
    return MatchedDelete(condition=condition)


def insert(values: Mapping[str, str], *, condition: str | None = None) -> NotMatchedInsert:
    """WHEN NOT MATCHED [AND condition] THEN INSERT (cols) VALUES (exprs)."""
    return NotMatchedInsert(values=_assignments(values), condition=condition)


def insert_all(*, except_columns: Iterable[str] = (), condition: str | None = None) -> NotMatchedInsert:
    """WHEN NOT MATCHED [AND condition] THEN INSERT * [EXCEPT (cols)]."""
    return NotMatchedInsert(star=True, except_columns=tuple(except_columns), condition=condition)


def update_by_source(set: Mapping[str, str], *, condition: str | None = None) -> NotMatchedBySourceUpdate:
    """WHEN NOT MATCHED BY SOURCE [AND condition] THEN UPDATE SET col = expr, ..."""
    return NotMatchedBySourceUpdate(set=_assignments(set), condition=condition)


def delete_by_source(*, condition: str | None = None) -> NotMatchedBySourceDelete:
    """WHEN NOT MATCHED BY SOURCE [AND condition] THEN DELETE."""
    return NotMatchedBySourceDelete(condition=condition)


__all__ = [
    "CLAUSE_SQL_NAMES",
    "CLAUSE_TYPES",
    "GROUP_SQL_NAMES",
    "ClauseKind",
    "MatchGroup",
    "MatchedDelete",
    "MatchedUpdate",
    "MergeClause",
    "NotMatchedBySourceDelete",
    "NotMatchedBySourceUpdate",
    "NotMatchedInsert",
    "delete",
    "delete_by_source",
    "describe_action",
    "describe_clause",
    "insert",
    "insert_all",
    "update",
    "update_all",
    "update_by_source",
]
