"""Delta's type widening (table features ``typeWidening`` / ``typeWidening-preview``), as Delta 4.4 has it.

Which type changes Delta allows at all (``TypeWidening.isTypeChangeSupported``), which of them a merge with
schema evolution applies by itself (``TypeWideningMode.TypeEvolution``: all of them by default, fewer under
UniForm's Iceberg or the ``allowAutomaticWidening`` conf), and the ``delta.typeChanges`` field metadata that
records each change on the nearest struct field (``TypeWideningMetadata.addTypeWideningMetadata``).

Files written before a widening keep the narrower type; Spark's parquet reader reads them at the column's
current type, as Delta relies on too, so only the schema carries the history.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    ByteType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    VarcharType,
)

from airflow_provider_deltamerge.delta.log.protocol import CONSTRAINT_PREFIX, GENERATION_EXPRESSION_KEY
from airflow_provider_deltamerge.engine.resolve.cast_rules import can_up_cast
from airflow_provider_deltamerge.engine.resolve.casting import sql_type
from airflow_provider_deltamerge.exceptions import SchemaEvolutionError, TargetTableError
from airflow_provider_deltamerge.spec.names import format_path
from airflow_provider_deltamerge.spec.references import ExpressionSyntaxError, column_references

ENABLE_KEY = "delta.enableTypeWidening"
TYPE_CHANGES_KEY = "delta.typeChanges"
FEATURES = ("typeWidening", "typeWidening-preview")
PREVIEW_FEATURE = "typeWidening-preview"
# DeltaSQLConf: never / same_family_type / always (the default since Delta 4.1), read case-insensitively.
AUTOMATIC_CONF = "spark.databricks.delta.typeWidening.allowAutomaticWidening"
UNIFORM_FORMATS_KEY = "delta.universalFormat.enabledFormats"

# delta-error-classes.json
_UNSUPPORTED_CHANGE = (
    "Unable to operate on this table because an unsupported type change was applied. Field {field} was "
    "changed from {from_type} to {to_type}."
)
_DEPENDENT = (
    "Column {column} has data type {from_type} and cannot be altered to data type {to_type} because this "
    "column is referenced by the following {kind}:\n{expressions}"
)
# TypeWidening.isEnabled's IllegalStateException.
_NOT_SUPPORTED = (
    "Table property '{key}' is set on the table but this table version doesn't support table feature "
    "'delta.feature.typeWidening'."
)

_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
_INT32 = (ByteType, ShortType, IntegerType)
_SIZE = {ByteType: 1, ShortType: 2, IntegerType: 4, LongType: 8}


def is_type_change_supported(from_type: DataType, to_type: DataType) -> bool:
    """Delta's ``TypeWidening.isTypeChangeSupported``: a change of an atomic type Delta may record."""
    if from_type == to_type:
        return True
    if not can_up_cast(from_type, to_type):
        return False
    if isinstance(from_type, _INTEGRAL) and isinstance(to_type, _INTEGRAL):
        return _SIZE[type(from_type)] <= _SIZE[type(to_type)]
    if isinstance(from_type, FloatType) and isinstance(to_type, DoubleType):
        return True
    if isinstance(from_type, DateType) and isinstance(to_type, TimestampNTZType):
        return True
    if isinstance(from_type, _INT32) and isinstance(to_type, DoubleType):
        return True
    if isinstance(from_type, DecimalType) and isinstance(to_type, DecimalType):
        return _decimal_wider(to_type, from_type)
    # Parquet stores byte, short and int as INT32, long as INT64; its readers turn them into wide enough
    # decimals.
    if isinstance(from_type, _INT32) and isinstance(to_type, DecimalType):
        return _decimal_wider(to_type, DecimalType(10, 0))
    if isinstance(from_type, LongType) and isinstance(to_type, DecimalType):
        return _decimal_wider(to_type, DecimalType(20, 0))
    return False


