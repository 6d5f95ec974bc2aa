"""The stats our merges write, on real tables with struct, nested struct, array and map columns placed
before primitive ones (where positional footer lookup gave every later column a neighbour's stats).

Expected stats are literal JSON derived from Delta's StatisticsCollection: nested objects for struct
leaves, min/max for skipping-eligible types only, nullCount for every leaf, decimals as exact numbers.
Delta would also write nullCount for the array and map columns; this engine leaves it out (the footer
counts null elements, not null rows), which only keeps readers from skipping on it.
"""

from __future__ import annotations

import datetime
import decimal
import glob
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, Schema, write_deltalake
from pyarrow.fs import LocalFileSystem

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.format.stats import footer_stats
from airflow_provider_deltamerge.delta.format.stats_columns import (
    STRING_PREFIX_LENGTH_CONF,
    StatsSettings,
    indexed_columns,
)
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, parse_merge_sql, update
from tests.delta.helpers import craft_table
from tests.file_stats import FileStatsMismatch, check_file
from tests.oracle import sorted_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

S = pa.struct([("a", pa.int32()), ("b", pa.struct([("c", pa.string())]))])
SCHEMA = pa.schema(
    [
        ("region", pa.string()),
        ("id", pa.int64()),
        ("s", S),
        ("tags", pa.list_(pa.string())),
        ("attrs", pa.map_(pa.string(), pa.int32())),
        ("qty", pa.int32()),
        ("name", pa.string()),
        ("flag", pa.bool_()),
        ("price", pa.decimal128(10, 2)),
        ("day", pa.date32()),
    ]
)


def rows(*records: dict[str, Any]) -> pa.Table:
    return pa.Table.from_pylist([{"region": "eu", **r} for r in records], schema=SCHEMA)


D = decimal.Decimal
FIRST = rows(
    {
        "id": 1,
        "s": {"a": 5, "b": {"c": "kiwi"}},
        "tags": ["x", "y"],
        "attrs": [("k", 1)],
        "qty": 30,
        "name": "banana",
        "flag": True,
        "price": D("12.50"),
        "day": datetime.date(2024, 3, 1),
    },
    {"id": 2, "qty": 10},
    {
        "id": 3,
        "s": {"a": None, "b": {"c": "apple"}},
        "tags": [],
        "attrs": [],
        "qty": 20,
        "name": "cherry",
        "flag": False,
        "price": D("7.05"),
        "day": datetime.date(2024, 2, 29),
    },
)
FIRST_STATS = (
    '{"numRecords":3,'
    '"minValues":{"region":"eu","id":1,"s":{"a":5,"b":{"c":"apple"}},"qty":10,"name":"banana","price":7.05,'
    '"day":"2024-02-29"},'
    '"maxValues":{"region":"eu","id":3,"s":{"a":5,"b":{"c":"kiwi"}},"qty":30,"name":"cherry","price":12.50,'
    '"day":"2024-03-01"},'
    '"nullCount":{"region":0,"id":0,"s":{"a":2,"b":{"c":1}},"qty":0,"name":1,"flag":1,"price":1,"day":1}}'
)
SECOND = rows({"id": 4, "s": {"a": 7, "b": None}, "qty": 100}, {"id": 5, "qty": 200, "name": "date"})


def seeded_table(path: Path, configuration: dict[str, str] | None = None, **kwargs: Any) -> str:
    """A table of one row (id 0) written by delta-rs: merges of ids 1.. only insert, into new files."""
    write_deltalake(str(path), rows({"id": 0, "qty": 0}), configuration=configuration, **kwargs)
    return str(path)


def insert_merge(spark: SparkSession, target: str, source: pa.Table, extract: Path) -> None:
    pq.write_table(source, extract)
    spec = MergeSpec(
        target=target, source=PathSource(str(extract)), condition="t.id = s.id", clauses=(insert_all(),)
    )
    run_merge(spark, spec)


