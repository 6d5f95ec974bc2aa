"""Pre-flight checks: every column a spec refers to, against the target's (and, when cheap, the source's)
schema, before a Spark job is paid for.

The core, ``preflight_problems``, is pure: schemas come in as ``TableColumns`` values. ``run_preflight``
gets them through reader functions the caller passes (the operator passes those of
``airflow_provider_deltamerge.delta.log.log_schema``), so this layer never imports deltalake.

Resolution follows Delta's ``ResolveDeltaMergeInto``: the ON condition and WHEN MATCHED clauses see the
target and the source, WHEN NOT MATCHED clauses only the source, WHEN NOT MATCHED BY SOURCE clauses only
the target; names compare case-insensitively (Spark's default). A check that needs an unknown schema
(a source read from a table, a query or CSV files) is skipped rather than guessed.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from airflow_provider_deltamerge.exceptions import ClauseResolutionError
from airflow_provider_deltamerge.spec.clauses import (
    GROUP_SQL_NAMES,
    MatchedUpdate,
    MergeClause,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
    describe_clause,
)
from airflow_provider_deltamerge.spec.merge_spec import MergeSpec
from airflow_provider_deltamerge.spec.names import (
    folded,
    format_path,
    quote_part,
    split_column_path,
    strip_alias,
)
from airflow_provider_deltamerge.spec.references import ExpressionSyntaxError, column_references
from airflow_provider_deltamerge.spec.source import PathSource
from airflow_provider_deltamerge.spec.validation import Problem, problem, raise_problems

# Delta's session conf that turns schema evolution on for every MERGE, as WITH SCHEMA EVOLUTION does.
AUTO_MERGE_CONF = "spark.databricks.delta.schema.autoMerge.enabled"
CASE_SENSITIVE_CONF = "spark.sql.caseSensitive"

Role = Literal["target", "source"]
_ROLES: tuple[Role, ...] = ("target", "source")

_VISIBLE: dict[str, tuple[Role, ...]] = {
    "matched": ("target", "source"),
    "not_matched": ("source",),
    "not_matched_by_source": ("target",),
}
_ACTION_WORD = {
    "matched_update": "UPDATE",
    "matched_delete": "DELETE",
    "not_matched_insert": "INSERT",
    "not_matched_by_source_update": "UPDATE",
    "not_matched_by_source_delete": "DELETE",
}


@dataclass(frozen=True)
class ColumnSchema:
    """One column (or struct field) and what a dotted name may reach below it.

    Attributes:
        name: the column's name.
        fields: the fields of a struct, or of the structs in an array (Spark's ``arr.f`` reads them).
        any_field: a map: ``m.key`` reads a key, so any name below it resolves.
        type_name: Delta's name of its type (``struct``, ``array``, ``integer``, ...); empty if unknown.
    """

    name: str
    fields: tuple[ColumnSchema, ...] = ()
    any_field: bool = False
    type_name: str = ""

    def field(self, name: str) -> ColumnSchema | None:
        """The field called ``name`` (case-insensitively), if there is one."""
        return next((f for f in self.fields if f.name.lower() == name.lower()), None)


@dataclass(frozen=True)
class TableColumns:
    """The columns of a table, nested struct fields included, as plain values."""

    columns: tuple[ColumnSchema, ...]

    @classmethod
    def from_delta_schema(cls, schema: Mapping[str, Any] | str) -> TableColumns:
        """Read a schema in the Delta protocol's JSON form (``metaData.schemaString``)."""
        data = json.loads(schema) if isinstance(schema, str) else schema
        return cls(_struct_fields(data))

    @classmethod
    def from_paths(cls, *paths: str) -> TableColumns:
        """Columns from dotted paths, e.g. ``from_paths("id", "addr.city", "addr.zip")``."""
        tree: dict[str, Any] = {}
        for path in paths:
            node = tree
            for part in split_column_path(path) or (path,):
                node = node.setdefault(part, {})

        def build(nodes: dict[str, Any]) -> tuple[ColumnSchema, ...]:
            return tuple(
                ColumnSchema(name, build(children), type_name="struct" if children else "")
                for name, children in nodes.items()
            )

        return cls(build(tree))

    def column(self, name: str) -> ColumnSchema | None:
        """The top-level column called ``name`` (case-insensitively), if there is one."""
        return next((c for c in self.columns if c.name.lower() == name.lower()), None)

    def resolves(self, parts: Sequence[str], *, case_sensitive: bool = False) -> bool:
        """Whether ``parts`` (a column, then struct fields) names something in this table; names compare
        ignoring case unless ``case_sensitive``."""
        node = self.column(parts[0]) if parts else None
        spelled = node is not None and node.name == parts[0]
        for part in parts[1:]:
            if node is None or node.any_field:
                break
            node = node.field(part)
            spelled = spelled and node is not None and node.name == part
        return node is not None and (spelled or not case_sensitive)

    def non_struct_parent(self, parts: Sequence[str]) -> tuple[tuple[str, ...], ColumnSchema] | None:
        """The path and schema of the known non-struct column or field that ``parts`` names a field of, if
        any: UPDATE SET can assign fields of structs only (not of arrays' elements or maps)."""
        node = self.column(parts[0]) if parts else None
        for depth, part in enumerate(parts[1:], start=1):
            if node is None or node.type_name == "":
                return None
            if node.type_name != "struct":
                return tuple(parts[:depth]), node
            node = node.field(part)
        return None

    def missing_field(
        self, parts: Sequence[str], *, case_sensitive: bool
    ) -> tuple[tuple[str, ...], ColumnSchema] | None:
        """Where ``parts`` names a field that a struct column or field of this table lacks: the path to that
        field (the table's names, then the missing one as written) and the struct; None otherwise, also
        when no column is named so. Names compare as the session compares them (``case_sensitive``)."""

        key = str if case_sensitive else str.lower

        def named(candidates: Sequence[ColumnSchema], name: str) -> ColumnSchema | None:
            return next((c for c in candidates if key(c.name) == key(name)), None)

        node = named(self.columns, parts[0]) if parts else None
        found: tuple[str, ...] = (node.name,) if node is not None else ()
        for part in parts[1:]:
            if node is None or node.type_name != "struct":
                return None
            child = named(node.fields, part)
            if child is None:
                return (*found, part), node
            node, found = child, (*found, child.name)
        return None

    def paths(self) -> Iterator[tuple[str, ...]]:
        """Every column and nested field, as name parts."""

        def walk(columns: tuple[ColumnSchema, ...], prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
            for column in columns:
                yield (*prefix, column.name)
                yield from walk(column.fields, (*prefix, column.name))

        return walk(self.columns, ())


def _nested(data_type: Any) -> tuple[tuple[ColumnSchema, ...], bool]:
    """What a dotted name can reach below a column of Delta type ``data_type``: (fields, any_field)."""
    if not isinstance(data_type, Mapping):
        return (), False
    if data_type.get("type") == "struct":
        return _struct_fields(data_type), False
    if data_type.get("type") == "array":
        return _nested(data_type.get("elementType"))
    return (), data_type.get("type") == "map"


def _struct_fields(struct: Mapping[str, Any]) -> tuple[ColumnSchema, ...]:
    return tuple(
        ColumnSchema(
            f["name"],
            *_nested(f["type"]),
            type_name=_type_name(f["type"]),
        )
        for f in struct.get("fields", ())
    )


def _type_name(data_type: Any) -> str:
    return str(data_type.get("type", "")) if isinstance(data_type, Mapping) else str(data_type)


@dataclass(frozen=True)
class _Slot:
    """One condition or expression of the spec, and what it may refer to."""

    sql: str
    delta_clause: str  # Delta's name for the place, e.g. "UPDATE condition"
    where: str  # our name for it, e.g. "clause 2, WHEN MATCHED UPDATE"
    group: str | None  # the WHEN group; None for the ON condition


def _assignments(clause: MergeClause) -> tuple[tuple[str, str], ...]:
    if isinstance(clause, NotMatchedInsert):
        return clause.values
    if isinstance(clause, MatchedUpdate | NotMatchedBySourceUpdate):
        return clause.set
    return ()


def _clause_slots(position: int, clause: MergeClause) -> Iterator[_Slot]:
    """The condition and the assigned expressions of one clause."""
    where = describe_clause(position, clause)
    action = _ACTION_WORD[clause.kind]
    if clause.condition is not None:
        yield _Slot(clause.condition, f"{action} condition", where, clause.group)
    for _, expression in _assignments(clause):
        yield _Slot(expression, f"{action} clause", where, clause.group)


# Delta's log names of Spark's scalar types whose SQL name differs (Spark writes the rest upper-cased).
_SQL_TYPE_NAMES = {"integer": "INT", "long": "BIGINT", "short": "SMALLINT", "byte": "TINYINT"}


def _not_a_struct(path: tuple[str, ...], parent: ColumnSchema, where: str) -> Problem:
    """A field of a non-struct assigned: Spark's analysis refuses to extract from a scalar, Delta's update
    support refuses a field of an array or a map (which Spark can extract from)."""
    fix = f"Assign `{format_path(path)}` as a whole instead."
    if parent.type_name in ("array", "map"):
        return problem(
            "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT",
            where,
            fix,
            columnName=f"`{format_path(path)}`",
            dataType=parent.type_name,
        )
    sql_type = _SQL_TYPE_NAMES.get(parent.type_name, parent.type_name.upper())
    return problem(
        "INVALID_EXTRACT_BASE_FIELD_TYPE", where, fix, base=f'"{".".join(path)}"', other=f'"{sql_type}"'
    )


def no_such_field(path: tuple[str, ...], fields: Sequence[str], where: str) -> Problem:
    """Spark's error for a field that the struct at ``path[:-1]``, of ``fields``, lacks, as Delta's MERGE
    reports an assignment to it (its analysis of the assignment's target extracts the field)."""
    return problem(
        "FIELD_NOT_FOUND",
        where,
        f"`{format_path(path[:-1])}` has no field `{path[-1]}`; UPDATE SET assigns only fields the struct "
        "already has.",
        fieldName=f"`{path[-1]}`",
        fields=", ".join(f"`{name}`" for name in fields),
    )


class _Checker:
    """Resolves the references of one spec against known schemas, collecting problems."""

    def __init__(
        self, spec: MergeSpec, target: TableColumns, source: TableColumns | None, *, case_sensitive: bool
    ) -> None:
        self.spec = spec
        self.case_sensitive = case_sensitive
        # A name a case-sensitive session may not resolve (it matched only ignoring case, or names a schema
        # not known here): left to the job, which resolves it as Delta does and reports it before anything
        # written after it, so nothing after it is told here.
        self.deferred = False
        self.schemas: dict[Role, TableColumns | None] = {"target": target, "source": source}
        self.aliases: dict[Role, str] = {"target": spec.target_alias, "source": spec.source_alias}
        self.roles: dict[str, Role] = {
            spec.target_alias.lower(): "target",
            spec.source_alias.lower(): "source",
        }

    def visible(self, group: str | None) -> tuple[Role, ...]:
        return _VISIBLE[group] if group else ("target", "source")

    def listing(self, roles: Sequence[Role]) -> str:
        """The columns of ``roles`` as Delta lists them: ``t.id, t.name, s.id``."""
        listed = ", ".join(
            f"{quote_part(self.aliases[role])}.{quote_part(column.name)}"
            for role in roles
            for column in (self.schemas[role] or TableColumns(())).columns
        )
        return listed or "(not known before the Spark job runs)"

    def suggest(self, written: tuple[str, ...], roles: Sequence[Role], *, qualified: bool) -> str:
        candidates = {
            format_path((self.aliases[role], *path) if qualified else path): None
            for role in roles
            for path in (self.schemas[role] or TableColumns(())).paths()
        }
        by_lower = {c.lower(): c for c in candidates}
        close = difflib.get_close_matches(format_path(written).lower(), list(by_lower), n=3, cutoff=0.6)
        return f"Did you mean {' or '.join(by_lower[c] for c in close)}?" if close else ""

    def unresolved(self, parts: tuple[str, ...], slot: _Slot, roles: Sequence[Role], fix: str) -> Problem:
        return problem(
            "DELTA_MERGE_UNRESOLVED_EXPRESSION",
            slot.where,
            fix,
            sqlExpr=format_path(parts),
            clause=slot.delta_clause,
            cols=self.listing(roles),
        )

    def cannot_see(self, group: str | None, role: Role) -> str:
        seen: Role = "source" if role == "target" else "target"
        return (
            f"{GROUP_SQL_NAMES[group or 'matched']} clauses see only the {seen} ({self.aliases[seen]}): "
            f"there is no {role} row. Use a {seen} column here."
        )

    def reference(self, parts: tuple[str, ...], slot: _Slot) -> Problem | None:
        """The problem with one column reference of ``slot``, if it does not resolve."""
        visible = self.visible(slot.group)
        qualifier = self.roles.get(parts[0].lower()) if len(parts) > 1 else None
        if qualifier is not None and qualifier not in visible:
            return self.unresolved(parts, slot, visible, self.cannot_see(slot.group, qualifier))
        if qualifier is not None:
            schema = self.schemas[qualifier]
            if schema is None or schema.resolves(parts[1:]):
                self.defer_if_cased(schema, parts[1:])
                return None
            fix = (
                self.suggest(parts, [qualifier], qualified=True)
                or "Check the name against the columns listed."
            )
            return self.unresolved(parts, slot, visible, fix)
        known = [role for role in visible if self.schemas[role] is not None]
        matches = [role for role in known if (self.schemas[role] or TableColumns(())).resolves(parts)]
        if len(matches) > 1:
            names = ", ".join(f"`{self.aliases[r]}`.`{format_path(parts)}`" for r in matches)
            return problem(
                "AMBIGUOUS_REFERENCE",
                slot.where,
                f"Qualify it, e.g. {self.aliases[matches[0]]}.{format_path(parts)}.",
                name=f"`{format_path(parts)}`",
                referenceNames=f"[{names}]",
            )
        for role in matches if len(known) == len(visible) else visible:
            self.defer_if_cased(self.schemas[role], parts)
        if matches or len(known) < len(visible):
            return None
        return self.unresolved(parts, slot, visible, self.unresolved_fix(parts, slot, visible))

    def defer_if_cased(self, schema: TableColumns | None, parts: tuple[str, ...]) -> None:
        """Note a name that the session, comparing names by case, may not resolve: one ``schema`` has only
        in another case, or any name of a schema not known here (a query source's)."""
        if self.case_sensitive and (schema is None or not schema.resolves(parts, case_sensitive=True)):
            self.deferred = True

    def unresolved_fix(self, parts: tuple[str, ...], slot: _Slot, visible: Sequence[Role]) -> str:
        hidden = [r for r in _ROLES if r not in visible and self.schemas[r] is not None]
        if any((self.schemas[r] or TableColumns(())).resolves(parts) for r in hidden):
            return self.cannot_see(slot.group, hidden[0])
        if len(parts) > 1 and not any(
            (self.schemas[r] or TableColumns(())).column(parts[0]) for r in visible
        ):
            return (
                f"`{parts[0]}` is neither a column nor an alias: the target is {self.aliases['target']} and "
                f"the source {self.aliases['source']}."
            )
        return self.suggest(parts, visible, qualified=False) or "Check the name against the columns listed."

    def expression(self, slot: _Slot) -> list[Problem]:
        references = column_references(slot.sql)
        if isinstance(references, ExpressionSyntaxError):
            return [
                problem(
                    "PARSE_SYNTAX_ERROR",
                    slot.where,
                    f"Fix the {slot.delta_clause} {slot.sql!r} at line {references.line}, column "
                    f"{references.column}: {references.description}.",
                    error=repr(references.near),
                )
            ]
        problems = []
        for parts in references:
            if self.deferred:
                break
            found = self.reference(parts, slot)
            problems += [found] if found is not None else []
        return problems

    def assignment_targets(self, position: int, clause: MergeClause) -> list[Problem]:
        """Assigned columns the target lacks, unless schema evolution may add them from the source."""
        where = describe_clause(position, clause)
        slot = _Slot("", f"{_ACTION_WORD[clause.kind]} clause", where, clause.group)
        target = self.schemas["target"] or TableColumns(())
        source = self.schemas["source"]
        evolves = self.spec.schema_evolution and clause.group != "not_matched_by_source"
        problems = []
        for column, _ in _assignments(clause):
            if self.deferred:
                break
            parts = strip_alias(split_column_path(column) or (column,), self.spec.target_alias)
            parent = target.non_struct_parent(parts)
            if parent is not None and not isinstance(clause, NotMatchedInsert):
                problems.append(_not_a_struct(*parent, where))
                continue
            if target.resolves(parts):
                self.defer_if_cased(target, parts)
                continue
            if evolves and (source is None or len(parts) > 1 or source.resolves(parts)):
                continue
            missing = target.missing_field(parts, case_sensitive=self.case_sensitive)
            if missing is not None and not isinstance(clause, NotMatchedInsert):
                field_path, struct = missing
                problems.append(no_such_field(field_path, [f.name for f in struct.fields], where))
                continue
            hint = self.suggest(parts, ["target"], qualified=False)
            if len(parts) > 1:
                hint += " UPDATE SET can only assign fields the struct already has."
            elif clause.group == "not_matched_by_source":
                hint += " WHEN NOT MATCHED BY SOURCE clauses cannot add columns."
            elif not self.spec.schema_evolution:
                hint += " To add it from the source, set schema_evolution=True."
            else:
                hint += " Schema evolution adds only columns the source has."
            problems.append(self.unresolved(parts, slot, ["target"], hint.strip()))
        return problems + self.star(position, clause, slot)

    def star(self, position: int, clause: MergeClause, slot: _Slot) -> list[Problem]:
        """``*`` takes every target column from the source (without evolution); EXCEPT names real columns."""
        if not isinstance(clause, MatchedUpdate | NotMatchedInsert) or not clause.star:
            return []
        target = self.schemas["target"] or TableColumns(())
        source = self.schemas["source"]
        problems = []
        excepted = set()
        for column in clause.except_columns:
            parts = strip_alias(split_column_path(column) or (column,), self.spec.target_alias)
            excepted.add(folded(parts))
            in_source = source is None or source.resolves(parts)
            if not (target.resolves(parts) or (self.spec.schema_evolution and in_source)):
                fix = self.suggest(parts, ["target"], qualified=False) or "Name a target column in EXCEPT."
                problems.append(self.unresolved(parts, slot, ["target"], fix))
        if source is None or self.spec.schema_evolution:
            return problems
        missing = [
            c.name for c in target.columns if (c.name.lower(),) not in excepted and not source.column(c.name)
        ]
        if missing:
            star = "UPDATE SET *" if isinstance(clause, MatchedUpdate) else "INSERT *"
            problems.append(
                self.unresolved(
                    (self.aliases["source"], missing[0]) if len(missing) == 1 else (", ".join(missing),),
                    slot,
                    ["source"],
                    f"{star} takes every target column from the source, which lacks {', '.join(missing)}. "
                    f"Add {'it' if len(missing) == 1 else 'them'} to the source, leave "
                    f"{'it' if len(missing) == 1 else 'them'} out with * EXCEPT (...), or list the columns.",
                )
            )
        return problems

    def deduplication(self) -> list[Problem]:
        source = self.schemas["source"]
        if source is None:
            return []
        slot = _Slot("", "source de-duplication", "source de-duplication", "not_matched")
        problems = []
        for name in (*self.spec.deduplicate_source_by, *self.spec.deduplicate_order_by):
            parts = strip_alias(split_column_path(name) or (name,), self.spec.source_alias)
            if not source.resolves(parts):
                fix = self.suggest(parts, ["source"], qualified=False) or "Name a source column."
                problems.append(self.unresolved(parts, slot, ["source"], fix))
        return problems


def preflight_problems(
    spec: MergeSpec,
    target_columns: TableColumns,
    source_columns: TableColumns | None = None,
    *,
    case_sensitive: bool = False,
) -> list[Problem]:
    """Every column reference of ``spec`` that does not resolve, as Delta's analysis would word it.

    Args:
        spec: the merge, templates rendered.
        target_columns: the target table's schema.
        source_columns: the source's schema, or ``None`` when it is not cheaply known; checks that need it
            are then skipped.
        case_sensitive: the session compares names by case (``spark.sql.caseSensitive``). The checks
            otherwise ignore case, so a name in another case is left to the job, which resolves it as
            Delta does, with everything written after it; only a struct field's absence is told under this
            rule here.
    """
    checker = _Checker(spec, target_columns, source_columns, case_sensitive=case_sensitive)
    problems = checker.expression(_Slot(spec.condition, "search condition", "ON condition", None))
    for position, clause in enumerate(spec.clauses, start=1):
        problems += [p for slot in _clause_slots(position, clause) for p in checker.expression(slot)]
        problems += checker.assignment_targets(position, clause)
    return problems + checker.deduplication()


def run_preflight(
    spec: MergeSpec,
    *,
    read_target_schema: Callable[[str], Mapping[str, Any]],
    read_source_schema: Callable[[str, str], Mapping[str, Any] | None] | None = None,
    conf: Mapping[str, Any] | None = None,
) -> None:
    """Check ``spec`` against the real schemas before any Spark job runs.

    Args:
        spec: the merge, templates rendered.
        read_target_schema: ``(target) -> schema`` in Delta's JSON form; raises (e.g. ``TargetTableError``)
            when the target is not a Delta table.
        read_source_schema: ``(path, format) -> schema or None`` for a path source; ``None`` when the schema
            is not cheaply known. Table and query sources are never read.
        conf: the Spark conf the job runs with: Delta's ``autoMerge`` there evolves the schema as
            ``WITH SCHEMA EVOLUTION`` does (Delta's canEvolveSchema), so the checks allow what it adds;
            ``spark.sql.caseSensitive`` there decides whether a struct has a field named in another case.

    Raises:
        ClauseResolutionError: listing every reference that does not resolve.
    """
    if str((conf or {}).get(AUTO_MERGE_CONF, "")).strip().lower() == "true":
        spec = dataclasses.replace(spec, schema_evolution=True)
    target = TableColumns.from_delta_schema(read_target_schema(spec.target))
    source_schema = None
    if read_source_schema is not None and isinstance(spec.source, PathSource):
        source_schema = read_source_schema(spec.source.path, spec.source.format)
    source = TableColumns.from_delta_schema(source_schema) if source_schema is not None else None
    case_sensitive = str((conf or {}).get(CASE_SENSITIVE_CONF, "")).strip().lower() == "true"
    raise_problems(
        preflight_problems(spec, target, source, case_sensitive=case_sensitive), ClauseResolutionError
    )
