"""UPDATE SET of struct fields (``SET t.addr.city = s.city``), rewritten as an assignment of the whole column.

As Delta's ``UpdateExpressionsSupport.generateUpdateExpressions`` does, the struct is rebuilt field by
field: an assigned field takes its expression, every other field keeps the row's value, at any depth. So a
NULL struct becomes a struct with only the assigned fields set (Delta 4.4 does the same). The result is one
``named_struct(...)`` expression per column, which the engine casts to the column's type like any other
assignment; no Python runs on the executors. Only UPDATE clauses may name fields (the spec refuses them in
INSERT), and a clause cannot assign a struct together with one of its fields (DELTA_CONFLICT_SET_COLUMN,
also checked by the spec). Under schema evolution a WHEN MATCHED UPDATE may assign a field only the source
has, named as the source names it (``SET addr.zip = s.addr.zip``): the struct is rebuilt with it, at the end
of its struct as schema evolution adds it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from airflow_provider_deltamerge.engine.resolve.unresolved import unresolved
from airflow_provider_deltamerge.exceptions import ClauseResolutionError
from airflow_provider_deltamerge.spec import MatchedUpdate, MergeClause, NotMatchedBySourceUpdate
from airflow_provider_deltamerge.spec.clauses import describe_clause
from airflow_provider_deltamerge.spec.names import format_path, quote_part, unqualified
from airflow_provider_deltamerge.spec.preflight import no_such_field
from airflow_provider_deltamerge.spec.validation import as_error, problem

FieldUpdates = Sequence[tuple[tuple[str, ...], str]]  # (field path below the column, SQL expression)


def assign_struct_fields(
    clause: MergeClause,
    position: int,
    target: StructType,
    *,
    target_alias: str,
    case_sensitive: bool = False,
    evolving_from: tuple[str, StructType] | None = None,
) -> MergeClause:
    """``clause`` with its struct-field assignments folded into one assignment per struct column.

    Assignments of whole columns, and names that are not a field path of a target column, are left as they
    are (resolution reports unknown columns). Column and field names match as the session compares names:
    ignoring case unless ``case_sensitive`` (Spark's ``spark.sql.caseSensitive``), as Delta resolves them.

    Args:
        evolving_from: under schema evolution, the source's alias and schema: Delta's MERGE resolves a
            MATCHED UPDATE's field path the target lacks on the source, and a path neither has is then its
            DELTA_MERGE_UNRESOLVED_EXPRESSION over the source's columns (without evolution, and in NOT
            MATCHED BY SOURCE clauses, Spark's FIELD_NOT_FOUND).

    Raises:
        ClauseResolutionError: a field that the struct does not have, or a field of a non-struct column.
    """
    if not isinstance(clause, MatchedUpdate | NotMatchedBySourceUpdate) or not clause.set:
        return clause
    key = _name_key(case_sensitive)
    columns = {key(f.name): f for f in target.fields}
    fields: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    pairs: list[tuple[str, str | None]] = []  # None: the place of a struct whose fields are assigned
    for written, expression in clause.set:
        path, qualified = unqualified(written, target_alias)
        column = columns.get(key(path[0]))
        if len(path) == 1 or column is None:
            pairs.append((written, expression))
            continue
        if evolving_from is not None and isinstance(clause, MatchedUpdate):
            _check_path_on_the_source(path, column.dataType, evolving_from, position, clause, key, qualified)
        if column.name not in fields:
            fields[column.name] = []
            pairs.append((column.name, None))
        fields[column.name].append((path[1:], expression))
    if not fields:
        return clause
    where = describe_clause(position, clause)
    source = {key(f.name): f.dataType for f in evolving_from[1].fields} if evolving_from is not None else {}

    def value(name: str) -> str:
        updates = fields[name]
        data_type = columns[key(name)].dataType
        if isinstance(clause, MatchedUpdate) and key(name) in source:
            data_type = _grown(data_type, source[key(name)], [path for path, _ in updates], key)
        return struct_with_fields(target_alias, name, data_type, updates, where=where, key=key)

    rebuilt = tuple(
        (name, expression if expression is not None else value(name)) for name, expression in pairs
    )
    return dataclasses.replace(clause, set=rebuilt)


def struct_with_fields(
    target_alias: str,
    column: str,
    data_type: DataType,
    updates: FieldUpdates,
    *,
    where: str,
    key: Callable[[str], str],
) -> str:
    """The value of struct ``column`` with the fields at ``updates``' paths set, every other field kept;
    field names compared by ``key`` (``_name_key``)."""
    current = f"{quote_part(target_alias)}.{quote_part(column)}"
    return _rebuild(current, (column,), data_type, updates, where, key)


def _check_path_on_the_source(
    path: tuple[str, ...],
    column_type: DataType,
    source: tuple[str, StructType],
    position: int,
    clause: MergeClause,
    key: Callable[[str], str],
    qualified: bool,
) -> None:
    """Raise Delta's error where the target column (of ``column_type``) lacks the field ``path`` and the
    source cannot resolve it: unresolved where the source lacks the column, or the path was written with the
    target's alias (``qualified``), which names nothing in the source, where Delta resolves such a path;
    Spark's FIELD_NOT_FOUND where the source's column lacks the field. A path written without the alias that
    the source has is added (``_grown``), as Delta's evolution adds it."""
    alias, schema = source
    if _has_fields(column_type, path[1:], key) or (not qualified and _has_fields(schema, path, key)):
        return
    missing = None if qualified else _missing_field(schema, path, key)
    if missing is not None:
        # The source resolves the column but not the field: Spark's extraction fails there, before Delta
        # could call the name unresolved.
        raise as_error(no_such_field(*missing, describe_clause(position, clause)), ClauseResolutionError)
    raise unresolved(
        position,
        clause,
        format_path(path),
        [f"{quote_part(alias)}.{quote_part(f.name)}" for f in schema.fields],
        "UPDATE clause",
        f"The table has no `{format_path(path)}`, and schema evolution adds only fields the source has, "
        "named as the source names them (without the target's alias).",
    )


def _grown(
    target: DataType, source: DataType, paths: Sequence[tuple[str, ...]], key: Callable[[str], str]
) -> DataType:
    """The struct ``target`` with each field that a path of ``paths`` names, the target lacks and the
    ``source`` struct has, appended after its fields in the source's order, as schema evolution adds them
    (``schema_evolution.evolved_schema``): a field assigned whole with the source's type, a struct that holds
    an assigned path with that path alone. Other types are returned as they are."""
    if not isinstance(target, StructType) or not isinstance(source, StructType):
        return target
    twins = {key(f.name): f.dataType for f in source.fields}
    fields = []
    for field in target.fields:
        below = [path[1:] for path in paths if len(path) > 1 and key(path[0]) == key(field.name)]
        if below and key(field.name) in twins:
            field = StructField(
                field.name,
                _grown(field.dataType, twins[key(field.name)], below, key),
                field.nullable,
                field.metadata,
            )
        fields.append(field)
    known = {key(f.name) for f in target.fields}
    for added in source.fields:
        below = [path[1:] for path in paths if key(path[0]) == key(added.name)]
        if key(added.name) in known or not below:
            continue
        whole = any(not path for path in below)
        fields.append(
            StructField(
                added.name, added.dataType if whole else _grown(StructType([]), added.dataType, below, key)
            )
        )
    return StructType(fields)


def _missing_field(
    schema: StructType, path: tuple[str, ...], key: Callable[[str], str]
) -> tuple[tuple[str, ...], list[str]] | None:
    """Where ``path`` leaves ``schema`` at a field a struct column of it lacks: the path to that field and the
    struct's field names; None where ``schema`` lacks the column or a non-struct stands in the way."""
    data_type: DataType = schema
    for depth, name in enumerate(path):
        if not isinstance(data_type, StructType):
            return None
        found = next((f for f in data_type.fields if key(f.name) == key(name)), None)
        if found is None:
            return (path[: depth + 1], [f.name for f in data_type.fields]) if depth > 0 else None
        data_type = found.dataType
    return None


def _has_fields(data_type: DataType, path: tuple[str, ...], key: Callable[[str], str]) -> bool:
    """Whether ``path`` names a field of the struct ``data_type`` at any depth (names compared by ``key``)."""
    for name in path:
        if not isinstance(data_type, StructType):
            return False
        found = next((f for f in data_type.fields if key(f.name) == key(name)), None)
        if found is None:
            return False
        data_type = found.dataType
    return True


def _name_key(case_sensitive: bool) -> Callable[[str], str]:
    return str if case_sensitive else str.lower


def _rebuild(
    current: str,
    at: tuple[str, ...],
    data_type: DataType,
    updates: FieldUpdates,
    where: str,
    key: Callable[[str], str],
) -> str:
    if not isinstance(data_type, StructType):
        raise _not_a_struct(at, data_type, where)
    known = {key(f.name) for f in data_type.fields}
    for path, _ in updates:
        if key(path[0]) not in known:
            raise _no_such_field((*at, path[0]), data_type, where)
    values = []
    for field in data_type.fields:
        mine = [(path[1:], expression) for path, expression in updates if key(path[0]) == key(field.name)]
        kept = f"{current}.{quote_part(field.name)}"
        if not mine:
            value = kept
        elif not mine[0][0]:  # the field itself is assigned (the spec allows nothing else below it then)
            value = f"({mine[0][1]})"
        else:
            value = _rebuild(kept, (*at, field.name), field.dataType, mine, where, key)
        values.append(f"{_string_literal(field.name)}, {value}")
    return f"named_struct({', '.join(values)})"


def _not_a_struct(at: tuple[str, ...], data_type: DataType, where: str) -> ClauseResolutionError:
    """A field of a non-struct assigned: Spark's analysis refuses to extract from a scalar, Delta's update
    support refuses a field of an array or a map (which Spark can extract from)."""
    fix = f"Assign `{format_path(at)}` as a whole instead."
    if isinstance(data_type, ArrayType | MapType):
        return as_error(
            problem(
                "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT",
                where,
                fix,
                columnName=f"`{format_path(at)}`",
                dataType=data_type.simpleString(),
            ),
            ClauseResolutionError,
        )
    return as_error(
        problem(
            "INVALID_EXTRACT_BASE_FIELD_TYPE",
            where,
            fix,
            base=f'"{".".join(at)}"',
            other=f'"{data_type.simpleString().upper()}"',
        ),
        ClauseResolutionError,
    )


def _no_such_field(path: tuple[str, ...], struct: StructType, where: str) -> ClauseResolutionError:
    """Spark's error for a field the struct lacks, as Delta's MERGE reports it (its analysis of the
    assignment's target extracts the field: also for a name the struct has in another case, where the
    session compares names by case)."""
    return as_error(no_such_field(path, [f.name for f in struct.fields], where), ClauseResolutionError)


def _string_literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
