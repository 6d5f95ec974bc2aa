"""Delta file statistics (numRecords, minValues, maxValues, nullCount) from a parquet footer just written.

The result has the shape and values Delta's ``StatisticsCollection`` writes for the same rows: per-column
statistics nest like the schema, a leaf's statistics come from the parquet column chunk at the leaf's
path (never by position: a struct, array or map has one chunk per leaf field), and a statistic the footer
cannot prove is left out. Missing statistics only keep readers from skipping a file; wrong ones make them
skip rows they need.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltamerge.delta.format.stats_columns import (
    DEFAULT_STRING_PREFIX_LENGTH,
    Field,
    has_bounds,
    is_struct,
)

Path = tuple[str, ...]
# Delta appends one of these to a cut-off string max so that it stays >= every value it stands for.
ASCII_MAX_CHARACTER = "\x7f"
UTF8_MAX_CHARACTER = "\U0010ffff"
# parquet-mr (Spark's writer) orders NaN above every number, so a NaN in a column shows as its footer max;
# other writers (parquet-cpp, Arrow) leave NaN out of the bounds, which would then hide it. Delta's own
# footer-based collector (StatsCollectionUtils) trusts float bounds from this writer only, and so does this.
NAN_ORDERING_WRITER = "parquet-mr"


@dataclass(frozen=True)
class JsonNumber:
    """A number written into the stats JSON exactly as given (decimals: never through a binary float)."""

    text: str


@dataclass(frozen=True)
class LeafStats:
    """What the footer proves about one leaf column; None where it proves nothing."""

    null_count: int | None
    low: Any = None
    high: Any = None


def footer_stats(
    metadata: pq.FileMetaData,
    indexed: Sequence[Field],
    *,
    string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH,
) -> str:
    """The ``stats`` JSON of an add action, computed from the file's footer, not by reading its data.

    Args:
        metadata: the footer of the file.
        indexed: the table's stats-collection schema (``stats_columns.indexed_columns``).
        string_prefix_length: how many characters of a string bound Delta keeps.
    """
    leaves = leaf_columns(metadata)
    floats_trusted = (metadata.created_by or "").startswith(NAN_ORDERING_WRITER)

    def leaf(path: Path, field: Field) -> LeafStats:
        # A VARIANT is a group (value, metadata[, typed_value]); its metadata binary is required inside it,
        # so that chunk's nulls are exactly the rows where the VARIANT is NULL: Delta's nullCount.
        index = leaves.get((*path, "metadata") if field["type"] == "variant" else path)
        if index is None:
            # An array or map (its chunks count elements, not rows), or a column the file lacks.
            return LeafStats(None)
        return _leaf_stats(metadata, index, field, string_prefix_length, floats_trusted=floats_trusted)

    found: dict[Path, LeafStats] = {}

    def cached(path: Path, field: Field) -> LeafStats:
        if path not in found:
            found[path] = leaf(path, field)
        return found[path]

    return stats_json(
        metadata.num_rows,
        indexed,
        low=lambda path, field: cached(path, field).low,
        high=lambda path, field: cached(path, field).high,
        null_count=lambda path, field: cached(path, field).null_count,
    )


ValueOf = Callable[[Path, Field], Any]


def stats_json(
    num_records: int, indexed: Sequence[Field], *, low: ValueOf, high: ValueOf, null_count: ValueOf
) -> str:
    """Delta's stats JSON: minValues/maxValues over bounded leaves, nullCount over every leaf.

    As Delta's ``to_json`` writes it: a None value is left out, a struct with such leaves stays as ``{}``, and
    a statistic with no leaf at all is left out entirely.
    """
    stats: dict[str, Any] = {"numRecords": num_records}
    for name, value_of, include in (
        ("minValues", low, has_bounds),
        ("maxValues", high, has_bounds),
        ("nullCount", null_count, lambda _: True),
    ):
        tree = _tree(indexed, (), value_of, include)
        if tree is not None:
            stats[name] = tree
    return _dumps(stats)


def leaf_columns(metadata: pq.FileMetaData) -> dict[Path, int]:
    """Parquet column index of each leaf reached through structs only, by its path of field names.

    Leaves inside arrays and maps are counted (they take column indexes) but not listed. Each path is
    checked against the footer's own column path, so a schema this code misreads yields no statistics.
    """
    found: dict[Path, int] = {}
    next_index = 0

    def walk(field: pa.Field, path: Path, listed: bool) -> None:
        nonlocal next_index
        data_type = field.type
        if pa.types.is_struct(data_type):
            for child in data_type.fields:
                walk(child, (*path, child.name), listed)
        elif pa.types.is_map(data_type):
            walk(data_type.key_field, path, False)
            walk(data_type.item_field, path, False)
        elif pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
            walk(data_type.value_field, path, False)
        else:
            if listed and metadata.schema.column(next_index).path == ".".join(path):
                found[path] = next_index
            next_index += 1

    try:
        arrow_schema = metadata.schema.to_arrow_schema()
    except (pa.ArrowException, ValueError):
        return {}  # a parquet schema pyarrow cannot map: no statistics rather than guessed ones
    for top in arrow_schema:
        walk(top, (top.name,), True)
    return found if next_index == metadata.num_columns else {}


def _leaf_stats(
    metadata: pq.FileMetaData, index: int, field: Field, prefix: int, *, floats_trusted: bool
) -> LeafStats:
    chunks = [metadata.row_group(rg) for rg in range(metadata.num_row_groups)]
    statistics = [rg.column(index).statistics for rg in chunks]
    if not statistics or any(s is None or not s.has_null_count for s in statistics):
        return LeafStats(None)
    null_count = sum(s.null_count for s in statistics)
    if not has_bounds(field):
        return LeafStats(null_count)
    lows: list[Any] = []
    highs: list[Any] = []
    for rg, s in zip(chunks, statistics, strict=True):
        if s.has_min_max:
            try:
                lows.append(s.min)
                highs.append(s.max)
            except (pa.ArrowException, ValueError, OverflowError):
                # A value Python cannot hold (nanoseconds, a year past 9999): no bounds rather than a crash.
                return LeafStats(null_count)
        elif s.null_count != rg.num_rows:
            return LeafStats(null_count)  # values without bounds in the footer: nothing is proven
    if not lows:
        return LeafStats(null_count)  # only NULLs: Delta's min and max are NULL too
    data_type = field["type"]
    if data_type in ("float", "double"):
        if not floats_trusted:
            return LeafStats(null_count)
        return LeafStats(null_count, *_float_bounds(lows, highs, single=data_type == "float"))
    try:
        low, high = min(lows), max(highs)
    except TypeError:  # values of mixed types: not a footer this code understands
        return LeafStats(null_count)
    return LeafStats(
        null_count, _bound(low, data_type, prefix, upper=False), _bound(high, data_type, prefix, upper=True)
    )


def _float_bounds(lows: Sequence[Any], highs: Sequence[Any], *, single: bool) -> tuple[Any, Any]:
    """Delta's min and max of a float column (Spark orders NaN above every number), where JSON can hold them.

    A NaN max (Delta writes the string "NaN") and infinite bounds are left out.
    """
    numbers = [v for v in lows if isinstance(v, float) and not math.isnan(v)]
    low = min(numbers) if numbers else None
    high = None
    if all(isinstance(v, float) for v in highs) and not any(math.isnan(v) for v in highs):
        high = max(highs)
    return _float_number(low, single=single), _float_number(high, single=single)


def _float_number(value: float | None, *, single: bool) -> JsonNumber | None:
    if value is None or math.isinf(value):
        return None
    # A float column's value printed as a float (0.1, not 0.10000000149011612), as Delta's JSON has it.
    return JsonNumber(str(np.float32(value)) if single else repr(value))


def _bound(value: Any, data_type: str, prefix: int, *, upper: bool) -> Any:
    """A footer bound in the JSON form of Delta's stats, or None when it is not of the column's type."""
    if data_type in ("byte", "short", "integer", "long"):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if data_type == "string":
        if not isinstance(value, str):
            return None
        return truncate_max(value, prefix) if upper else truncate_min(value, prefix)
    if data_type == "date":
        return value.isoformat() if type(value) is datetime.date else None
    if data_type in ("timestamp", "timestamp_ntz"):
        if not isinstance(value, datetime.datetime) or (value.tzinfo is not None) != (
            data_type == "timestamp"
        ):
            return None
        return timestamp_text(value)
    if data_type.startswith("decimal"):
        return JsonNumber(str(value)) if isinstance(value, decimal.Decimal) and value.is_finite() else None
    return None


# The Parquet writer's setting that cuts the string bounds its footer keeps (parquet-mr's
# ParquetMetadataConverter.toParquetStatistics; a writer option reaches it through the Hadoop conf).
FOOTER_BOUND_BYTES_CONF = "parquet.statistics.truncate.length"


def footer_bound_bytes(prefix: int) -> int:
    """The bytes a footer's string bounds are cut to (``FOOTER_BOUND_BYTES_CONF``) for Delta's ``prefix``.

    Uncut, a column chunk whose min or max exceeds 4 KiB gets no statistics at all, not even its null count,
    where Delta keeps the prefix bounds and the count. Cut, the min is the value's first bytes and the max
    its first bytes with the last character raised (an upper bound still). The cut keeps every character
    ``truncate_min`` and ``truncate_max`` read (2 x prefix + 2 UTF-16 units, at most 3 bytes each) in front of
    the raised one, so Delta's bounds come out of the footer unchanged.
    """
    return max(256, 6 * prefix + 16)


def truncate_min(value: str, prefix: int) -> str:
    """Delta's string min: its first ``prefix`` characters (``substring(min(c), 0, prefix)``, code points)."""
    return value[:prefix]


