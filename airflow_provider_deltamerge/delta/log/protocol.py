"""What a merge may do to a table: the features in use it refuses, appendOnly, and constraints.

Checked before any work is done (``check_writable``), so a table the engine cannot write correctly is
refused with the feature named and the way out (``delta/log/table_features.py`` lists them), never
silently mis-read or mis-written. Constraints are
Delta's NOT NULL columns, CHECK constraints (``delta.constraints.*``) and legacy column invariants
(``delta.invariants`` field metadata); ``constraint_checks`` turns them into Spark expressions the writer
evaluates on every written row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltamerge.delta.log.row_tracking import FEATURE as ROW_TRACKING
from airflow_provider_deltamerge.delta.log.row_tracking import materialized_columns
from airflow_provider_deltamerge.delta.log.snapshot import Snapshot
from airflow_provider_deltamerge.delta.log.table_features import (
    VARIANT_SHREDDING_FEATURES,
    listed_refusals,
    unsupported_features_error,
)
from airflow_provider_deltamerge.exceptions import TargetTableError

APPEND_ONLY_KEY = "delta.appendOnly"
GENERATION_EXPRESSION_KEY = "delta.generationExpression"
# Identity columns' field metadata (PROTOCOL.md "Identity Columns").
IDENTITY_START_KEY = "delta.identity.start"
IDENTITY_STEP_KEY = "delta.identity.step"
IDENTITY_HIGH_WATER_MARK_KEY = "delta.identity.highWaterMark"
IDENTITY_ALLOW_EXPLICIT_INSERT_KEY = "delta.identity.allowExplicitInsert"
CONSTRAINT_PREFIX = "delta.constraints."
INVARIANTS_KEY = "delta.invariants"

# The table property that lets writers shred VARIANT columns (with a variantShredding feature).
VARIANT_SHREDDING_KEY = "delta.enableVariantShredding"

# Delta's texts (delta-error-classes.json) for the storage-side errors.
MESSAGES = {
    "DELTA_CANNOT_MODIFY_APPEND_ONLY": (
        "This table is configured to only allow appends. If you would like to permit updates or deletes, use "
        "'ALTER TABLE {table} SET TBLPROPERTIES ({config}=false)'."
    ),
    "DELTA_NOT_NULL_CONSTRAINT_VIOLATED": "NOT NULL constraint violated for column: {column}.",
    "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES": (
        "CHECK constraint {name} {expression} violated by row with values:\n{values}"
    ),
}


@dataclass(frozen=True)
class ConstraintCheck:
    """One row-level rule the written rows must satisfy, as Spark SQL, with Delta's error for a violation."""

    error_class: str
    name: str  # the constraint's name, or the column of a NOT NULL / invariant
    expression: str  # Spark SQL over the table's columns, true for a valid row

    @property
    def shows_values(self) -> bool:
        """Delta's message for a violation shows the values of the columns the rule reads (a NOT NULL
        column's names only the column)."""
        return self.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"


def refused_features(snapshot: Snapshot) -> list[str]:
    """The table features in use that the engine would not honour, by Delta's names, in a stable order."""
    protocol = snapshot.protocol
    found = listed_refusals(protocol)
    # Legacy protocols (writer < 7) imply features; they matter only when the table actually uses them.
    # Row tracking is written only where the table names its materialized columns.
    tracked = ROW_TRACKING in protocol.writer_features
    implied = {
        ROW_TRACKING: (tracked and materialized_columns(dict(snapshot.configuration)) is None)
        or (not tracked and is_true(snapshot.setting("delta.enableRowTracking"))),
    }
    found += [name for name, used in implied.items() if used and name not in found]
    return found


def shreds_variants(snapshot: Snapshot) -> bool:
    """Writers may shred VARIANT columns: the table supports a variantShredding feature and enables it
    (PROTOCOL.md "Variant Shredding"); otherwise files must hold them unshredded."""
    features = snapshot.protocol.writer_features
    return any(f in features for f in VARIANT_SHREDDING_FEATURES) and is_true(
        snapshot.setting(VARIANT_SHREDDING_KEY)
    )