def added_stats(target: str, version: int | None = None) -> list[str]:
    """The stats strings of the add actions in one commit, exactly as the log holds them."""
    table = DeltaTable(target)
    number = table.version() if version is None else version
    lines = (Path(target) / "_delta_log" / f"{number:020d}.json").read_text().splitlines()
    return [json.loads(line)["add"]["stats"] for line in lines if '"add"' in line]


def test_stats_of_columns_after_nested_ones_are_their_own(spark: SparkSession, tmp_path: Path) -> None:
    # Given: a table whose primitive columns come after a struct, an array and a map
    target = seeded_table(tmp_path / "t")
    # When: a merge inserts three rows
    insert_merge(spark, target, FIRST, tmp_path / "first.parquet")
    # Then: one file, with the stats Delta writes for those rows
    assert added_stats(target) == [FIRST_STATS]


def test_readers_skip_files_correctly_on_the_stats(spark: SparkSession, tmp_path: Path) -> None:
    # Given: two merged files with distinct ranges of the columns after the nested ones
    target = seeded_table(tmp_path / "t")
    insert_merge(spark, target, FIRST, tmp_path / "first.parquet")
    insert_merge(spark, target, SECOND, tmp_path / "second.parquet")
    assert json.loads(added_stats(target)[0])["minValues"] == {
        "region": "eu",
        "id": 4,
        "s": {"a": 7, "b": {}},  # s.b.c is NULL in every row: no value, but the struct stays, as in Delta
        "qty": 100,
        "name": "date",
    }
    # When: delta-rs answers predicates on those columns, skipping files by their stats
    query = QueryBuilder().register("t", DeltaTable(target))

    def ids(where: str) -> list[int]:
        result = pa.table(query.execute(f"SELECT id FROM t WHERE {where} ORDER BY id").read_all())
        return [int(v) for v in result["id"].to_pylist()]

    # Then: the rows are those the predicates select, from every file that holds them
    assert ids("qty > 50") == [4, 5]
    assert ids("qty BETWEEN 5 AND 25") == [2, 3]
    assert ids("name = 'cherry'") == [3]
    assert ids("price < 10") == [3]
    assert ids("day = DATE '2024-02-29'") == [3]
    assert ids("s['a'] >= 6") == [4]
    assert ids("s['b']['c'] = 'apple'") == [3]
    # And: this engine's own pruning, on a column after the struct, reads only the file that can match
    pq.write_table(pa.table({"id": pa.array([4], pa.int64())}), tmp_path / "upd.parquet")
    spec = MergeSpec(
        target=target,
        source=PathSource(str(tmp_path / "upd.parquet")),
        condition="t.id = s.id AND t.qty > 50",
        clauses=(update({"qty": "t.qty + 1"}),),
    )
    metrics = run_merge(spark, spec).metrics
    assert metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 1
    assert metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert {r["id"]: r["qty"] for r in sorted_rows(target)} == {0: 0, 1: 30, 2: 10, 3: 20, 4: 101, 5: 200}


@pytest.mark.parametrize(
    ("configuration", "expected"),
    [
        # Six leaves, counted after the partition column: id, s.a, s.b.c, tags, attrs, qty (not name).
        (
            {"delta.dataSkippingNumIndexedCols": "6"},
            '{"numRecords":3,"minValues":{"id":1,"s":{"a":5,"b":{"c":"apple"}},"qty":10},'
            '"maxValues":{"id":3,"s":{"a":5,"b":{"c":"kiwi"}},"qty":30},'
            '"nullCount":{"id":0,"s":{"a":2,"b":{"c":1}},"qty":0}}',
        ),
        # Named columns replace the count; the struct's leaves in schema order.
        (
            {"delta.dataSkippingStatsColumns": "qty,s.b", "delta.dataSkippingNumIndexedCols": "1"},
            '{"numRecords":3,"minValues":{"s":{"b":{"c":"apple"}},"qty":10},'
            '"maxValues":{"s":{"b":{"c":"kiwi"}},"qty":30},"nullCount":{"s":{"b":{"c":1}},"qty":0}}',
        ),
    ],
)
def test_table_properties_choose_the_indexed_columns(
    spark: SparkSession, tmp_path: Path, configuration: dict[str, str], expected: str
) -> None:
    # Given: a partitioned table with stats settings in its configuration
    target = seeded_table(tmp_path / "t", configuration, partition_by=["region"])
    # When: a merge inserts the three rows
    insert_merge(spark, target, FIRST, tmp_path / "first.parquet")
    # Then: stats for exactly the columns the settings name, as Delta picks them
    assert [json.loads(s) for s in added_stats(target)] == [json.loads(expected)]


