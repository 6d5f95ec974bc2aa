"""Bad source files and names: a product error with Spark's class and first sentence, the table unchanged."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltamerge.delta.log.log_schema import read_path_schema
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import DeltaMergeError, SourceError
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all
from tests.conftest import make_table, table_state
from tests.oracle import sorted_rows

# What a person reads in the task: a few lines, not the JVM's cause chain (which went to 60-160 lines).
MAX_MESSAGE_LINES = 3


def upsert(target: str, source: PathSource, **fields) -> MergeSpec:
    return MergeSpec(
        target=target, source=source, condition="t.id = s.id", clauses=(update_all(), insert_all()), **fields
    )


def truncated_parquet(folder: Path) -> Path:
    whole = folder / "whole.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "qty": pa.array([5], pa.int32())}), whole)
    cut = folder / "cut.parquet"
    cut.write_bytes(whole.read_bytes()[:-20])
    return cut


def fails_cleanly(spark, spec: MergeSpec, error: type[DeltaMergeError], error_class: str) -> str:
    before = table_state(spec.target)
    with pytest.raises(error) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == error_class
    message = str(raised.value)
    assert len(message.splitlines()) <= MAX_MESSAGE_LINES, message
    assert "\tat org.apache" not in message and "Py4JJavaError" not in message
    assert table_state(spec.target) == before
    return message


def test_a_truncated_parquet_source_is_sparks_footer_error(spark, tmp_path):
    spec = upsert(make_table(tmp_path / "t"), PathSource(str(truncated_parquet(tmp_path))))
    message = fails_cleanly(spark, spec, SourceError, "FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER")
    assert "cut.parquet" in message and "complete parquet files" in message


def test_pre_flight_says_the_same_of_a_truncated_parquet_source(tmp_path):
    with pytest.raises(SourceError) as raised:
        read_path_schema(str(truncated_parquet(tmp_path)), "parquet")
    assert raised.value.error_class == "FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER"
    assert "cut.parquet" in str(raised.value)


def test_a_malformed_csv_row_under_failfast_names_the_row(spark, tmp_path):
    extract = tmp_path / "extract.csv"
    extract.write_text("id,qty,region\n1,5,eu\n2,6,us,one-field-too-many\n")
    options = {"header": "true", "mode": "FAILFAST", "inferSchema": "true"}
    spec = upsert(make_table(tmp_path / "t"), PathSource(str(extract), format="csv", options=options))
    message = fails_cleanly(spark, spec, DeltaMergeError, "FAILED_READ_FILE.NO_HINT")
    assert "extract.csv" in message
    assert "Caused by [MALFORMED_CSV_RECORD] Malformed CSV record: 2,6,us,one-field-too-many" in message


def test_a_deduplication_key_the_source_lacks_is_named(spark, tmp_path):
    extract = tmp_path / "extract.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "qty": pa.array([5], pa.int32())}), extract)
    spec = upsert(
        make_table(tmp_path / "t"),
        PathSource(str(extract)),
        deduplicate_source_by=("nope",),
        deduplicate_order_by=("qty",),
    )
    message = fails_cleanly(spark, spec, SourceError, "UNRESOLVED_COLUMN")
    assert "no column `nope` to de-duplicate by; its columns are id, qty" in message


def test_a_condition_with_ten_thousand_in_values_merges(spark, tmp_path):
    # A long IN list was pruned with a Spark analysis and an OR term per value, which ran a 1 GiB driver out
    # of memory; the list's range prunes as well.
    target = make_table(tmp_path / "t", partition_by=["region"])
    extract = tmp_path / "extract.parquet"
    rows = {"id": pa.array([1, 42], pa.int64()), "qty": pa.array([7, 8], pa.int32()), "region": ["us", "eu"]}
    pq.write_table(pa.table(rows), extract)
    wanted = ", ".join(str(n) for n in range(1, 20_000, 2))  # the odd ids: 1 is there, 42 is not
    spec = MergeSpec(
        target=target,
        source=PathSource(str(extract)),
        condition=f"t.id = s.id AND t.id IN ({wanted})",
        clauses=(update_all(), insert_all()),
    )

    metrics = run_merge(spark, spec).metrics

    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (1, 1)
    assert {"id": 1, "qty": 7, "region": "us"} in sorted_rows(target)
    assert {"id": 42, "qty": 8, "region": "eu"} in sorted_rows(target)


@pytest.mark.parametrize("column", ["_metadata", "a`b", "my col.x", "__deltamerge_file", "__deltamerge_x"])
def test_a_table_with_an_unusual_column_name_merges_as_delta_does(spark, tmp_path, column):
    target = make_table(
        tmp_path / "t", pa.table({"id": pa.array([1, 2], pa.int64()), column: pa.array([10, 20], pa.int64())})
    )
    extract = tmp_path / "extract.parquet"
    pq.write_table(
        pa.table({"id": pa.array([2, 3], pa.int64()), column: pa.array([5, 6], pa.int64())}), extract
    )

    metrics = run_merge(spark, upsert(target, PathSource(str(extract)))).metrics

    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (1, 1)
    assert sorted_rows(target) == [{"id": 1, column: 10}, {"id": 2, column: 5}, {"id": 3, column: 6}]