def truncate_max(value: str, prefix: int) -> str | None:
    """Delta's string max (``StatisticsCollection.truncateMaxStringAgg``), counted in UTF-16 units as Java.

    A cut-off max gets a tie-breaker (U+007F when the next character is below it, else U+10FFFF) so it stays
    >= every value; None when no such bound fits in twice the prefix.
    """
    units = value.encode("utf-16-le")
    length = len(units) // 2
    if length <= prefix:
        return value
    if prefix <= 0:
        return None

    def unit(i: int) -> int:
        return int.from_bytes(units[2 * i : 2 * i + 2], "little")

    def head(n: int) -> str:
        return units[: 2 * n].decode("utf-16-le")

    current = (
        prefix + 1 if 0xD800 <= unit(prefix - 1) <= 0xDBFF and 0xDC00 <= unit(prefix) <= 0xDFFF else prefix
    )
    while current <= 2 * prefix:
        if current >= length:
            return value
        if current + 1 < length and (unit(current), unit(current + 1)) == (0xDBFF, 0xDFFF):
            current += 2  # the tie-breaker itself: it cannot be exceeded, keep it and look further
        elif unit(current) < ord(ASCII_MAX_CHARACTER):
            return head(current) + ASCII_MAX_CHARACTER
        else:
            return head(current) + UTF8_MAX_CHARACTER
    return None