def _decimal_wider(wide: DecimalType, narrow: DecimalType) -> bool:
    """Spark's ``DecimalType.isWiderThan``: every value of ``narrow`` fits ``wide``."""
    return wide.precision - wide.scale >= narrow.precision - narrow.scale and wide.scale >= narrow.scale


def _same_family(from_type: DataType, to_type: DataType) -> bool:
    """``isTypeChangeSupportedForSchemaEvolution``: the supported changes that stay in a type family."""
    if not is_type_change_supported(from_type, to_type):
        return False
    return (
        from_type == to_type
        or (isinstance(from_type, _INTEGRAL) and isinstance(to_type, _INTEGRAL))
        or (isinstance(from_type, FloatType) and isinstance(to_type, DoubleType))
        or (isinstance(from_type, DecimalType) and isinstance(to_type, DecimalType))
        or (isinstance(from_type, DateType) and isinstance(to_type, TimestampNTZType))
    )


def _iceberg_supported(from_type: DataType, to_type: DataType) -> bool:
    """``isTypeChangeSupportedByIceberg``: integral widening, float to double, decimal precision only."""
    if not is_type_change_supported(from_type, to_type):
        return False
    if isinstance(from_type, DecimalType) and isinstance(to_type, DecimalType):
        return from_type.scale == to_type.scale and from_type.precision <= to_type.precision
    return (
        from_type == to_type
        or (isinstance(from_type, _INTEGRAL) and isinstance(to_type, _INTEGRAL))
        or (isinstance(from_type, FloatType) and isinstance(to_type, DoubleType))
    )


@dataclass(frozen=True)
class WideningMode:
    """Which changes a merge's schema evolution applies by itself (Delta's ``TypeEvolution``)."""

    same_family_only: bool  # allowAutomaticWidening = same_family_type
    iceberg_only: bool  # UniForm writes Iceberg metadata: only changes Iceberg reads

    def widens(self, from_type: DataType, to_type: DataType) -> bool:
        if from_type == to_type:
            return False
        allowed = _same_family if self.same_family_only else is_type_change_supported
        return allowed(from_type, to_type) and (
            not self.iceberg_only or _iceberg_supported(from_type, to_type)
        )


def widening_mode(
    configuration: Mapping[str, str | None], features: Sequence[str], automatic: str | None
) -> WideningMode | None:
    """The mode a schema-evolving merge widens columns in, None when it widens none: the table does not
    enable type widening (``delta.enableTypeWidening``), or the session's ``allowAutomaticWidening`` is
    ``never``.

    Args:
        configuration: the table's properties.
        features: the table's writer features.
        automatic: the session's value of ``AUTOMATIC_CONF`` (None: Delta's default, ``always``).

    Raises:
        TargetTableError: the property is set but the protocol lacks the feature (Delta fails so too).
    """
    if (configuration.get(ENABLE_KEY) or "").strip().lower() != "true":
        return None
    if not any(f in features for f in FEATURES):
        raise TargetTableError(_NOT_SUPPORTED.format(key=ENABLE_KEY), error_class="DELTA_ILLEGAL_STATE")
    level = (automatic or "always").strip().upper()
    if level == "NEVER":
        return None
    formats = {f.strip().lower() for f in (configuration.get(UNIFORM_FORMATS_KEY) or "").split(",")}
    return WideningMode(same_family_only=level == "SAME_FAMILY_TYPE", iceberg_only="iceberg" in formats)


def with_type_changes(new: StructType, old: StructType, *, table_version: int | None) -> StructType:
    """``new`` with each field whose type (or a type inside its arrays and maps) was widened from ``old``
    carrying the change in ``delta.typeChanges``, after the changes recorded before; nested struct fields
    carry their own. Fields ``old`` lacks carry nothing.

    Args:
        table_version: the commit's version, recorded on ``typeWidening-preview`` tables only (None
            otherwise), as Delta 4.4 still does for preview readers.
    """
    before = {f.name: f for f in old.fields}
    return StructType([_field_with_changes(f, before.get(f.name), table_version) for f in new.fields])


