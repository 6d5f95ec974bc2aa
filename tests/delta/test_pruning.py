"""File skipping: target-only conjuncts (a), source partition values (b), source key ranges (c); the
skipping metrics tell the truth and the merged rows match deltalake's merge."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import Row
from pyspark.sql.types import DateType, LongType, StructField, StructType

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.plan import pruning
from airflow_provider_deltamerge.engine.source import held as held_source
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, delete_by_source, insert_all, update_all
from bench.spark_work import last_execution_id
from tests.engine.conftest import ENGINE_SETTINGS, executed_plans
from tests.oracle import merge_with_deltalake, sorted_rows

DAYS = [datetime.date(2024, 1, d) for d in (1, 2, 3, 4)]


def events(day: datetime.date, ids: range) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "day": pa.array([day] * len(ids), pa.date32()),
            "qty": pa.array([1] * len(ids), pa.int32()),
        }
    )


def daily_table(path: Path) -> str:
    """Four days, each day's ids in their own range, written in two appends: 8 files."""
    for n, day in enumerate(DAYS):
        for half in (0, 1):
            start = n * 100 + half * 50
            write_deltalake(
                str(path), events(day, range(start, start + 5)), partition_by=["day"], mode="append"
            )
    return str(path)


def write_source(tmp_path: Path, data: pa.Table) -> str:
    path = tmp_path / "source.parquet"
    pq.write_table(data, path)
    return str(path)


def files_of(table: str, day: datetime.date) -> list[dict[str, object]]:
    adds = pa.table(DeltaTable(table).get_add_actions(flatten=True)).to_pylist()
    return [a for a in adds if a["partition.day"] == day]


def test_one_day_backfill_reads_only_that_days_files(spark, tmp_path):
    # Given: a date-partitioned table and a source for one day; no literal in the condition
    ours, oracle = daily_table(tmp_path / "ours"), daily_table(tmp_path / "oracle")
    source = events(DAYS[2], range(200, 203)).set_column(2, "qty", pa.array([9, 9, 9], pa.int32()))
    spec = MergeSpec(
        target=ours,
        source=PathSource(write_source(tmp_path, source)),
        condition="t.id = s.id AND t.day = s.day",
        clauses=(update_all(), insert_all()),
    )
    # When
    result = run_merge(spark, spec)
    # Then: only day 3's file holding ids 200-204 was a candidate: the day by (b), the file by (c)
    day_files = files_of(oracle, DAYS[2])
    read = [a for a in day_files if a["min.id"] == 200]
    assert result.metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 8
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == len(read) == 1
    assert result.metrics[m.NUM_TARGET_BYTES_AFTER_SKIPPING] == read[0]["size_bytes"]
    assert result.metrics[m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING] == 1
    assert result.metrics[m.NUM_TARGET_FILES_REMOVED] == 1
    merge_with_deltalake(oracle, spec, source)
    assert sorted_rows(ours) == sorted_rows(oracle)


def test_one_day_backfill_by_partition_values_alone(spark, tmp_path):
    # Source keys within every file's id range: (b) alone picks the day's files.
    target = daily_table(tmp_path / "t")
    source = events(DAYS[1], range(0, 1000, 50))  # one id in every file's range
    day_files = len(files_of(target, DAYS[1]))
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path, source)),
        condition="t.id = s.id AND t.day = s.day",
        clauses=(update_all(), insert_all()),
    )
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == day_files == 2
    assert result.metrics[m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING] == 1


def test_source_key_range_skips_files_of_an_unpartitioned_table(spark, tmp_path):
    target = str(tmp_path / "t")
    for start in (0, 100, 200):
        write_deltalake(target, events(DAYS[0], range(start, start + 10)), mode="append")
    source = events(DAYS[0], range(105, 107))
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path, source)),
        condition="t.id = s.id",
        clauses=(update_all(), insert_all()),
    )
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 1
    assert result.metrics[m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING] == 0
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 2


@pytest.mark.parametrize(
    ("condition", "expected_files"),
    [
        ("t.id = s.id AND t.day = DATE '2024-01-02'", 2),
        ("t.id = s.id AND t.day >= '2024-01-03'", 8),  # string vs date: not provably monotone, no skip
        ("t.id = s.id AND t.day IN (DATE '2024-01-01', DATE '2024-01-04') AND t.qty IS NOT NULL", 4),
        ("t.id = s.id AND t.day BETWEEN DATE '2024-01-02' AND DATE '2024-01-03'", 4),
    ],
)
def test_target_only_conjuncts_skip_by_partition_values(spark, tmp_path, condition, expected_files):
    target = daily_table(tmp_path / "t")
    source = pa.table({"id": pa.array([1000], pa.int64()), "day": pa.array([DAYS[0]]), "qty": pa.array([1])})
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path, source)),
        condition=condition.replace("t.id = s.id", "t.id >= s.id - 1000"),  # no key range to skip by
        clauses=(update_all(),),
    )
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == expected_files


