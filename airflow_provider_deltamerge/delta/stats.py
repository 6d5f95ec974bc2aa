"""Delta file statistics (numRecords, minValues, maxValues, nullCount) from a parquet footer just written."""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

import pyarrow.parquet as pq

# Delta's default for delta.dataSkippingNumIndexedCols, and the prefix length it keeps of string bounds.
DEFAULT_NUM_INDEXED_COLS = 32
STRING_PREFIX_LENGTH = 32


def footer_stats(metadata: pq.FileMetaData, *, num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS) -> str:
    """The ``stats`` JSON of an add action, computed from the file's footer, not by reading its data.

    Only top-level primitive columns among the first ``num_indexed_cols`` get bounds; a column whose
    footer lacks statistics in any row group gets none (readers then cannot skip on it, which is safe).
    """
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    schema = metadata.schema.to_arrow_schema()
    for index, field in enumerate(schema):
        if index >= num_indexed_cols or field.type.num_fields > 0:
            continue
        column_stats = [
            metadata.row_group(rg).column(index).statistics for rg in range(metadata.num_row_groups)
        ]
        if not column_stats or any(s is None or not s.has_null_count for s in column_stats):
            continue
        nulls[field.name] = sum(s.null_count for s in column_stats)
        bounded = [s for s in column_stats if s.has_min_max]
        if bounded:
            low, high = min(s.min for s in bounded), max(s.max for s in bounded)
            json_low, json_high = _json_bound(low, upper=False), _json_bound(high, upper=True)
            if json_low is not None and json_high is not None:
                mins[field.name], maxs[field.name] = json_low, json_high
    return json.dumps(
        {"numRecords": metadata.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
        separators=(",", ":"),
    )


def _json_bound(value: Any, *, upper: bool) -> Any:
    """A footer bound in the JSON form Delta's stats use, or None when Delta keeps no bound for it."""
    if isinstance(value, bool):
        return None  # Delta keeps no min/max for booleans
    if isinstance(value, str):
        if len(value) <= STRING_PREFIX_LENGTH:
            return value
        # A truncated upper bound must still be >= every value: Delta appends a max code point.
        prefix = value[:STRING_PREFIX_LENGTH]
        return prefix + "\U0010ffff" if upper else prefix
    if isinstance(value, datetime.datetime):
        return _timestamp_bound(value, upper=upper)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, int):
        return value
    # Decimals (JSON numbers that float would round) and binary columns get no bounds.
    return None


def _timestamp_bound(value: datetime.datetime, *, upper: bool) -> str:
    """Delta keeps timestamp bounds in milliseconds; an upper bound is rounded up so it still covers."""
    utc = value.astimezone(datetime.UTC) if value.tzinfo else value
    millis = utc.replace(microsecond=(utc.microsecond // 1000) * 1000)
    if upper and millis != utc:
        millis += datetime.timedelta(milliseconds=1)
    text = millis.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis.microsecond // 1000:03d}"
    return text + ("Z" if value.tzinfo else "")