def _field_with_changes(
    field: StructField, old: StructField | None, table_version: int | None
) -> StructField:
    if old is None:
        return field
    data_type = _nested_with_changes(field.dataType, old.dataType, table_version)
    changes = [
        {
            **({"tableVersion": table_version} if table_version is not None else {}),
            "fromType": from_type.jsonValue(),
            "toType": to_type.jsonValue(),
            **({"fieldPath": ".".join(path)} if path else {}),
        }
        for path, from_type, to_type in _changes(old.dataType, data_type, ())
    ]
    metadata = dict(field.metadata)
    if changes:
        metadata[TYPE_CHANGES_KEY] = [*metadata.get(TYPE_CHANGES_KEY, []), *changes]
    return StructField(field.name, data_type, field.nullable, metadata)


def _nested_with_changes(new: DataType, old: DataType, table_version: int | None) -> DataType:
    """Struct fields inside ``new`` (through arrays and maps) with their own changes recorded."""
    if isinstance(new, StructType) and isinstance(old, StructType):
        return with_type_changes(new, old, table_version=table_version)
    if isinstance(new, ArrayType) and isinstance(old, ArrayType):
        return ArrayType(
            _nested_with_changes(new.elementType, old.elementType, table_version), new.containsNull
        )
    if isinstance(new, MapType) and isinstance(old, MapType):
        return MapType(
            _nested_with_changes(new.keyType, old.keyType, table_version),
            _nested_with_changes(new.valueType, old.valueType, table_version),
            new.valueContainsNull,
        )
    return new


def _changes(
    old: DataType, new: DataType, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], DataType, DataType]]:
    """Atomic type changes from ``old`` to ``new`` outside nested structs, with their ``fieldPath``."""
    if isinstance(old, MapType) and isinstance(new, MapType):
        yield from _changes(old.keyType, new.keyType, (*path, "key"))
        yield from _changes(old.valueType, new.valueType, (*path, "value"))
    elif isinstance(old, ArrayType) and isinstance(new, ArrayType):
        yield from _changes(old.elementType, new.elementType, (*path, "element"))
    elif (
        not isinstance(old, StructType | ArrayType | MapType)
        and old != new
        and is_type_change_supported(old, new)
    ):
        yield path, old, new


def check_type_changes(schema: Mapping[str, Any], features: Sequence[str]) -> None:
    """Delta's ``TypeWidening.assertTableReadable``: every recorded type change is one Delta allows (or a
    string/char/varchar change, which is no widening).

    Raises:
        TargetTableError: DELTA_UNSUPPORTED_TYPE_CHANGE_IN_SCHEMA naming the field and both types.
    """
    if not any(f in features for f in FEATURES):
        return
    for path, change in _recorded(StructType.fromJson(dict(schema)), ()):
        from_type = _parse_type(change["fromType"])
        to_type = _parse_type(change["toType"])
        strings = (StringType, CharType, VarcharType)
        if is_type_change_supported(from_type, to_type) or (
            isinstance(from_type, strings) and isinstance(to_type, strings)
        ):
            continue
        field = ".".join((*path, *filter(None, str(change.get("fieldPath", "")).split("."))))
        raise TargetTableError(
            _UNSUPPORTED_CHANGE.format(field=field, from_type=sql_type(from_type), to_type=sql_type(to_type))
            + " A writer that does not follow Delta's type widening rules changed it; rewrite the column "
            "with Delta (or drop the typeWidening feature) before merging.",
            error_class="DELTA_UNSUPPORTED_TYPE_CHANGE_IN_SCHEMA",
        )