def test_string_prefix_length_from_table_then_session(spark: SparkSession, tmp_path: Path) -> None:
    # Given: a table (as Delta makes it: delta-rs refuses this property) whose stats cut strings at 3
    fields = json.loads(Schema.from_arrow(SCHEMA).to_json())["fields"]
    configuration = {"delta.dataSkippingStatsColumns": "name", "delta.dataSkippingStringPrefixLength": "3"}
    target = craft_table(tmp_path / "t", configuration=configuration, fields=fields)
    # When: a merge inserts rows, with a session prefix of 5 that the table property overrides
    spark.conf.set(STRING_PREFIX_LENGTH_CONF, "5")
    try:
        insert_merge(spark, target, FIRST, tmp_path / "first.parquet")
    finally:
        spark.conf.unset(STRING_PREFIX_LENGTH_CONF)
    # Then: the min is cut, the max is cut with its tie-breaker ('r' < U+007F)
    assert added_stats(target) == [
        '{"numRecords":3,"minValues":{"name":"ban"},"maxValues":{"name":"che\x7f"},"nullCount":{"name":1}}'
    ]


def test_string_prefix_length_from_the_session(spark: SparkSession, tmp_path: Path) -> None:
    target = seeded_table(tmp_path / "t", {"delta.dataSkippingStatsColumns": "name"})
    spark.conf.set(STRING_PREFIX_LENGTH_CONF, "4")
    try:
        insert_merge(spark, target, FIRST, tmp_path / "first.parquet")
    finally:
        spark.conf.unset(STRING_PREFIX_LENGTH_CONF)
    assert added_stats(target) == [
        '{"numRecords":3,"minValues":{"name":"bana"},"maxValues":{"name":"cher\x7f"},"nullCount":{"name":1}}'
    ]


