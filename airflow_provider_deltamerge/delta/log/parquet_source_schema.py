"""The schema Spark gives a local parquet path source: one file's footer and the ``key=value`` directories.

Read with ``pyarrow.parquet`` alone: ``pyarrow.dataset``'s discovery would do the same but imports pandas on
the way, a second or more of the task's start on a busy worker (issue 38). Spark itself reads one footer
(``spark.sql.parquet.mergeSchema`` is off by default) and infers partition columns' types from their
values, which ``partition_column_type`` follows (Spark's ``PartitioningUtils.inferPartitionColumnValue``).
"""

from __future__ import annotations

import datetime
import json
import os
import re
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
from deltalake import Schema

# Hive's directory name for a null partition value.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Hadoop and Spark skip files and directories whose names start so (_SUCCESS, .crc files, _temporary/).
_HIDDEN = (".", "_")
# What Java's Integer/Long.parseInt, BigDecimal and Double.parseDouble read (Python reads more: "1_0", "inf").
_INTEGRAL = re.compile(r"[+-]?[0-9]+")
_BIG_DECIMAL = re.compile(r"[+-]?(?P<digits>[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE](?P<exponent>[+-]?[0-9]+))?")
_DOUBLE = re.compile(r"\s*[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)\s*")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# Spark's widest decimal, and the decimal an integer or a long widens to beside one.
_MAX_PRECISION = 38
_INTEGRAL_PRECISION = {"integer": 10, "long": 20}


def parquet_source_schema(local: str) -> dict[str, Any] | None:
    """The schema Spark reads from ``local``: the first data file's footer, then the partition columns.

    Returns:
        The schema in Delta's JSON form, or ``None`` when ``local`` holds no data file (Spark then says it
        cannot infer a schema, in its own words, when the job runs).

    Raises:
        FileNotFoundError: the file went away while it was read (the caller checks that ``local`` exists).
        pyarrow.ArrowInvalid: the first data file is not a complete parquet file.
    """
    if os.path.isfile(local):
        return _delta_schema(pq.read_schema(local))
    files, partition_values = _data_files(local)
    if not files:
        return None
    schema = _delta_schema(pq.read_schema(files[0]))
    partitions = {
        name.lower(): (name, partition_column_type(values)) for name, values in partition_values.items()
    }
    # A column both in the files and in the directories keeps the files' place and takes the directories'
    # type; the other partition columns follow the files' columns (Spark's mergeDataAndPartitionSchema).
    for field in schema["fields"]:
        if field["name"].lower() in partitions:
            field.update(type=partitions.pop(field["name"].lower())[1], nullable=True, metadata={})
    schema["fields"].extend(
        {"name": name, "type": kind, "nullable": True, "metadata": {}} for name, kind in partitions.values()
    )
    return schema


def _delta_schema(footer: Any) -> dict[str, Any]:
    return dict(json.loads(Schema.from_arrow(footer).to_json()))


def _data_files(root: str) -> tuple[list[str], dict[str, list[str]]]:
    """The data files below ``root`` in path order, and each partition key's values (in first-seen order)."""
    files: list[str] = []
    values: dict[str, list[str]] = {}
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(_HIDDEN))
        data = sorted(n for n in names if not n.startswith(_HIDDEN))
        if not data:
            continue
        files.extend(os.path.join(directory, n) for n in data)
        for part in os.path.relpath(directory, root).split(os.sep):
            key, equals, value = part.partition("=")
            if equals:
                values.setdefault(unquote(key), []).append(unquote(value))
    return files, values


def partition_column_type(values: list[str]) -> str:
    """Delta's name of the type Spark infers for a partition column with these directory values."""
    widest: str | None = None
    for value in values:
        kind = _value_type(value)
        widest = kind if widest is None else _wider(widest, kind)
    # NullType: every directory says null.
    return "void" if widest in (None, "void") else widest


def _wider(a: str, b: str) -> str:
    """Spark's ``findWiderTypeForPartitionColumn``: no precision lost between double and long or decimal."""
    if a == b or b == "void":
        return a
    if a == "void":
        return b
    pair = {a, b}
    if pair == {"integer", "long"}:
        return "long"
    if pair == {"integer", "double"}:
        return "double"
    if pair == {"date", "timestamp"}:
        return "timestamp"
    decimals = [_precision(t) for t in pair if t.startswith("decimal") or t in _INTEGRAL_PRECISION]
    if len(decimals) == 2 and any(t.startswith("decimal") for t in pair):
        return f"decimal({min(max(decimals), _MAX_PRECISION)},0)"
    return "string"


def _precision(kind: str) -> int:
    return _INTEGRAL_PRECISION.get(kind) or int(kind[len("decimal(") :].split(",")[0])


def _value_type(raw: str) -> str:
    """Spark's ``inferPartitionColumnValue``: integer, long, decimal, double, timestamp, date, else string."""
    if raw == NULL_PARTITION:
        return "void"
    if _INTEGRAL.fullmatch(raw):
        number = int(raw)
        if -(2**31) <= number < 2**31:
            return "integer"
        if -(2**63) <= number < 2**63:
            return "long"
    decimal = _BIG_DECIMAL.fullmatch(raw)
    if decimal:
        # A BigDecimal of no fractional digits (its scale <= 0) gives decimal(integral digits, 0).
        integral, _, fraction = decimal["digits"].partition(".")
        scale = len(fraction) - int(decimal["exponent"] or 0)
        precision = len((integral + fraction).lstrip("0") or "0") - min(scale, 0)
        if scale <= 0 and precision <= _MAX_PRECISION:
            return f"decimal({precision},0)"
    if _DOUBLE.fullmatch(raw):
        return "double"
    if _TIMESTAMP.fullmatch(raw) and _valid(datetime.datetime.fromisoformat, raw):
        return "timestamp"
    if _DATE.fullmatch(raw) and _valid(datetime.date.fromisoformat, raw):
        return "date"
    return "string"


def _valid(parse: Any, raw: str) -> bool:
    try:
        parse(raw)
    except ValueError:
        return False
    return True
