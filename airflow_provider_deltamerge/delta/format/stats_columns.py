"""Which columns of a table get file statistics, and which statistics each gets, by Delta's rules.

Mirrors Delta's ``StatisticsCollection.getIndexedColumns`` and ``SkippingEligibleDataType``:
``delta.dataSkippingStatsColumns``, when set, names the columns (a struct name means all its leaves) and
replaces ``delta.dataSkippingNumIndexedCols``, which otherwise keeps the first N leaf columns in schema
order (structs flattened; an array or a map is one leaf; -1 keeps all). Partition columns are never
indexed: their values are in the log already.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NUM_INDEXED_COLS_KEY = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS_KEY = "delta.dataSkippingStatsColumns"
STRING_PREFIX_LENGTH_KEY = "delta.dataSkippingStringPrefixLength"
# The session's prefix length, used when the table property is not set (as Delta's StatsCollectionUtils).
STRING_PREFIX_LENGTH_CONF = "spark.databricks.io.skipping.stringPrefixLength"
# Delta's defaults: DataSkippingReaderConf.DATA_SKIPPING_NUM_INDEXED_COLS_DEFAULT_VALUE and
# DeltaSQLConf.DATA_SKIPPING_STRING_PREFIX_LENGTH.
DEFAULT_NUM_INDEXED_COLS = 32
DEFAULT_STRING_PREFIX_LENGTH = 32

# Types with min/max statistics (Delta's SkippingEligibleDataType: numeric, date, timestamps, string).
_BOUNDED_TYPES = frozenset(
    {"byte", "short", "integer", "long", "float", "double", "date", "timestamp", "timestamp_ntz", "string"}
)
_DECIMAL = re.compile(r"decimal\(\s*\d+\s*,\s*-?\d+\s*\)")
# Field metadata key under which Spark records a non-default string collation: its order is not the byte
# order of the parquet footer, so such columns get no bounds here.
_COLLATIONS_KEY = "__COLLATIONS"

Field = Mapping[str, Any]  # one field of Delta's schema JSON (Spark's StructField JSON)


@dataclass(frozen=True)
class StatsSettings:
    """The table's statistics settings, from its configuration (``delta.*`` table properties)."""

    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS
    stats_columns: str | None = None
    string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH

    @classmethod
    def of(
        cls, configuration: Mapping[str, str | None], *, session_prefix: str | None = None
    ) -> StatsSettings:
        """The settings of a table with this ``configuration``; ``session_prefix`` is the session's
        STRING_PREFIX_LENGTH_CONF, which the table property overrides."""
        num_indexed = configuration.get(NUM_INDEXED_COLS_KEY)
        prefix = configuration.get(STRING_PREFIX_LENGTH_KEY) or session_prefix
        return cls(
            num_indexed_cols=int(num_indexed) if num_indexed is not None else DEFAULT_NUM_INDEXED_COLS,
            stats_columns=configuration.get(STATS_COLUMNS_KEY),
            string_prefix_length=int(prefix) if prefix is not None else DEFAULT_STRING_PREFIX_LENGTH,
        )


def indexed_columns(
    schema: Mapping[str, Any], partition_columns: Sequence[str], settings: StatsSettings
) -> list[Field]:
    """The table's stats-collection schema: its data fields (not partition columns) that get statistics.

    Structs are kept as structs holding only their indexed fields (possibly none), as Delta keeps them.
    """
    partitions = set(partition_columns)
    data_fields = [f for f in schema["fields"] if f["name"] not in partitions]
    if settings.stats_columns is not None:
        paths = [[part.lower() for part in path] for path in parse_column_list(settings.stats_columns)]
        return _filter(data_fields, paths)
    if settings.num_indexed_cols < 0:
        return data_fields
    return _truncate(data_fields, settings.num_indexed_cols)[0]


def has_bounds(field: Field) -> bool:
    """Delta keeps minValues/maxValues for this leaf field (SkippingEligibleDataType)."""
    data_type = field["type"]
    if not isinstance(data_type, str):
        return False
    if _COLLATIONS_KEY in (field.get("metadata") or {}):
        return False
    return data_type in _BOUNDED_TYPES or _DECIMAL.fullmatch(data_type) is not None


def is_struct(field: Field) -> bool:
    data_type = field["type"]
    return isinstance(data_type, dict) and data_type.get("type") == "struct"


def parse_column_list(text: str) -> list[list[str]]:
    """``a, s.b, `x.y`.z`` as name paths: commas and dots split, except inside backticks (a doubled
    backtick stands for one), as Delta's ``parseMultipartColumnList`` reads the property."""
    columns: list[list[str]] = []
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    index = 0
    while index < len(text):
        char = text[index]
        if quoted:
            if char == "`" and text[index + 1 : index + 2] == "`":
                current.append("`")
                index += 1
            elif char == "`":
                quoted = False
            else:
                current.append(char)
        elif char == "`":
            quoted = True
        elif char in ".,":
            parts.append("".join(current).strip())
            current = []
            if char == ",":
                columns.append(parts)
                parts = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current).strip())
    columns.append(parts)
    return [path for path in columns if any(path)]


def _filter(fields: Sequence[Field], paths: Sequence[Sequence[str]]) -> list[Field]:
    """Delta's ``filterSchema``: fields named by ``paths`` (lower-cased), in schema order, not list order."""
    wanted: dict[str, list[Sequence[str]]] = {}
    for path in paths:
        wanted.setdefault(path[0], []).append(path[1:])
    kept: list[Field] = []
    for field in fields:
        remainders = wanted.get(field["name"].lower())
        if remainders is None:
            continue
        if all(not rest for rest in remainders):
            kept.append(field)
        elif is_struct(field):
            inner = _filter(field["type"]["fields"], [rest for rest in remainders if rest])
            kept.append({**field, "type": {**field["type"], "fields": inner}})
        # else: a path into a field that is not a struct names nothing, as in Delta
    return kept


def _truncate(fields: Sequence[Field], limit: int) -> tuple[list[Field], int]:
    """Delta's ``truncateSchema``: the first ``limit`` leaves (array and map fields count as one leaf)."""
    kept: list[Field] = []
    counted = 0
    for field in fields:
        if counted >= limit:
            break
        if is_struct(field):
            inner, inner_count = _truncate(field["type"]["fields"], limit - counted)
            counted += inner_count
            kept.append({**field, "type": {**field["type"], "fields": inner}})
        else:
            counted += 1
            kept.append(field)
    return kept, counted
