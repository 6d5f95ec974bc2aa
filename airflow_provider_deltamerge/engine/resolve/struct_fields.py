"""UPDATE SET of struct fields (``SET t.addr.city = s.city``), rewritten as an assignment of the whole column.

As Delta's ``UpdateExpressionsSupport.generateUpdateExpressions`` does, the struct is rebuilt field by
field: an assigned field takes its expression, every other field keeps the row's value, at any depth. So a
NULL struct becomes a struct with only the assigned fields set (Delta 4.4 does the same). The result is one
``named_struct(...)`` expression per column, which the engine casts to the column's type like any other
assignment; no Python runs on the executors. Only UPDATE clauses may name fields (the spec refuses them in
INSERT), and a clause cannot assign a struct together with one of its fields (DELTA_CONFLICT_SET_COLUMN,
also checked by the spec).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from pyspark.sql.types import ArrayType, DataType, MapType, StructType

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
    rebuilt = tuple(
        (name, expression)
        if expression is not None
        else (
            name,
            struct_with_fields(
                target_alias, name, columns[key(name)].dataType, fields[name], where=where, key=key
            ),
        )
        for name, expression in pairs
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
    """Raise Delta's unresolved-name error where the target column (of ``column_type``) lacks the field
    ``path`` and the source cannot resolve it: the source lacks it too, or the path was written with the
    target's alias (``qualified``), which names nothing in the source, where Delta resolves such a path. A
    path written without it that only the source has is left to ``_rebuild``: nested fields are not added by
    schema evolution through an assignment (not built)."""
    alias, schema = source
    if _has_fields(column_type, path[1:], key) or (not qualified and _has_fields(schema, path, key)):
        return
    raise unresolved(
        position,
        clause,
        format_path(path),
        [f"{quote_part(alias)}.{quote_part(f.name)}" for f in schema.fields],
        "UPDATE clause",
        f"The table has no `{format_path(path)}`, and schema evolution adds only fields the source has, "
        "named as the source names them (without the target's alias).",
    )


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