def test_not_matched_by_source_reads_every_file(spark, tmp_path):
    target = daily_table(tmp_path / "t")
    source = events(DAYS[0], range(0, 5))
    spec = MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path, source)),
        condition="t.id = s.id AND t.day = s.day",
        clauses=(update_all(), delete_by_source(condition="t.day = DATE '2024-01-01'")),
    )
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 8
    assert result.metrics[m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING] == 4


def three_files(path: Path, keys: pa.Array, *, configuration: dict[str, str] | None = None) -> str:
    """A table of three files, the ``keys`` split in thirds in order: (id, qty), one append each."""
    third = len(keys) // 3
    for n in range(3):
        data = pa.table({"id": keys[n * third : (n + 1) * third], "qty": pa.array([1] * third, pa.int32())})
        write_deltalake(str(path), data, mode="append", configuration=configuration)
    return str(path)


def upsert_of(target: str, tmp_path: Path, source: pa.Table) -> MergeSpec:
    return MergeSpec(
        target=target,
        source=PathSource(write_source(tmp_path, source)),
        condition="t.id = s.id",
        clauses=(update_all(), insert_all()),
    )


def sizes(table: str, kept: list[int]) -> int:
    adds = pa.table(DeltaTable(table).get_add_actions(flatten=True)).to_pylist()
    return sum(a["size_bytes"] for a in sorted(adds, key=lambda a: a["min.id"]) if a["min.id"] in kept)


def test_each_file_is_tested_against_the_source_keys_not_their_range(spark, tmp_path):
    # Given: files holding ids 0-9, 100-109 and 200-209; source ids 5 and 205 (and a new one, 1000)
    ids = pa.array([*range(10), *range(100, 110), *range(200, 210)], pa.int64())
    ours, oracle = three_files(tmp_path / "ours", ids), three_files(tmp_path / "oracle", ids)
    source = pa.table({"id": pa.array([5, 205, 1000], pa.int64()), "qty": pa.array([7, 7, 7], pa.int32())})
    spec = upsert_of(ours, tmp_path, source)
    # When
    result = run_merge(spark, spec)
    # Then: the middle file, inside the keys' global range but holding none of them, is skipped
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 2
    assert result.metrics[m.NUM_TARGET_BYTES_AFTER_SKIPPING] == sizes(oracle, [0, 200])  # not merged yet
    assert result.metrics[m.NUM_TARGET_FILES_REMOVED] == 2
    expected = merge_with_deltalake(oracle, spec, source)
    assert sorted_rows(ours) == sorted_rows(oracle)
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == expected["num_target_rows_updated"] == 2


@pytest.mark.parametrize("tuples_scanned", [10_000, 0], ids=["scanned", "scan-budget-spent"])
def test_a_file_is_read_only_when_it_may_hold_all_parts_of_one_source_key(
    spark, tmp_path, monkeypatch, tuples_scanned
):
    # Given: file A holds tickets 1-10 with items 1-5, file B tickets 11-20 with items 6-10; the source's
    # keys (5, 8) and (15, 2) each have one part in A's bounds and one in B's, all parts of none in either
    monkeypatch.setattr(pruning, "MAX_TUPLES_SCANNED", tuples_scanned)
    target = str(tmp_path / "t")
    for tickets, items in ((range(1, 11), [1, 2, 3, 4, 5] * 2), (range(11, 21), [6, 7, 8, 9, 10] * 2)):
        data = {"ticket": pa.array(tickets, pa.int32()), "item": pa.array(items, pa.int32())}
        write_deltalake(target, pa.table({**data, "qty": pa.array([1] * 10, pa.int32())}), mode="append")
    source = pa.table(
        {
            "ticket": pa.array([5, 15], pa.int32()),
            "item": pa.array([8, 2], pa.int32()),
            "qty": pa.array([7, 7], pa.int32()),
        }
    )
    spec = MergeSpec(
        target,
        PathSource(write_source(tmp_path, source)),
        "t.ticket = s.ticket AND t.item = s.item",
        (update_all(), insert_all()),
    )
    # When
    result = run_merge(spark, spec)
    # Then: neither file is read (each key column alone would keep both); with no scan budget both are
    # kept, never wrongly skipped; the keys are inserted either way
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == (2 if tuples_scanned == 0 else 0)
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 2
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 0