def test_a_string_past_the_footers_limit_gets_deltas_bounds_and_null_count(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Given: a table of names, two copies; a source that updates a row to a 1 MB name (past the 4 KiB Parquet
    # keeps in a footer), inserts a NULL name and a long name of two-byte characters
    table = pa.table({"id": pa.array([1], pa.int64()), "name": ["apple"]})
    for copy in ("delta", "ours"):
        write_deltalake(str(tmp_path / copy), table)
    names = ["b" + "x" * 1_000_000, None, "é" * 300 + "z"]
    source = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": names})
    pq.write_table(source, tmp_path / "source.parquet")
    statement = (
        "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    # When: Delta's MERGE merges one copy, a user's merge of the same statement the other
    source_path = tmp_path / "source.parquet"
    spark.sql(statement.format(target=tmp_path / "delta", source=source_path)).collect()
    run_merge(spark, parse_merge_sql(statement.format(target=tmp_path / "ours", source=source_path)))
    # Then: the new files' stats say what Delta's say: the 32-character bounds (the max with its
    # tie-breaker) and the NULL counted
    bounds = {copy: _name_bounds(added_stats(str(tmp_path / copy))) for copy in ("delta", "ours")}
    assert (
        bounds["ours"]
        == bounds["delta"]
        == {
            "minValues": "b" + "x" * 31,
            "maxValues": "é" * 32 + "\U0010ffff",
            "nullCount": 1,
            "numRecords": 3,
        }
    )


def _name_bounds(stats: list[str]) -> dict[str, Any]:
    """The ``name`` column's bounds and null count over the files of one commit."""
    parsed = [json.loads(s) for s in stats]
    return {
        "minValues": min(p["minValues"]["name"] for p in parsed if "name" in p.get("minValues", {})),
        "maxValues": max(p["maxValues"]["name"] for p in parsed if "name" in p.get("maxValues", {})),
        "nullCount": sum(p["nullCount"]["name"] for p in parsed),
        "numRecords": sum(p["numRecords"] for p in parsed),
    }


def spark_file(spark: SparkSession, folder: Path, sql: str) -> pq.FileMetaData:
    """One parquet file written by Spark (the engine's writer) from ``sql``, and its footer."""
    spark.sql(sql).coalesce(1).write.parquet(str(folder))
    (path,) = glob.glob(f"{folder}/*.parquet")
    return pq.read_metadata(path)


def test_footer_values_take_delta_json_forms(spark: SparkSession, tmp_path: Path) -> None:
    # Given: a file Spark wrote with the types whose JSON form is delicate
    sql = """
        SELECT * FROM VALUES
          (TIMESTAMP_NTZ'2024-01-01 00:00:00.123999', TIMESTAMP'2024-01-01 00:00:00.5', CAST(0.1 AS FLOAT),
           CAST(1.5 AS DOUBLE), CAST(0 AS DECIMAL(18,8)), CAST('12345678901234567890.12' AS DECIMAL(30,2)),
           X'01', true),
          (TIMESTAMP_NTZ'1999-12-31 23:59:59.999999', NULL, CAST(2.5 AS FLOAT), CAST('NaN' AS DOUBLE),
           CAST(0.00000001 AS DECIMAL(18,8)), CAST('-1.5' AS DECIMAL(30,2)), NULL, NULL)
          AS v(ntz, ts, f, d, small, big, bin, flag)
    """
    metadata = spark_file(spark, tmp_path / "f", sql)
    schema = json.loads(spark.sql(sql).schema.json())
    stats = footer_stats(metadata, indexed_columns(schema, [], StatsSettings()))
    # Then: timestamps cut (not rounded) to milliseconds; INT96 timestamps (Spark's default) have no bounds
    # in the footer, so only their nullCount; a float as a float; NaN leaves the double's max out; decimals
    # exact, in Java's BigDecimal text; boolean and binary only counted
    assert stats == (
        '{"numRecords":2,'
        '"minValues":{"ntz":"1999-12-31T23:59:59.999","f":0.1,"d":1.5,"small":0E-8,'
        '"big":-1.50},'
        '"maxValues":{"ntz":"2024-01-01T00:00:00.123","f":2.5,"small":1E-8,'
        '"big":12345678901234567890.12},'
        '"nullCount":{"ntz":0,"ts":1,"f":0,"d":0,"small":0,"big":0,"bin":1,"flag":1}}'
    )


def test_the_check_names_file_column_and_both_values(tmp_path: Path) -> None:
    # Given: a real file and stats that give qty its neighbour's values (what positional lookup did)
    pq.write_table(FIRST, tmp_path / "f.parquet")
    target = seeded_table(tmp_path / "t")
    indexed = indexed_columns(json.loads(DeltaTable(target).schema().to_json()), [], StatsSettings())
    wrong = json.loads(FIRST_STATS)
    wrong["minValues"]["qty"] = 5
    del wrong["maxValues"]["name"]
    with pytest.raises(FileStatsMismatch) as raised:
        check_file(
            LocalFileSystem(), str(tmp_path / "f.parquet"), json.dumps(wrong), indexed, StatsSettings()
        )
    message = str(raised.value)
    assert str(tmp_path / "f.parquet") in message
    assert "minValues.qty: written 5, rows say 10" in message
    assert "maxValues.name: missing, rows say 'cherry'" in message
    # And: the right stats pass
    check_file(LocalFileSystem(), str(tmp_path / "f.parquet"), FIRST_STATS, indexed, StatsSettings())


def test_subprocesses_of_the_tests_check_their_commits_too() -> None:
    # spark-submit jobs and Airflow tasks run merges in other processes, which inherit PYTHONPATH from here.
    code = (
        "from airflow_provider_deltamerge.delta.commit import transaction as commit;"
        " print(commit._try_commit.__qualname__)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "_CheckedCommitLoader.patch.<locals>.checked"
