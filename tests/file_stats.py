"""The stats check every commit of the test suite passes: an added file's stats are what its rows say.

``check_added_files`` reads each added parquet file back with pyarrow, computes numRecords and, for every
column Delta indexes, min/max/nullCount from the rows with Delta's rules, and compares them with the stats
the add action carries. A stat the writer left out must be one it cannot know from the footer (the reasons
are listed in ``_why_absent``); any other difference raises, naming the file, the column and both values.

Which columns are indexed, and the string cut-off, come from the product (``stats_columns``,
``truncate_max``): they are pinned by literal expected values in tests/delta/test_file_stats.py. Everything
else here is computed independently of the footer-reading code it checks.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake.fs import DeltaStorageHandler

from airflow_provider_deltamerge.delta.commit.commit_actions import MergeCommitActions
from airflow_provider_deltamerge.delta.format.column_mapping import maps_columns, stored_schema
from airflow_provider_deltamerge.delta.format.stats import truncate_max
from airflow_provider_deltamerge.delta.format.stats_columns import (
    STRING_PREFIX_LENGTH_CONF,
    Field,
    StatsSettings,
    has_bounds,
    indexed_columns,
    is_struct,
)
from airflow_provider_deltamerge.delta.log.snapshot import Snapshot

Path = tuple[str, ...]


class FileStatsMismatch(AssertionError):
    """An added file's stats say something its rows do not."""


def check_actions(base: Snapshot, commit: MergeCommitActions) -> None:
    """Check the add actions of ``commit`` on ``base`` (against the table's new schema, if it changes)."""
    added = [(f.relative_path, f.stats) for f in commit.added]
    schema = commit.schema
    if added:
        from pyspark.sql import SparkSession

        # The session's string prefix applies where the table sets none, as the writer reads it.
        session = SparkSession.getActiveSession()
        session_prefix = session.conf.get(STRING_PREFIX_LENGTH_CONF, None) if session is not None else None
        check_added_files(
            base.table_uri,
            schema or base.schema_json,
            base.partition_columns,
            dict(base.configuration),
            added,
            session_prefix=session_prefix,
        )


def check_added_files(
    table_uri: str,
    schema_json: str,
    partition_columns: Sequence[str],
    configuration: Mapping[str, str | None],
    added: Sequence[tuple[str, str | None]],
    *,
    session_prefix: str | None = None,
) -> None:
    """Check the stats of each added file ((decoded relative path, stats JSON)) against the file's rows.

    Raises:
        FileStatsMismatch: naming the file, the column, the stat, the written value and the value of the rows.
    """
    schema = json.loads(schema_json)
    settings = StatsSettings.of(configuration, session_prefix=session_prefix)
    indexed = indexed_columns(schema, partition_columns, settings)
    if maps_columns(configuration):  # files and stats use the physical names
        indexed = stored_schema({"fields": indexed}, partition_columns)["fields"]
    filesystem, root = _filesystem(table_uri)
    for relative_path, stats_text in added:
        if stats_text is not None:  # no stats at all: readers skip nothing
            location = f"{root}/{relative_path}" if root else relative_path
            check_file(filesystem, location, stats_text, indexed, settings)


def check_file(
    filesystem: pafs.FileSystem,
    location: str,
    stats_text: str,
    indexed: Sequence[Field],
    settings: StatsSettings,
) -> None:
    """Check one file's stats JSON against its rows (see ``check_added_files``)."""
    with filesystem.open_input_file(location) as handle:
        parquet = pq.ParquetFile(handle)
        metadata = parquet.metadata
        rows = parquet.read()
    stats = json.loads(stats_text, parse_float=decimal.Decimal)
    problems = list(_compare(stats, rows, metadata, indexed, settings))
    if problems:
        raise FileStatsMismatch(
            f"Wrong stats for {location}:\n"
            + "\n".join(f"  {p}" for p in problems)
            + f"\nstats: {stats_text}"
        )


def _compare(
    stats: Mapping[str, Any],
    rows: pa.Table,
    metadata: pq.FileMetaData,
    indexed: Sequence[Field],
    settings: StatsSettings,
) -> Iterator[str]:
    if stats.get("numRecords") != rows.num_rows:
        yield f"numRecords: written {stats.get('numRecords')!r}, rows say {rows.num_rows}"
    written = {
        name: dict(_flatten(stats.get(name) or {})) for name in ("minValues", "maxValues", "nullCount")
    }
    leaves = dict(_leaves(indexed, ()))
    for name, values in written.items():
        for path in values.keys() - leaves.keys():
            yield f"{name}.{'.'.join(path)}: written {values[path]!r} for a column Delta does not index"
    for path, field in leaves.items():
        column = _column(rows, path)
        expected_nulls = column.null_count if column is not None else rows.num_rows
        yield from _check(written["nullCount"], "nullCount", path, expected_nulls, _why_absent_nulls(field))
        if not has_bounds(field):
            for name in ("minValues", "maxValues"):
                if path in written[name]:
                    yield f"{name}.{'.'.join(path)}: written for a {field['type']} column, Delta keeps none"
            continue
        low, high, reason = _bounds(column, field, settings.string_prefix_length)
        reason = reason or _footer_lacks_bounds(metadata, path, field)
        yield from _check(written["minValues"], "minValues", path, low, reason, field)
        yield from _check(written["maxValues"], "maxValues", path, high, reason, field)


def _check(
    values: Mapping[Path, Any],
    name: str,
    path: Path,
    expected: Any,
    reason_absent: str | None,
    field: Field | None = None,
) -> Iterator[str]:
    label = f"{name}.{'.'.join(path)}"
    if path not in values:
        if expected is not None and reason_absent is None:
            yield f"{label}: missing, rows say {expected!r}"
        return
    if not _equal(values[path], expected, field):
        yield f"{label}: written {values[path]!r}, rows say {expected!r}"