@pytest.mark.parametrize("held", [True, False], ids=["held-source", "checkpointed-source"])
def test_a_counted_source_sends_its_key_tuples_as_they_are_and_the_driver_drops_the_repeats(
    spark, tmp_path, monkeypatch, held
):
    # Given: file A holds tickets 1-10, file B tickets 11-20; a parquet source (materialized, so counted:
    # held on the driver, or over HELD_ROWS and checkpointed) whose new key (25, 3) comes twice and whose
    # key (13, 8) matches B's row once
    if not held:
        monkeypatch.setattr(held_source, "HELD_ROWS", 2)
    target = str(tmp_path / "t")
    for tickets, items in ((range(1, 11), [1, 2, 3, 4, 5] * 2), (range(11, 21), [6, 7, 8, 9, 10] * 2)):
        data = {"ticket": pa.array(tickets, pa.int32()), "item": pa.array(items, pa.int32())}
        write_deltalake(target, pa.table({**data, "qty": pa.array([1] * 10, pa.int32())}), mode="append")
    source = pa.table(
        {
            "ticket": pa.array([25, 25, 13], pa.int32()),
            "item": pa.array([3, 3, 8], pa.int32()),
            "qty": pa.array([7, 8, 9], pa.int32()),
        }
    )
    spec = MergeSpec(
        target,
        PathSource(write_source(tmp_path, source)),
        "t.ticket = s.ticket AND t.item = s.item",
        (update_all(), insert_all()),
    )
    since = last_execution_id(spark)
    # When
    result = run_merge(spark, spec)
    # Then: the key tuples came in one scan with no shuffle (no distinct in Spark), or with no Spark job at
    # all from where the source is held; only B is read, both rows of the new key are inserted and B's row
    # is updated
    collections = [plan for plan in executed_plans(spark, since) if "key_0" in plan and "key_1" in plan]
    if held:
        assert not collections, collections
    else:
        assert collections and all("Exchange" not in plan for plan in collections), collections
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 1
    assert (result.metrics[m.NUM_TARGET_ROWS_INSERTED], result.metrics[m.NUM_TARGET_ROWS_UPDATED]) == (2, 1)
    rows = sorted((r["ticket"], r["item"], r["qty"]) for r in sorted_rows(target))
    assert rows.count((25, 3, 7)) == rows.count((25, 3, 8)) == 1 and (13, 8, 9) in rows and len(rows) == 22


def test_more_source_keys_than_the_limit_fall_back_to_their_range(spark, tmp_path, monkeypatch):
    ids = pa.array([*range(10), *range(100, 110), *range(200, 210)], pa.int64())
    target = three_files(tmp_path / "t", ids)
    source = pa.table({"id": pa.array([5, 205], pa.int64()), "qty": pa.array([7, 7], pa.int32())})
    monkeypatch.setattr(pruning, "MAX_SOURCE_KEYS", 1)
    result = run_merge(spark, upsert_of(target, tmp_path, source))
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 3
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 2


def test_keys_of_a_wider_integer_type_compare_as_the_join_does(spark, tmp_path):
    # An int target key against bigint source keys, one beyond the int range: widened, not wrapped.
    ids = pa.array([*range(10), *range(100, 110), *range(200, 210)], pa.int32())
    target = three_files(tmp_path / "t", ids)
    source = pa.table({"id": pa.array([105, 2**32 + 5], pa.int64()), "qty": pa.array([7, 7], pa.int32())})
    spec = dataclasses.replace(upsert_of(target, tmp_path, source), clauses=(update_all(),))
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 1


def test_decimal_keys_against_double_source_keys_prune_as_spark_compares(spark, tmp_path):
    # Spark compares decimal 0.10 and double 0.1 as doubles (equal); exactly, they differ. The file must stay.
    keys = [decimal.Decimal(f"{n}.10") for n in (0, 1, 2)]
    target = three_files(tmp_path / "t", pa.array(keys, pa.decimal128(10, 2)))
    source = pa.table({"id": pa.array([0.1], pa.float64()), "qty": pa.array([7], pa.int32())})
    result = run_merge(spark, upsert_of(target, tmp_path, source))
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 0


def test_a_file_without_stats_is_kept(spark, tmp_path):
    ids = pa.array([*range(10), *range(100, 110), *range(200, 210)], pa.int64())
    target = three_files(tmp_path / "t", ids, configuration={"delta.dataSkippingNumIndexedCols": "0"})
    source = pa.table({"id": pa.array([105], pa.int64()), "qty": pa.array([7], pa.int32())})
    result = run_merge(spark, upsert_of(target, tmp_path, source))
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 3
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 1


