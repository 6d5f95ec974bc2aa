"""The target schema after a merge with schema evolution, by Delta's rules.

Delta (``DeltaMergeInto.resolveReferencesAndSchema``) merges the target schema with the part of the source
schema that the merge assigns (``filterSchema``): a source field is kept whole when an UPDATE or INSERT of a
WHEN MATCHED / WHEN NOT MATCHED clause assigns its path (``*`` assigns every source column), and a struct
only some of whose fields are assigned (``SET t.addr.city = ...``) is kept with those fields alone: the
source's other fields of that struct are not added. WHEN NOT MATCHED BY SOURCE clauses never add columns.

The two are merged as ``SchemaMergingUtils.mergeSchemas(allowImplicitConversions=true)`` does: fields match
by name (case-insensitively); new fields are appended, nullable, at the end of their struct, at any depth and
inside arrays and maps; an existing column (or field, element, key, value) takes the source's type when the
table's type widening mode allows that change (engine/resolve/type_widening.py), else keeps its type
whenever Spark can cast the source's type to it implicitly (the value is then cast when written, as Delta's
store assignment does), otherwise the merge fails with DELTA_FAILED_TO_MERGE_FIELDS naming the column path
and both types.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    NullType,
    StructField,
    StructType,
    TimestampNTZType,
    VariantType,
)

from airflow_provider_deltamerge.delta.log.table_features import VARIANT_FEATURES
from airflow_provider_deltamerge.engine.resolve.cast_rules import implicit_cast
from airflow_provider_deltamerge.engine.resolve.type_widening import WideningMode
from airflow_provider_deltamerge.exceptions import SchemaEvolutionError
from airflow_provider_deltamerge.session_kind import is_connect

# delta-error-classes.json
_FAILED_TO_MERGE_FIELDS = "Failed to merge fields '{current}' and '{update}'"
_INCOMPATIBLE_DATATYPE = "Failed to merge incompatible data types {current} and {update}"
_INCOMPATIBLE_DECIMAL = "Failed to merge decimal types with incompatible {ranges}"
_VOID_COLUMN = "Cannot add column {column} with type VOID. Please explicitly specify a non-void type."
_NEEDS_FEATURE = (
    "Cannot add column {column} of type {type}: the table's protocol lacks the {feature} feature. "
    "Enable it first (ALTER TABLE ... SET TBLPROPERTIES ('delta.feature.{feature}' = 'supported')), or "
    "{otherwise}."
)
# Types a new column may have only where the protocol lists a feature: (feature names, what else to do).
# Delta's own MERGE adds the variantType feature to the protocol in the same commit; this engine's commits
# never change the protocol, so it asks for the feature first.
_FEATURE_TYPES: dict[type[DataType], tuple[tuple[str, ...], str]] = {
    TimestampNTZType: (("timestampNtz",), "cast the source column to TIMESTAMP"),
    VariantType: (VARIANT_FEATURES, "cast the source column to STRING (to_json), or use Delta's runtime"),
}

_WIDEN_NEEDS_FEATURE = (
    "Your table schema requires manually enablement of the following table feature(s): timestampNtz. "
    "Widening column {column} from DATE to TIMESTAMP_NTZ needs it: enable it first (ALTER TABLE ... SET "
    "TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')), or cast the source column to DATE."
)


def evolved_schema(
    spark: SparkSession,
    target: StructType,
    source: StructType,
    assigned: Collection[tuple[str, ...]],
    *,
    features: Collection[str],
    widening: WideningMode | None = None,
) -> StructType:
    """The target schema after the merge: ``target`` merged with the ``assigned`` paths of ``source``.

    Args:
        assigned: the paths (a column's name, then its fields' names; any case) that some WHEN MATCHED
            UPDATE or WHEN NOT MATCHED INSERT assigns, ``*`` expanded to its columns.
        features: the table's protocol's writer features: TIMESTAMP_NTZ and VARIANT columns may be added
            only under theirs.
        widening: the type changes the table lets a merge apply (None: the table does not widen types).

    Raises:
        SchemaEvolutionError: a source type does not merge into the target's, or a new column has no type
            or a type the table's protocol does not allow.
    """
    migration = _assigned_part(source, {tuple(p.lower() for p in path) for path in assigned}, ())
    return _Merger(spark, features=features, widening=widening).structs(target, migration, ())


def _assigned_part(
    struct: StructType, assigned: Collection[tuple[str, ...]], at: tuple[str, ...]
) -> StructType:
    """The fields of ``struct`` (at path ``at``) that an ``assigned`` path names, whole, and the structs that
    hold one, with only their assigned fields (Delta's ``filterSchema``)."""
    kept = []
    for field in struct.fields:
        path = (*at, field.name.lower())
        if path in assigned:
            kept.append(field)
        elif isinstance(field.dataType, StructType) and any(p[: len(path)] == path for p in assigned):
            part = _assigned_part(field.dataType, assigned, path)
            kept.append(StructField(field.name, part, field.nullable, field.metadata))
    return StructType(kept)


class _Merger:
    def __init__(
        self, spark: SparkSession, *, features: Collection[str], widening: WideningMode | None
    ) -> None:
        self._spark = spark
        self._features = features
        self._widening = widening

    def structs(self, current: StructType, update: StructType, path: Sequence[str]) -> StructType:
        by_name = {f.name.lower(): f for f in update.fields}
        fields = []
        for field in current.fields:
            match = by_name.pop(field.name.lower(), None)
            if match is None:
                fields.append(field)
                continue
            try:
                merged = self.types(field.dataType, match.dataType, (*path, field.name))
            except _Incompatible as err:
                raise SchemaEvolutionError(
                    _FAILED_TO_MERGE_FIELDS.format(
                        current=_path(path, field.name), update=_path(path, match.name)
                    )
                    + f": {err}. The source's type cannot be stored in the target column; cast it in the "
                    "source query, or leave the column out of the clauses.",
                    error_class="DELTA_FAILED_TO_MERGE_FIELDS",
                ) from None
            fields.append(StructField(field.name, merged, field.nullable, field.metadata))
        for added in by_name.values():
            _refuse_new_type(added.dataType, _path(path, added.name), features=self._features)
            fields.append(StructField(added.name, _nullable(added.dataType), True, added.metadata))
        return StructType(fields)

    def types(self, current: DataType, update: DataType, path: Sequence[str]) -> DataType:
        if isinstance(current, StructType) and isinstance(update, StructType):
            return self.structs(current, update, path)
        if isinstance(current, ArrayType) and isinstance(update, ArrayType):
            return ArrayType(self.types(current.elementType, update.elementType, path), current.containsNull)
        if isinstance(current, MapType) and isinstance(update, MapType):
            return MapType(
                self.types(current.keyType, update.keyType, path),
                self.types(current.valueType, update.valueType, path),
                current.valueContainsNull,
            )
        # Widening first, as Delta's mergeDataTypes: it takes precedence over keeping the type.
        if self._widening is not None and self._widening.widens(current, update):
            if isinstance(update, TimestampNTZType) and "timestampNtz" not in self._features:
                # The commit writes no protocol action, and the type needs the feature.
                raise SchemaEvolutionError(
                    _WIDEN_NEEDS_FEATURE.format(column=".".join(path)),
                    error_class="DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT",
                )
            return update
        # With implicit conversions, the target keeps its type whenever Spark casts the source's implicitly.
        if current == update or isinstance(update, NullType) or self._implicit_cast(update, current):
            return current
        if isinstance(current, DecimalType) and isinstance(update, DecimalType):
            ranges = [
                f"{what} {a} and {b}"
                for what, a, b in (
                    ("precision", current.precision, update.precision),
                    ("scale", current.scale, update.scale),
                )
                if a != b
            ]
            raise _Incompatible(_INCOMPATIBLE_DECIMAL.format(ranges=" & ".join(ranges)))
        raise _Incompatible(
            _INCOMPATIBLE_DATATYPE.format(current=current.simpleString(), update=update.simpleString())
        )

    def _implicit_cast(self, source: DataType, target: DataType) -> bool:
        """Spark's ``TypeCoercion.implicitCast`` (the non-ANSI rules Delta's schema merge uses); its port
        on Connect, which has no JVM to ask."""
        if is_connect(self._spark):
            return implicit_cast(source, target)
        jvm: Any = self._spark._jvm
        session: Any = self._spark._jsparkSession
        catalyst = jvm.org.apache.spark.sql.catalyst
        default = catalyst.expressions.Literal.default(session.parseDataType(source.json()))
        return bool(
            catalyst.analysis.TypeCoercion.implicitCast(
                default, session.parseDataType(target.json())
            ).isDefined()
        )


class _Incompatible(Exception):
    """Two types that do not merge; the caller names the field."""


def _path(path: Sequence[str], name: str) -> str:
    return ".".join((*path, name))


def _refuse_new_type(data_type: DataType, column: str, *, features: Collection[str]) -> None:
    """A new column (or field) needs a real type, and one the table's protocol allows."""
    if isinstance(data_type, NullType):
        raise SchemaEvolutionError(
            _VOID_COLUMN.format(column=column)
            + " The source column is NULL-typed (e.g. a bare NULL literal); cast it to a type in the source.",
            error_class="DELTA_MERGE_ADD_VOID_COLUMN",
        )
    needs = _FEATURE_TYPES.get(type(data_type))
    if needs is not None and not any(f in features for f in needs[0]):
        raise SchemaEvolutionError(
            _NEEDS_FEATURE.format(
                column=column, type=data_type.simpleString().upper(), feature=needs[0][0], otherwise=needs[1]
            ),
            error_class="DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT",
        )
    children: list[tuple[DataType, str]] = []
    if isinstance(data_type, StructType):
        children = [(f.dataType, f"{column}.{f.name}") for f in data_type.fields]
    elif isinstance(data_type, ArrayType):
        children = [(data_type.elementType, f"{column}.element")]
    elif isinstance(data_type, MapType):
        children = [(data_type.keyType, f"{column}.key"), (data_type.valueType, f"{column}.value")]
    for child, path in children:
        _refuse_new_type(child, path, features=features)


def _nullable(data_type: DataType) -> DataType:
    """``data_type`` with every nested field nullable: rows written before the column existed hold NULL."""
    if isinstance(data_type, StructType):
        return StructType(
            [StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in data_type.fields]
        )
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(_nullable(data_type.keyType), _nullable(data_type.valueType), True)
    return data_type
