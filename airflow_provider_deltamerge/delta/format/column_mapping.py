"""Column mapping (PROTOCOL.md "Column Mapping"): columns stored under physical names and field ids.

With ``delta.columnMapping.mode`` ``name`` or ``id``, every field of the schema, nested ones included, has a
``delta.columnMapping.physicalName`` and a ``delta.columnMapping.id`` in its metadata. Data files name
their columns by the physical names and carry the ids as parquet field ids; the log keys partition values
and column stats by physical names; the metaData keeps the largest id given in
``delta.columnMapping.maxColumnId``. The engine works with logical names throughout: the reader renames
what it reads, the writer renames what it writes, the snapshot renames the stats, and the commit renames
partition values. ``physical_schema`` holds the Spark side (physical types, new columns' ids); this module
stays free of pyspark, since the Airflow side reads snapshots too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

MODE_KEY = "delta.columnMapping.mode"
MAX_COLUMN_ID_KEY = "delta.columnMapping.maxColumnId"
ID_KEY = "delta.columnMapping.id"
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
# The field metadata key Spark's parquet writer turns into the field id of the column it writes.
PARQUET_FIELD_ID_KEY = "parquet.field.id"


def maps_columns(configuration: Mapping[str, str | None]) -> bool:
    """Whether the table's columns are stored under physical names (mode ``name`` or ``id``)."""
    return _mode(configuration) != "none"


def maps_by_id(configuration: Mapping[str, str | None]) -> bool:
    """Whether files' columns are found by their parquet field ids (mode ``id``), not by physical names."""
    return _mode(configuration) == "id"


def _mode(configuration: Mapping[str, str | None]) -> str:
    return (configuration.get(MODE_KEY) or "none").strip().lower()


def stored_name(field: Mapping[str, Any]) -> str:
    """The name a field of a schema (Delta's JSON form) is stored under: its physical name, if it has one."""
    return str((field.get("metadata") or {}).get(PHYSICAL_NAME_KEY, field["name"]))


def stored_schema(schema: Mapping[str, Any], partition_columns: Sequence[str]) -> dict[str, Any]:
    """A schema (Delta's JSON form) as data files store it: every struct field, however nested, under its
    stored name; partition columns, which files do not hold, keep theirs."""

    def stored_type(data_type: Any) -> Any:
        if not isinstance(data_type, dict):
            return data_type
        if data_type.get("type") == "struct":
            return {**data_type, "fields": [field(f) for f in data_type["fields"]]}
        if data_type.get("type") == "array":
            return {**data_type, "elementType": stored_type(data_type["elementType"])}
        if data_type.get("type") == "map":
            keys, values = stored_type(data_type["keyType"]), stored_type(data_type["valueType"])
            return {**data_type, "keyType": keys, "valueType": values}
        return data_type

    def field(f: Mapping[str, Any]) -> dict[str, Any]:
        return {**f, "name": stored_name(f), "type": stored_type(f["type"])}

    fields = [f if f["name"] in partition_columns else field(f) for f in schema["fields"]]
    return {**schema, "fields": fields}


def logical_paths(schema: Mapping[str, Any]) -> dict[str, str]:
    """Dotted physical paths of nested struct fields (what stats are keyed by) to their logical paths."""
    found: dict[str, str] = {}

    def walk(fields: list[dict[str, Any]], physical: str, logical: str) -> None:
        for field in fields:
            paths = (f"{physical}{stored_name(field)}", f"{logical}{field['name']}")
            found[paths[0]] = paths[1]
            if isinstance(field["type"], dict) and field["type"].get("type") == "struct":
                walk(field["type"]["fields"], paths[0] + ".", paths[1] + ".")

    walk(list(schema["fields"]), "", "")
    return found


def logical_stats_columns(columns: list[str], schema: Mapping[str, Any]) -> list[str]:
    """deltalake's flattened add-action columns (``min.<path>``, ``max.<path>``, ``null_count.<path>``)
    renamed from physical to logical paths; other columns keep their names."""
    paths = logical_paths(schema)
    renamed = []
    for column in columns:
        kind, _, path = column.partition(".")
        stat = kind in ("min", "max", "null_count") and path in paths
        renamed.append(f"{kind}.{paths[path]}" if stat else column)
    return renamed


def max_column_id(configuration: Mapping[str, str | None], schema_json: str) -> int:
    """The largest column id a table with these properties and this schema has given: its ``maxColumnId``,
    or its schema's largest id."""
    return max(int(configuration.get(MAX_COLUMN_ID_KEY) or 0), largest_column_id(schema_json))


def largest_column_id(schema_json: str) -> int:
    """The largest column id in a schema (Delta's JSON form); 0 when none has one."""
    largest = 0

    def walk(node: Any) -> None:
        nonlocal largest
        if isinstance(node, dict):
            if ID_KEY in (node.get("metadata") or {}):
                largest = max(largest, int(node["metadata"][ID_KEY]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(schema_json))
    return largest