def check_writable(snapshot: Snapshot, *, modifies_rows: bool) -> None:
    """Refuse, before any work, a merge the engine cannot do correctly on this table.

    Args:
        snapshot: the target as read.
        modifies_rows: the merge has an UPDATE or DELETE clause (it may remove files).

    Raises:
        TargetTableError: DELTA_UNSUPPORTED_FEATURES_FOR_WRITE naming each refused feature and what to do,
            or DELTA_CANNOT_MODIFY_APPEND_ONLY for an update or delete on an append-only table.
    """
    refused = refused_features(snapshot)
    if refused:
        raise unsupported_features_error(snapshot.table_uri, refused)
    if modifies_rows and is_true(snapshot.setting(APPEND_ONLY_KEY)):
        raise TargetTableError(
            MESSAGES["DELTA_CANNOT_MODIFY_APPEND_ONLY"].format(
                table=f"delta.`{snapshot.table_uri}`", config=APPEND_ONLY_KEY
            )
            + " This merge has UPDATE or DELETE clauses; an insert-only merge (only WHEN NOT MATCHED) is "
            "allowed.",
            error_class="DELTA_CANNOT_MODIFY_APPEND_ONLY",
        )


def constraint_checks(snapshot: Snapshot) -> list[ConstraintCheck]:
    """Every row-level rule of the table: NOT NULL columns (nested ones only under a non-null parent),
    legacy column invariants, then CHECK constraints by name."""
    checks = [
        ConstraintCheck("DELTA_NOT_NULL_CONSTRAINT_VIOLATED", path, condition)
        for path, condition in _not_null_paths(snapshot.schema["fields"], prefix=(), guard=None)
    ]
    for field in _fields(snapshot.schema):
        raw = field["metadata"].get(INVARIANTS_KEY)
        if raw:
            expression = json.loads(raw)["expression"]["expression"]
            checks.append(ConstraintCheck("DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", field["name"], expression))
    checks += [
        ConstraintCheck("DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", key[len(CONSTRAINT_PREFIX) :], expression)
        for key, expression in snapshot.configuration
        if key.startswith(CONSTRAINT_PREFIX) and expression
    ]
    # Delta checks a generated column as the constraint (column <=> expression) named "Generated Column".
    checks += [
        ConstraintCheck(
            "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES",
            "Generated Column",
            f"(`{field['name'].replace('`', '``')}` <=> ({field['metadata'][GENERATION_EXPRESSION_KEY]}))",
        )
        for field in snapshot.schema["fields"]
        if GENERATION_EXPRESSION_KEY in field["metadata"]
    ]
    return checks


def violation_message(check: ConstraintCheck, expression: str, values: str) -> str:
    """Delta's message for a row that broke ``check``, shown as ``expression``; ``values`` shows the columns
    it reads."""
    if not check.shows_values:
        return MESSAGES[check.error_class].format(column=check.name)
    return MESSAGES[check.error_class].format(name=check.name, expression=expression, values=values)


def _not_null_paths(
    fields: Sequence[Mapping[str, Any]], *, prefix: tuple[str, ...], guard: str | None
) -> Iterator[tuple[str, str]]:
    """(dotted column, condition) per non-nullable field; a nested field is checked only where its parent
    struct is present, as Delta does."""
    for field in fields:
        path = (*prefix, field["name"])
        sql = ".".join("`" + p.replace("`", "``") + "`" for p in path)
        if not field.get("nullable", True):
            present = f"{sql} IS NOT NULL"
            yield ".".join(path), present if guard is None else f"({guard}) IS NOT TRUE OR {present}"
        data_type = field["type"]
        if isinstance(data_type, dict) and data_type.get("type") == "struct":
            inner_guard = f"{sql} IS NOT NULL" if guard is None else f"({guard}) AND {sql} IS NOT NULL"
            yield from _not_null_paths(data_type["fields"], prefix=path, guard=inner_guard)


def _fields(schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{**f, "metadata": f.get("metadata") or {}} for f in schema["fields"]]


def is_true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"