def _recorded(data_type: DataType, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every ``delta.typeChanges`` entry in ``data_type``, with the dotted path of its field."""
    if isinstance(data_type, StructType):
        for field in data_type.fields:
            here = (*path, field.name)
            for change in field.metadata.get(TYPE_CHANGES_KEY, []):
                yield here, change
            yield from _recorded(field.dataType, here)
    elif isinstance(data_type, ArrayType):
        yield from _recorded(data_type.elementType, (*path, "element"))
    elif isinstance(data_type, MapType):
        yield from _recorded(data_type.keyType, (*path, "key"))
        yield from _recorded(data_type.valueType, (*path, "value"))


def _parse_type(name: str) -> DataType:
    """A type as ``delta.typeChanges`` names it (Spark's ``typeName``: ``integer``, ``decimal(10,2)``)."""
    return (
        StructType.fromJson(
            {"type": "struct", "fields": [{"name": "x", "type": name, "nullable": True, "metadata": {}}]}
        )
        .fields[0]
        .dataType
    )


def check_dependent_expressions(
    current: StructType, widened: StructType, configuration: Mapping[str, str | None]
) -> None:
    """Delta's ``checkDependentExpressions``: a widened column (or field, element, key, value) may not be
    referenced by a CHECK constraint or a generated column's expression, whose meaning the type carries.

    Raises:
        SchemaEvolutionError: DELTA_CONSTRAINT_DATA_TYPE_MISMATCH or
            DELTA_GENERATED_COLUMNS_DATA_TYPE_MISMATCH naming the column, both types and the expressions, as
            Delta's text has them.
    """
    constraints = {
        k: v for k, v in configuration.items() if k.lower().startswith(CONSTRAINT_PREFIX) and v is not None
    }
    generated = {
        f.name: str(f.metadata[GENERATION_EXPRESSION_KEY])
        for f in widened.fields
        if GENERATION_EXPRESSION_KEY in f.metadata
    }
    for path, from_type, to_type in _widened_leaves(current, widened, ()):
        for error_class, kind, expressions in (
            ("DELTA_CONSTRAINT_DATA_TYPE_MISMATCH", "check constraint(s)", constraints),
            ("DELTA_GENERATED_COLUMNS_DATA_TYPE_MISMATCH", "generated column(s)", generated),
        ):
            dependent = [f"{name} -> {sql}" for name, sql in expressions.items() if _depends_on(sql, path)]
            if dependent:
                raise SchemaEvolutionError(
                    _DEPENDENT.format(
                        column=format_path(path),
                        from_type=sql_type(from_type),
                        to_type=sql_type(to_type),
                        kind=kind,
                        expressions="\n".join(dependent),
                    )
                    + "\nThe source's wider type would widen the column. Cast the source column to the "
                    "column's type, or leave the column out of the clauses.",
                    error_class=error_class,
                )


def _widened_leaves(
    current: DataType, widened: DataType, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], DataType, DataType]]:
    """(path, old type, new type) of every atomic type the merge widens, paths through ``element``/
    ``key``/``value`` as Delta names them."""
    if isinstance(current, StructType) and isinstance(widened, StructType):
        before = {f.name.lower(): f for f in current.fields}
        for field in widened.fields:
            old = before.get(field.name.lower())
            if old is not None:
                yield from _widened_leaves(old.dataType, field.dataType, (*path, field.name))
    elif isinstance(current, ArrayType) and isinstance(widened, ArrayType):
        yield from _widened_leaves(current.elementType, widened.elementType, (*path, "element"))
    elif isinstance(current, MapType) and isinstance(widened, MapType):
        yield from _widened_leaves(current.keyType, widened.keyType, (*path, "key"))
        yield from _widened_leaves(current.valueType, widened.valueType, (*path, "value"))
    elif current != widened:
        yield path, current, widened


def _depends_on(sql: str, path: tuple[str, ...]) -> bool:
    """Whether ``sql`` refers to ``path`` or to a part of it, or to a part of something inside it (Delta's
    ``containsDependentExpression``: one name path is a prefix of the other). An expression that does not
    parse counts as dependent, the safe side."""
    references = column_references(sql)
    if isinstance(references, ExpressionSyntaxError):
        return True
    return any(all(a.lower() == b.lower() for a, b in zip(ref, path, strict=False)) for ref in references)