def _equal(written: Any, expected: Any, field: Field | None) -> bool:
    if expected is None:
        return False
    if field is not None and field["type"] == "float":
        return bool(np.float32(float(written)) == np.float32(expected))
    if field is not None and field["type"] == "double":
        return isinstance(written, decimal.Decimal | int) and float(written) == expected
    if isinstance(expected, decimal.Decimal):
        # Exact: a decimal bound parsed as a Decimal, never through a binary float.
        return isinstance(written, decimal.Decimal | int) and decimal.Decimal(written) == expected
    if isinstance(expected, bool) or isinstance(written, bool):
        return False
    return type(written) is type(expected) and written == expected


def _why_absent_nulls(field: Field) -> str | None:
    data_type = field["type"]
    if isinstance(data_type, dict) and data_type.get("type") in ("array", "map"):
        return "a list's footer counts null elements, not null rows"
    return None


def _bounds(column: pa.ChunkedArray | None, field: Field, prefix: int) -> tuple[Any, Any, str | None]:
    """Delta's min and max over the rows (None: all NULL), or why a writer may leave them out."""
    if column is None or column.null_count == len(column):
        return None, None, None
    data_type = field["type"]
    if data_type in ("float", "double"):
        values = column.drop_null()
        nan = pc.any(pc.is_nan(values)).as_py()
        finite = values.filter(pc.invert(pc.is_nan(values)))
        low = pc.min(finite).as_py() if len(finite) else None
        high = pc.max(finite).as_py()
        if nan or (low is not None and math.isinf(low)) or math.isinf(high or 0.0):
            # Delta writes the max as the string "NaN" and infinities as strings: left out, both kept safe.
            return (None if low is None or math.isinf(low) else low), None, "NaN or infinite values"
        return low, high, None
    if data_type in ("timestamp", "timestamp_ntz"):
        # Nanoseconds (pyarrow's reading of INT96) down to microseconds, which Python's datetime holds.
        micros = pc.cast(column, pa.timestamp("us", column.type.tz), safe=False)
        return _timestamp(pc.min(micros).as_py()), _timestamp(pc.max(micros).as_py()), None
    low, high = pc.min(column).as_py(), pc.max(column).as_py()
    if data_type == "string":
        return low[:prefix], truncate_max(high, prefix), None
    if data_type == "date":
        return low.isoformat(), high.isoformat(), None
    return low, high, None


def _timestamp(value: datetime.datetime) -> str:
    """Delta's JSON form: milliseconds cut off (not rounded), UTC with a Z for a timestamp with time zone."""
    zone = ""
    if value.tzinfo is not None:
        value, zone = value.astimezone(datetime.UTC).replace(tzinfo=None), "Z"
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:{value.minute:02d}:"
        f"{value.second:02d}.{value.microsecond // 1000:03d}{zone}"
    )


def _footer_lacks_bounds(metadata: pq.FileMetaData, path: Path, field: Field) -> str | None:
    """Why the footer cannot give this column's bounds, if it cannot (checked on the raw footer)."""
    dotted = ".".join(path)
    indexes = [j for j in range(metadata.num_columns) if metadata.schema.column(j).path == dotted]
    if len(indexes) != 1:
        return "no single column chunk at this path"
    if field["type"] in ("float", "double") and not (metadata.created_by or "").startswith("parquet-mr"):
        return f"float bounds from {metadata.created_by!r}, which may leave NaN out"
    for rg in range(metadata.num_row_groups):
        chunk = metadata.row_group(rg).column(indexes[0])
        s = chunk.statistics
        all_null = s is not None and s.has_null_count and s.null_count == metadata.row_group(rg).num_rows
        # Strings are cut to fit the footer (delta/format/stats.footer_bound_bytes): never excused.
        if (s is None or not s.has_min_max) and not all_null and field["type"] != "string":
            return f"row group {rg} has values but no min/max in the footer ({chunk.physical_type})"
    return None


def _column(rows: pa.Table, path: Path) -> pa.ChunkedArray | None:
    """The column at ``path``, NULL wherever a parent struct is NULL (as Delta's ``c.isNull`` sees it)."""
    if path[0] not in rows.column_names:
        return None
    column = rows.column(path[0])
    for name in path[1:]:
        chunks = []
        for chunk in column.chunks:
            struct_type = chunk.type
            index = struct_type.get_field_index(name)
            chunks.append(chunk.flatten()[index])  # flatten() folds the parent's NULLs into the child
        column = pa.chunked_array(chunks, type=column.type.field(name).type)
    return column


def _leaves(fields: Sequence[Field], path: Path) -> Iterator[tuple[Path, Field]]:
    for field in fields:
        field_path = (*path, field["name"])
        if is_struct(field):
            yield from _leaves(field["type"]["fields"], field_path)
        else:
            yield field_path, field


def _flatten(tree: Mapping[str, Any], path: Path = ()) -> Iterator[tuple[Path, Any]]:
    for key, value in tree.items():
        if isinstance(value, Mapping):
            yield from _flatten(value, (*path, key))
        else:
            yield (*path, key), value


def _filesystem(table_uri: str) -> tuple[pafs.FileSystem, str]:
    if "://" in table_uri and not table_uri.startswith("file:"):
        # deltalake's client, with the environment's credentials: pyarrow's own Azure client would sign in
        # with Azure's default credential chain and abort the process when that finds none.
        return pafs.PyFileSystem(DeltaStorageHandler(table_uri.rstrip("/"))), ""
    if table_uri.startswith("file:"):
        filesystem, path = pafs.FileSystem.from_uri(table_uri)
        return filesystem, path.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(table_uri).rstrip("/")
