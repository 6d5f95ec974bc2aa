"""Spark reads exactly the log's files, tagged with Spark's own file URI and row index: every row of every
file maps back to its log entry, whatever characters the table root, partition values and file names
hold."""

from __future__ import annotations

import datetime
import decimal
import json
from pathlib import Path
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from pyspark.sql import functions as F

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.files import reader
from airflow_provider_deltamerge.delta.files.reader import (
    FILE_COLUMN,
    ROW_INDEX_COLUMN,
    files_by_uri,
    read_files,
)
from airflow_provider_deltamerge.delta.log.snapshot import Snapshot, read_snapshot
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all
from tests.conftest import table_state
from tests.oracle import sorted_rows

# Characters a URI must quote (space, %, #, ?), ones it keeps (=, +, @), non-ASCII letters (kept as they
# are) and a non-ASCII space (quoted as UTF-8 bytes).
SPECIAL = "a b%20=+@#?ü中\u00a0z"
# deltalake takes a table location for a URI, so the root's '%' escapes nothing.
ROOT = "root a b%=+@#?ü中\u00a0z"


def special_table(path: Path, *, partitioned: bool) -> str:
    """Two appends (two files per partition) whose partition values and file names hold ``SPECIAL``."""
    for start in (0, 10):
        data = pa.table(
            {
                "id": pa.array(range(start, start + 4), pa.int64()),
                "p": pa.array([SPECIAL, "x+y=1", SPECIAL, None]),
                "qty": pa.array([1, 2, 3, 4], pa.int32()),
            }
        )
        write_deltalake(str(path), data, partition_by=["p"] if partitioned else None, mode="append")
    _rename_files(path)
    return str(path)


def _rename_files(table: Path) -> None:
    """Give every data file a name with ``SPECIAL`` in it, on disk and in the log (URI-encoded there)."""
    for commit in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        for n, action in enumerate(actions):
            if "add" in action:
                old = Path(unquote(action["add"]["path"]))
                new = old.with_name(f"{commit.stem[-2:]}-{n} {SPECIAL}.parquet")
                (table / old).rename(table / new)
                action["add"]["path"] = quote(new.as_posix(), safe="/")
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))


@pytest.mark.parametrize("partitioned", [False, True])
def test_rows_map_to_their_log_file_by_spark_uri(spark, tmp_path, partitioned):
    # Given: a table below a root with special characters, special partition values and file names
    table = special_table(tmp_path / ROOT, partitioned=partitioned)
    snapshot = read_snapshot(table)
    # When: Spark reads every file
    rows = read_files(spark, snapshot, snapshot.files).collect()
    # Then: each row names a log file as Spark does, with row indexes 0..n-1 per file, and the rows
    # (partition values included) are what deltalake reads
    by_uri = files_by_uri(snapshot, snapshot.files)
    assert {r[FILE_COLUMN] for r in rows} == by_uri.keys()
    for uri, file in by_uri.items():
        indexes = sorted(r[ROW_INDEX_COLUMN] for r in rows if r[FILE_COLUMN] == uri)
        assert indexes == list(range(file.num_records or 0))
    ours = sorted((r["id"], r["p"], r["qty"]) for r in rows)
    assert ours == sorted((r["id"], r["p"], r["qty"]) for r in sorted_rows(table))
    if partitioned:
        for r in rows:
            assert dict(by_uri[r[FILE_COLUMN]].partition_values)["p"] == r["p"]


@pytest.mark.parametrize("partitioned", [False, True])
def test_upsert_touches_only_the_file_with_the_key(spark, tmp_path, partitioned):
    # Given: a special-character table and a source updating id 11 and inserting id 99
    ours = special_table(tmp_path / ROOT, partitioned=partitioned)
    source = pa.table(
        {
            "id": pa.array([11, 99], pa.int64()),
            "p": pa.array(["x+y=1", SPECIAL]),
            "qty": pa.array([50, 60], pa.int32()),
        }
    )
    pq.write_table(source, tmp_path / "source.parquet")
    spec = MergeSpec(
        target=ours,
        source=PathSource(str(tmp_path / "source.parquet")),
        condition="t.id = s.id AND t.p <=> s.p",
        clauses=(update_all(), insert_all()),
    )
    # When: the engine merges
    metrics = run_merge(spark, spec).metrics
    # Then: id 11 updated, id 99 inserted, every other row once; only the one file holding id 11 was
    # rewritten, its remove naming the path exactly as the log wrote it (deltalake's own merge, which
    # re-encodes the path, misses such a file and keeps its rows twice: it is no oracle here)
    expected = [
        {"id": start + i, "p": [SPECIAL, "x+y=1", SPECIAL, None][i], "qty": i + 1}
        for start in (0, 10)
        for i in range(4)
    ]
    expected[5]["qty"] = 50
    expected.append({"id": 99, "p": SPECIAL, "qty": 60})
    assert sorted(sorted_rows(ours), key=lambda r: r["id"]) == sorted(expected, key=lambda r: r["id"])
    assert metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    assert metrics[m.NUM_TARGET_FILES_REMOVED] == 1