def test_a_truncated_string_max_is_no_bound(spark, tmp_path):
    # Given: string keys sharing a 40-character prefix; Delta (not delta-rs) truncates stats to 32
    # characters, so the log's max of the first file is made a 32-character prefix, below its real keys
    prefix = "p" * 40
    keys = pa.array([f"{prefix}{c}" for c in "abcdefghi"])
    ours, oracle = three_files(tmp_path / "ours", keys), three_files(tmp_path / "oracle", keys)
    _truncate_max(Path(ours), "id", STRING_PREFIX)
    source = pa.table({"id": pa.array([f"{prefix}b"]), "qty": pa.array([7], pa.int32())})
    spec = upsert_of(ours, tmp_path, source)
    # When
    result = run_merge(spark, spec)
    # Then: the first file is read (its max proves nothing), the others are skipped by their min
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    merge_with_deltalake(oracle, spec, source)
    assert sorted_rows(ours) == sorted_rows(oracle)


STRING_PREFIX = pruning.STRING_PREFIX_LENGTH


def _truncate_max(table: Path, column: str, length: int) -> None:
    """Cut every string max of ``column`` in the log's stats to ``length`` characters, as Delta writes."""
    for commit in (table / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        for action in actions:
            if "add" in action and action["add"].get("stats"):
                stats = json.loads(action["add"]["stats"])
                stats["maxValues"][column] = stats["maxValues"][column][:length]
                action["add"]["stats"] = json.dumps(stats)
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))


@pytest.mark.parametrize("literals", [True, False], ids=["values-as-literals", "values-joined"])
def test_a_days_source_values_and_key_bounds_select_its_files_without_a_spark_job(
    spark, tmp_path, monkeypatch, literals
):
    # Given: the daily table's filter for a source of day 3 with ids 200-202: (b) the day's value, (c) the
    # ids' bounds; with literals off, the values and bounds go to Spark as tables, as wider types do
    target = daily_table(tmp_path / "t")
    snapshot = read_snapshot(target)
    if not literals:
        monkeypatch.setattr(pruning, "_MAX_LITERAL_VALUES", 0)
        monkeypatch.setattr(pruning, "exact_in_python", lambda data_type: False)
    schema = StructType.fromJson(snapshot.schema)
    names = schema.names
    file_filter = pruning.FileFilter(
        schema,
        snapshot.partition_columns,
        range_tests=((names.index("id"), "0"),),
        source_bounds=(
            Row(low_0=200, high_0=202),
            StructType([StructField("low_0", LongType()), StructField("high_0", LongType())]),
        ),
        value_sets=(
            (names.index("day"), [Row(value=DAYS[2])], StructType([StructField("value", DateType())])),
        ),
    )
    # When
    context = spark.sparkContext
    context.setJobGroup("pruning-select", "the stats table's filter")
    try:
        kept = file_filter.select(spark, snapshot, snapshot.files)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    # Then: only day 3's file of ids 200-204 is kept; literals keep the filter on the driver (no job)
    expected = [a["path"] for a in files_of(target, DAYS[2]) if a["min.id"] == 200]
    assert [f.log_path for f in kept] == expected
    jobs = context.statusTracker().getJobIdsForGroup("pruning-select")
    assert (len(jobs) == 0) is literals


FILE_KEYS = st.lists(  # each file's (ticket, item) rows
    st.lists(st.tuples(st.integers(-50, 50), st.integers(-5, 5)), min_size=1, max_size=6),
    min_size=1,
    max_size=5,
)


