"""Spark schemas under column mapping (see ``column_mapping``): the physical form files are written and
read in, and ids and physical names for the columns a merge adds, as Delta's ``DeltaColumnMapping``
assigns them (the next ids, ``col-<uuid>`` names)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from airflow_provider_deltamerge.delta.format.column_mapping import (
    ID_KEY,
    PARQUET_FIELD_ID_KEY,
    PHYSICAL_NAME_KEY,
)


def physical_name(field: StructField) -> str:
    """The name ``field`` is stored under (its own name on a table without column mapping)."""
    return str(field.metadata.get(PHYSICAL_NAME_KEY, field.name))


def physical_type(data_type: DataType) -> DataType:
    """``data_type`` with every struct field, however nested, under its physical name and carrying its
    column id as the parquet field id, as written into data files."""
    return _with_fields(data_type, physical_field)


def _with_fields(data_type: DataType, change: Callable[[StructField], StructField]) -> DataType:
    """``data_type`` with ``change`` applied to each of its struct fields, through arrays and maps (``change``
    recurses into the field's own type)."""
    if isinstance(data_type, StructType):
        return StructType([change(f) for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(_with_fields(data_type.elementType, change), data_type.containsNull)
    if isinstance(data_type, MapType):
        return MapType(
            _with_fields(data_type.keyType, change),
            _with_fields(data_type.valueType, change),
            data_type.valueContainsNull,
        )
    return data_type


def physical_field(field: StructField) -> StructField:
    """``field`` as stored: its physical name and type, its id as the parquet field id."""
    metadata = {PARQUET_FIELD_ID_KEY: field.metadata[ID_KEY]} if ID_KEY in field.metadata else {}
    return StructField(physical_name(field), physical_type(field.dataType), field.nullable, metadata)


def read_field(field: StructField, *, by_id: bool) -> StructField:
    """``field`` as the reader asks files for it: as stored, with its parquet field ids in ``id`` mode (Spark
    then matches a file's columns by id), without them in ``name`` mode (matched by physical name), as
    Delta's ``DeltaParquetFileFormat.prepareSchemaForRead`` does."""
    stored = physical_field(field)
    return stored if by_id else _without_field_ids(stored)


def _without_field_ids(field: StructField) -> StructField:
    metadata = {k: v for k, v in field.metadata.items() if k != PARQUET_FIELD_ID_KEY}
    return StructField(field.name, _with_fields(field.dataType, _without_field_ids), field.nullable, metadata)


def with_new_columns_mapped(schema: StructType, max_column_id: int) -> tuple[StructType, int]:
    """``schema`` with an id and a physical name given to each field that has none (the fields a merge's
    schema evolution adds), numbered on from ``max_column_id``; and the largest id now given."""
    next_id = max_column_id

    def field(f: StructField) -> StructField:
        nonlocal next_id
        metadata = dict(f.metadata)
        if ID_KEY not in metadata:
            next_id += 1
            metadata[ID_KEY] = next_id
            metadata[PHYSICAL_NAME_KEY] = f"col-{uuid.uuid4()}"
        return StructField(f.name, _with_fields(f.dataType, field), f.nullable, metadata)

    return StructType([field(f) for f in schema.fields]), next_id