@pytest.mark.parametrize("partitioned", [False, True])
def test_a_file_spark_names_differently_fails_the_merge_instead_of_losing_rows(
    spark, tmp_path, monkeypatch, partitioned
):
    # Given: a table, and file URIs that no longer match Spark's (a fault injected at the naming)
    table = special_table(tmp_path / "t", partitioned=partitioned)
    before = table_state(table)
    source = pa.table(
        {"id": pa.array([1], pa.int64()), "p": pa.array([SPECIAL]), "qty": pa.array([7], pa.int32())}
    )
    pq.write_table(source, tmp_path / "source.parquet")
    spec = MergeSpec(
        target=table,
        source=PathSource(str(tmp_path / "source.parquet")),
        condition="t.id = s.id",
        clauses=(update_all(),),
    )
    monkeypatch.setattr(reader, "spark_file_uri", lambda location: f"wrong:{location}")
    # When/Then: the merge fails, naming the file, and the table is unchanged
    with pytest.raises(MergeExecutionError, match="cannot find in the table's log"):
        run_merge(spark, spec)
    assert table_state(table) == before
    if partitioned:  # partition values come from a join on the URI: an unknown file fails the read
        snapshot = read_snapshot(table)
        with pytest.raises(Exception, match="cannot find in the log"):
            read_files(spark, snapshot, snapshot.files).collect()


@pytest.mark.parametrize("how", ["left_anti", "full_outer"])
def test_reading_no_file_is_a_relation_spark_knows_is_empty(spark, tmp_path, how):
    # An insert-only merge with no candidate file joins the source with no target rows: Spark must drop
    # that join (and its shuffles) and write the source rows straight from their scan.
    snapshot = read_snapshot(special_table(tmp_path / "t", partitioned=True))
    target = read_files(spark, snapshot, ()).alias("t")
    joined = spark.range(3).alias("s").join(target, F.expr("s.id = t.id"), how)
    plan = joined._jdf.queryExecution().executedPlan().toString()
    assert "Join" not in plan and "Exchange" not in plan
    assert joined.count() == 3


# Column names the reader's SQL text must keep as one identifier: keywords, spaces, backticks, dots.
AWKWARD_NAMES = ("select", "a b", "x`y", "p.q")
PARTITION_VALUES = {
    "day": pa.array([datetime.date(2024, 1, 1), datetime.date(2024, 2, 29), None]),
    "at": pa.array(
        [
            datetime.datetime(2024, 1, 1, 12, 30, tzinfo=datetime.UTC),
            datetime.datetime(1999, 12, 31, 23, 59, 59, tzinfo=datetime.UTC),
            None,
        ],
        pa.timestamp("us", "UTC"),
    ),
    "amount": pa.array([decimal.Decimal("1.25"), decimal.Decimal("1003.50"), None], pa.decimal128(9, 2)),
    "n": pa.array([1, -7, None], pa.int32()),
    "flag": pa.array([True, False, None]),
    "s": pa.array(["x y", "", None]),
}


@pytest.mark.parametrize(
    ("partition", "name"),
    [(p, AWKWARD_NAMES[n % len(AWKWARD_NAMES)]) for n, p in enumerate(PARTITION_VALUES)],
)
def test_typed_partition_values_and_awkward_names_read_as_deltalake_reads_them(
    spark, tmp_path, partition, name
):
    # Given: a table partitioned by a column of a typed kind (NULL among its values), with a data column
    # whose name is a keyword or needs quoting
    data = pa.table({name: pa.array([10, 20, 30], pa.int64()), partition: PARTITION_VALUES[partition]})
    write_deltalake(str(tmp_path), data, partition_by=[partition])
    snapshot = read_snapshot(str(tmp_path))
    # When: Spark reads every file
    rows = read_files(spark, snapshot, snapshot.files).collect()
    # Then: the columns are the table's, named as it names them, with the values deltalake reads
    assert [c for c in rows[0].asDict() if c not in (FILE_COLUMN, ROW_INDEX_COLUMN)] == [name, partition]
    ours = sorted((r[name], _utc(r[partition])) for r in rows)
    assert ours == sorted((r[name], _utc(r[partition])) for r in sorted_rows(str(tmp_path)))


def _utc(value: object) -> object:
    """A timestamp as naive UTC: Spark gives the session's zone (UTC in the tests) without a zone."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


def test_many_local_files_are_listed_without_a_spark_job(spark, tmp_path):
    # Given: a local table of 40 files (more than Spark's 32 paths listed on the driver)
    for n in range(40):
        write_deltalake(str(tmp_path / "t"), pa.table({"id": pa.array([n], pa.int64())}), mode="append")
    snapshot = read_snapshot(str(tmp_path / "t"))
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("listing", "reading 40 files")
    try:
        # When
        rows = read_files(spark, snapshot, snapshot.files)
        jobs = tracker.getJobIdsForGroup("listing")
    finally:
        spark.sparkContext.setJobGroup("", "")
    # Then: Spark listed them on the driver (no job until the rows are read), the rows are all there, and
    # the session's listing threshold is as it was
    assert jobs == []
    assert sorted(r["id"] for r in rows.select("id").collect()) == list(range(40))
    assert spark.conf.get(reader.PARALLEL_LISTING, None) is None


@pytest.mark.parametrize(
    ("uri", "local"),
    [
        ("/data/t", True),
        ("file:///data/t", True),
        ("file:/data/t", True),
        ("C:\\data\\t", True),
        ("s3://bucket/t", False),
        ("abfss://container@account.dfs.core.windows.net/t", False),
        ("gs://bucket/t", False),
    ],
)
def test_a_table_is_on_local_disk_by_its_scheme(uri, local):
    snapshot = Snapshot(
        table_uri=uri, version=0, schema_json="{}", partition_columns=(), configuration=(), files=()
    )
    assert snapshot.on_local_disk is local