def timestamp_text(value: datetime.datetime) -> str:
    """A timestamp bound as Delta's JSON writes it: cut down to milliseconds (readers add 1 ms to a max).

    Delta prints an instant in the session time zone; this prints it in UTC, the same instant.
    """
    utc = value.astimezone(datetime.UTC).replace(tzinfo=None) if value.tzinfo else value
    # isoformat cuts (never rounds) to milliseconds and pads the year to four digits, as Delta's format does.
    return utc.isoformat(timespec="milliseconds") + ("Z" if value.tzinfo else "")


def _tree(
    fields: Sequence[Field], path: Path, value_of: ValueOf, include: Callable[[Field], bool]
) -> dict[str, Any] | None:
    """The nested values of one statistic; None when no leaf below takes it."""
    values: dict[str, Any] = {}
    any_leaf = False
    for field in fields:
        field_path = (*path, field["name"])
        if is_struct(field):
            inner = _tree(field["type"]["fields"], field_path, value_of, include)
            if inner is not None:
                values[field["name"]], any_leaf = inner, True
        elif include(field):
            any_leaf = True
            value = value_of(field_path, field)
            if value is not None:
                values[field["name"]] = value
    return values if any_leaf else None


def _dumps(value: Any) -> str:
    """Compact JSON in which a ``JsonNumber`` keeps its exact text."""
    if isinstance(value, Mapping):
        return (
            "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_dumps(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, JsonNumber):
        return value.text
    return json.dumps(value, ensure_ascii=False)