@settings(ENGINE_SETTINGS, max_examples=max(ENGINE_SETTINGS.max_examples // 2, 1))
@given(
    files=FILE_KEYS,
    keys=st.lists(st.tuples(st.integers(-60, 60), st.integers(-6, 6)), min_size=1, max_size=8),
    tuples=st.booleans(),
    with_stats=st.booleans(),
)
def test_integer_key_sets_select_on_the_driver_the_files_spark_selects(
    spark, tmp_path_factory, files, keys, tuples, with_stats
):
    # Given: a table of a file per drawn group of rows (INT ticket, SMALLINT item), with or without stats;
    # the source's distinct keys as pruning holds them (sorted longs), as tuples or each key alone
    target = str(tmp_path_factory.mktemp("t") / "t")
    indexed = {"delta.dataSkippingNumIndexedCols": "2" if with_stats else "0"}
    for rows in files:
        data = pa.table(
            {
                "ticket": pa.array([r[0] for r in rows], pa.int32()),
                "item": pa.array([r[1] for r in rows], pa.int16()),
            }
        )
        write_deltalake(target, data, mode="append", configuration=indexed)
    snapshot = read_snapshot(target)
    parts = tuple(np.array(p, np.int64) for p in zip(*sorted(set(keys)), strict=True))
    file_filter = pruning.FileFilter(
        StructType.fromJson(snapshot.schema),
        snapshot.partition_columns,
        key_sets=tuple((n, np.unique(part)) for n, part in enumerate(parts)),
        key_tuples=((0, 1), parts) if tuples else None,
    )
    since = last_execution_id(spark)
    # When: selected on the driver, and by Spark's query over the stats table (which a test of no file
    # passes to)
    on_driver = file_filter.select(spark, snapshot, snapshot.files)
    queries = last_execution_id(spark) - since
    in_spark = dataclasses.replace(file_filter, constant_tests=("true",)).select(
        spark, snapshot, snapshot.files
    )
    # Then: the same files, and no Spark query on the driver's way
    assert on_driver == in_spark
    assert queries == 0
    if with_stats:  # each file holding a key tuple (or each key alone) is kept, and no other
        held = [
            any(
                (t, i) in set(keys) if tuples else t in {k[0] for k in keys} and i in {k[1] for k in keys}
                for t, i in rows
            )
            for rows in files
        ]
        assert len(on_driver) >= sum(held)


# Key types a held source may have, with values Hypothesis draws for them (NULLs and repeats included).
HELD_KEY_TYPES = {
    "int": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "smallint": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "bigint": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "string": (pa.string(), st.text(max_size=4)),
    "date": (pa.date32(), st.dates()),
    "timestamp": (
        pa.timestamp("us", tz="UTC"),
        st.datetimes(timezones=st.just(datetime.UTC), min_value=datetime.datetime(1900, 1, 1)),
    ),
    "decimal": (pa.decimal128(10, 2), st.decimals(-(10**7), 10**7, places=2, allow_nan=False)),
}


@st.composite
def held_sources(draw: st.DrawFn) -> pa.Table:
    names = draw(st.lists(st.sampled_from(sorted(HELD_KEY_TYPES)), min_size=1, max_size=2))
    size = draw(st.integers(0, 8))
    columns = {}
    for n, name in enumerate(names):
        arrow_type, values = HELD_KEY_TYPES[name]
        pool = draw(st.lists(values, min_size=1, max_size=3))  # few values: keys repeat
        columns[f"k{n}"] = pa.array(
            draw(st.lists(st.none() | st.sampled_from(pool), min_size=size, max_size=size)), arrow_type
        )
    return pa.table(columns)


@settings(ENGINE_SETTINGS, max_examples=max(ENGINE_SETTINGS.max_examples // 2, 1))
@given(data=held_sources())
def test_a_held_sources_keys_read_on_the_driver_are_the_ones_spark_collects(spark, data):
    # Given: a source held on the driver as the merge holds it (its rows as Spark gives them to Arrow), and
    # the same rows in Spark; each column an equi-join key
    source = spark.createDataFrame(data)
    held = source.toArrow()
    keys = [
        pruning.SourceKey(n, f"s.{f.name}", f.dataType, f.name) for n, f in enumerate(source.schema.fields)
    ]
    comparable = list(range(len(keys)))
    aliased = source.alias("s")
    # When: the key sets, tuples and uniqueness, read where the source is held and collected by Spark
    on_driver = pruning._key_sets_from_tuples(aliased, keys, comparable, data.num_rows, held)
    in_spark = pruning._key_sets_from_tuples(aliased, keys, comparable, data.num_rows, None)
    # Then: the same, element for element; and so are each key's distinct values as a partition key
    assert on_driver[2] == in_spark[2]
    for n in comparable:
        assert on_driver[0][n].tolist() == in_spark[0][n].tolist()
    assert (on_driver[1] is None) == (in_spark[1] is None)
    for driver_part, spark_part in zip(on_driver[1] or (), in_spark[1] or (), strict=True):
        assert driver_part.tolist() == spark_part.tolist()
    for key in keys:
        if pruning.exact_in_python(key.data_type):
            driver_values, _ = pruning._partition_values(aliased, key, held)
            spark_values, _ = pruning._partition_values(aliased, key, None)
            assert sorted(r["value"] for r in driver_values) == sorted(r["value"] for r in spark_values)
