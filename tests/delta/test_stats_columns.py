"""Which columns get stats, and how string bounds are cut: Delta's rules, as literal expected values.

The expected values are read off Delta's source (StatisticsCollection.scala: getIndexedColumns,
truncateSchema, filterSchema, truncateMaxStringAgg; DataSkippingReader.scala: SkippingEligibleDataType).
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_deltamerge.delta.format.stats import truncate_max, truncate_min
from airflow_provider_deltamerge.delta.format.stats_columns import (
    StatsSettings,
    has_bounds,
    indexed_columns,
    parse_column_list,
)


def field(name: str, data_type: Any) -> dict[str, Any]:
    return {"name": name, "type": data_type, "nullable": True, "metadata": {}}


def struct(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


SCHEMA = struct(
    field("region", "string"),
    field("id", "long"),
    field("s", struct(field("a", "integer"), field("b", struct(field("c", "string"))))),
    field("tags", {"type": "array", "elementType": "string", "containsNull": True}),
    field("attrs", {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": True}),
    field("qty", "integer"),
    field("name", "string"),
)


def leaf_paths(fields: list[dict[str, Any]], prefix: str = "") -> list[str]:
    paths: list[str] = []
    for f in fields:
        if isinstance(f["type"], dict) and f["type"]["type"] == "struct":
            paths += leaf_paths(f["type"]["fields"], f"{prefix}{f['name']}.")
        else:
            paths.append(prefix + f["name"])
    return paths


@pytest.mark.parametrize(
    ("configuration", "expected"),
    [
        # The default, 32: every leaf of this small schema.
        ({}, ["id", "s.a", "s.b.c", "tags", "attrs", "qty", "name"]),
        # Leaves are counted, structs flattened, an array or a map is one leaf; partition columns not at all.
        ({"delta.dataSkippingNumIndexedCols": "6"}, ["id", "s.a", "s.b.c", "tags", "attrs", "qty"]),
        ({"delta.dataSkippingNumIndexedCols": "2"}, ["id", "s.a"]),
        ({"delta.dataSkippingNumIndexedCols": "0"}, []),
        ({"delta.dataSkippingNumIndexedCols": "-1"}, ["id", "s.a", "s.b.c", "tags", "attrs", "qty", "name"]),
        # Named columns replace the count; a struct's name means all its leaves; schema order, any case.
        (
            {"delta.dataSkippingStatsColumns": "QTY, s", "delta.dataSkippingNumIndexedCols": "1"},
            ["s.a", "s.b.c", "qty"],
        ),
        ({"delta.dataSkippingStatsColumns": "s.b.c,name"}, ["s.b.c", "name"]),
        # A path into a non-struct and an unknown column name nothing; a partition column is never indexed.
        ({"delta.dataSkippingStatsColumns": "qty.x, nope, region"}, []),
    ],
)
def test_indexed_columns_follow_delta(configuration: dict[str, str], expected: list[str]) -> None:
    settings = StatsSettings.of(configuration)
    assert leaf_paths(indexed_columns(SCHEMA, ["region"], settings)) == expected


def test_a_struct_cut_by_the_count_keeps_its_first_leaves_only() -> None:
    # Given: three leaves allowed, the third inside a nested struct
    indexed = indexed_columns(SCHEMA, ["region"], StatsSettings.of({"delta.dataSkippingNumIndexedCols": "3"}))
    # Then: the struct is kept with the leaves that fit, as Delta's truncateSchema keeps it
    assert indexed[1]["type"]["fields"][1]["type"]["fields"] == [field("c", "string")]


def test_column_list_quoting() -> None:
    assert parse_column_list(" a ,`b.c`.d, `x``y`") == [["a"], ["b.c", "d"], ["x`y"]]


@pytest.mark.parametrize(
    ("data_type", "bounded"),
    [
        ("byte", True),
        ("short", True),
        ("integer", True),
        ("long", True),
        ("float", True),
        ("double", True),
        ("decimal(38,18)", True),
        ("date", True),
        ("timestamp", True),
        ("timestamp_ntz", True),
        ("string", True),
        ("boolean", False),
        ("binary", False),
        ("variant", False),
        ({"type": "array", "elementType": "long", "containsNull": True}, False),
    ],
)
def test_min_max_only_for_delta_skipping_eligible_types(data_type: Any, bounded: bool) -> None:
    assert has_bounds(field("c", data_type)) is bounded


def test_collated_strings_get_no_bounds() -> None:
    # Their order is the collation's, not the byte order of the parquet footer.
    collated = {**field("c", "string"), "metadata": {"__COLLATIONS": {"c": "spark.UTF8_LCASE"}}}
    assert not has_bounds(collated)


@pytest.mark.parametrize(
    ("value", "prefix", "low", "high"),
    [
        ("abcdef", 6, "abcdef", "abcdef"),
        # The next character is below U+007F: the ASCII tie-breaker.
        ("abcdef", 3, "abc", "abc\x7f"),
        # The next character is not: U+10FFFF.
        ("abcé", 3, "abc", "abc\U0010ffff"),
        # A surrogate pair is never split (Java counts UTF-16 units; the min counts code points).
        ("a\U0001f600bc", 2, "a\U0001f600", "a\U0001f600\x7f"),
        # U+10FFFF in the value cannot be exceeded: it is kept and the cut moves on.
        ("ab\U0010ffffcd", 2, "ab", "ab\U0010ffff\x7f"),
        # No bound within twice the prefix: no max at all.
        ("a" + "\U0010ffff" * 3 + "b", 1, "a", None),
        ("abc", 0, "", None),
    ],
)
def test_string_bounds_cut_as_delta_cuts_them(value: str, prefix: int, low: str, high: str | None) -> None:
    assert truncate_min(value, prefix) == low
    assert truncate_max(value, prefix) == high
