"""Merges into tables written by write_deltalake, partitioned by every kind of Delta type (with NULL and
special-character partitions), read back identically by deltalake and by Spark."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all
from tests.oracle import merge_with_deltalake, sorted_rows

UTC = datetime.UTC
PARTITION_VALUES = {
    "date": pa.array([datetime.date(2024, 1, 1), datetime.date(2024, 1, 2), None], pa.date32()),
    "timestamp": pa.array(
        [
            datetime.datetime(2024, 1, 1, 1, 2, 3, 456789, UTC),
            datetime.datetime(2024, 1, 2, tzinfo=UTC),
            None,
        ],
        pa.timestamp("us", tz="UTC"),
    ),
    "decimal": pa.array([decimal.Decimal("1.50"), decimal.Decimal("20.25"), None], pa.decimal128(5, 2)),
    "string": pa.array(["a b/c=d%", "ü#?", None]),
}


@pytest.mark.parametrize("kind", sorted(PARTITION_VALUES))
def test_upsert_into_partitioned_table_matches_oracle_and_reads_back_in_spark(spark, tmp_path, kind):
    values = PARTITION_VALUES[kind]
    data = pa.table(
        {"id": pa.array([1, 2, 3], pa.int64()), "p": values, "qty": pa.array([1, 2, 3], pa.int32())}
    )
    ours, oracle = str(tmp_path / "ours"), str(tmp_path / "oracle")
    for path in (ours, oracle):
        write_deltalake(path, data, partition_by=["p"])
    # Update every row (each partition, the NULL one included) and insert one new row per partition.
    source = pa.table(
        {
            "id": pa.array([1, 2, 3, 11, 12, 13], pa.int64()),
            "p": pa.concat_arrays([values, values]),
            "qty": pa.array([10, 20, 30, 4, 5, 6], pa.int32()),
        }
    )
    source_path = tmp_path / "source.parquet"
    pq.write_table(source, source_path)
    spec = MergeSpec(
        target=ours,
        source=PathSource(str(source_path)),
        condition="t.id = s.id AND t.p <=> s.p",
        clauses=(update_all(), insert_all()),
    )
    run_merge(spark, spec)
    merge_with_deltalake(oracle, spec, source)
    assert sorted_rows(ours) == sorted_rows(oracle)
    # Spark reads exactly the log's files with partition values from the log: the same rows.
    from airflow_provider_deltamerge.delta.files.reader import read_files
    from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot

    snapshot = read_snapshot(ours)
    spark_rows = read_files(spark, snapshot, snapshot.files).select("id", "p", "qty").collect()
    by_id = {r["id"]: r for r in sorted_rows(ours)}
    assert len(spark_rows) == len(by_id) == 6
    for row in spark_rows:
        expected = by_id[row["id"]]
        assert row["qty"] == expected["qty"]
        assert (row["p"] is None) == (expected["p"] is None)
    assert DeltaTable(ours).version() == 1
