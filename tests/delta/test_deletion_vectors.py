"""Deletion vectors: the format (PROTOCOL.md "Deletion Vector Format"), the descriptor's derived fields, the
lookup of each file's vector in the log, and the reader leaving the hidden rows out.

Oracles: the protocol's own examples; a vector written by delta-spark (which delta-spark reads as rows 1, 3
and 5); and deltalake's DataFusion scan, which applies deletion vectors with its own decoder.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.fs import DeltaStorageHandler
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64

from airflow_provider_deltamerge.delta.files.reader import read_table
from airflow_provider_deltamerge.delta.format.deletion_vectors import (
    NATIVE_MAGIC,
    DeletionVector,
    checked_rows,
    deserialize,
    read_deleted_rows,
    serialize,
    stored_bytes,
    stored_vector,
    z85_decode,
    z85_encode,
)
from airflow_provider_deltamerge.delta.log.live_adds import (
    add_actions_of,
    deletion_vectors_of,
    live_file_sizes,
)
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from airflow_provider_deltamerge.exceptions import TargetTableError
from tests.delta.dv_tables import data_file_paths, delete_rows, enable_deletion_vectors
from tests.oracle import sorted_rows

ROW_INDEXES = st.sets(st.integers(0, 2**36), max_size=200)


def test_a_vector_written_by_delta_spark_reads_as_delta_spark_reads_it() -> None:
    vector = DeletionVector("i", "^Bg9^0rr910000000000iXQKl0rr91000625c8Xg0rri41POJ5", 38, 3)
    data = z85_decode(vector.path_or_inline_dv)[: vector.size_in_bytes]
    assert list(checked_rows(data, vector)) == [1, 3, 5]


def test_the_protocols_inline_example_is_refused_as_delta_spark_refuses_it() -> None:
    # Its bytes are the native layout written big-endian; Delta's readers are little-endian and refuse it.
    vector = DeletionVector("i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 40, 6)
    with pytest.raises(TargetTableError, match="Unexpected RoaringBitmapArray magic number") as raised:
        read_deleted_rows("/nowhere", vector)
    assert raised.value.error_class == "DELTA_DELETION_VECTOR_INVALID_ROW_INDEX"


def test_the_descriptors_derived_fields_follow_the_protocols_examples() -> None:
    relative = DeletionVector("u", "ab^-aqEH.-t@S}K{vb[*k^", 40, 6, offset=4)
    assert relative.file_location("s3://mytable/") == (
        "s3://mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )
    assert relative.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    location = "s3://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    absolute = DeletionVector("p", location, 40, 6, offset=4)
    assert absolute.file_location("s3://other/") == absolute.path_or_inline_dv
    inline = DeletionVector("i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 40, 6)
    assert inline.unique_id == "iwi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
    assert DeletionVector.from_action(inline.to_action()) == inline
    assert "offset" not in inline.to_action()


def test_z85_follows_the_zeromq_reference_example() -> None:
    # ZeroMQ RFC 32: these eight bytes are "HelloWorld".
    data = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(data) == "HelloWorld"
    assert z85_decode("HelloWorld") == data


@settings(max_examples=60, deadline=None)
@given(rows=ROW_INDEXES)
def test_any_set_of_row_indexes_survives_the_file_format(rows: set[int]) -> None:
    bitmap = BitMap64(rows)
    stored = stored_bytes(bitmap)
    assert stored[0] == 1  # the file format's version
    vector = DeletionVector("u", "x" * 20, len(serialize(bitmap)), len(rows), offset=1)
    assert set(checked_rows(stored_vector(stored[1:], vector), vector)) == rows
    inline = serialize(bitmap)
    assert set(deserialize(z85_decode(z85_encode(inline))[: len(inline)])) == rows


def test_the_native_layout_of_older_writers_reads_too() -> None:
    low, high = BitMap([2, 9]), BitMap([7])  # rows 2 and 9, and row 2**32 + 7
    data = struct.pack("<Ii", NATIVE_MAGIC, 2)
    for part in (low, high):
        serialized = part.serialize()
        data += struct.pack("<i", len(serialized)) + serialized
    assert list(deserialize(data)) == [2, 9, 2**32 + 7]


@pytest.mark.parametrize(
    ("damage", "error_class"),
    [
        ("checksum", "DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH"),
        ("size", "DELTA_DELETION_VECTOR_SIZE_MISMATCH"),
        ("cardinality", "DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH"),
        ("row beyond the file", "DELTA_DELETION_VECTOR_INVALID_ROW_INDEX"),
    ],
)
def test_a_damaged_vector_is_refused_in_deltas_words(damage: str, error_class: str) -> None:
    bitmap = BitMap64([0, 4])
    stored = bytearray(stored_bytes(bitmap)[1:])
    size, cardinality = len(serialize(bitmap)), 2
    if damage == "checksum":
        stored[-1] ^= 0xFF
    elif damage == "size":
        size += 1
    elif damage == "cardinality":
        cardinality = 3
    vector = DeletionVector("u", "x" * 20, size, cardinality, offset=1)
    with pytest.raises(TargetTableError) as raised:
        checked_rows(stored_vector(bytes(stored), vector), vector, num_records=4 if "row" in damage else 10)
    assert raised.value.error_class == error_class
    assert "Deletion vector" in str(raised.value) or "deletion vector" in str(raised.value)


def _table_with_vectors(tmp_path: Path, *, partitioned: bool = False) -> str:
    table = str(tmp_path / "t")
    first = {"id": pa.array([1, 2, 3, 4], pa.int64()), "day": ["a", "a", "a", "a"]}
    second = {"id": pa.array([5, 6, 7], pa.int64()), "day": ["b", "b", "b"]}
    partition_by = ["day"] if partitioned else None
    write_deltalake(table, pa.table(first), partition_by=partition_by)
    write_deltalake(table, pa.table(second), mode="append", partition_by=partition_by)
    enable_deletion_vectors(table)
    return table


def _file_holding(table: str, row_id: int) -> str:
    for path in data_file_paths(table):
        ids = pa.parquet.read_table(Path(table) / path.replace("%3D", "=")).column("id").to_pylist()
        if row_id in ids:
            return path
    raise AssertionError(row_id)


def test_each_file_gets_its_newest_vector_from_commits_and_checkpoints(tmp_path: Path) -> None:
    table = _table_with_vectors(tmp_path)
    first, second = _file_holding(table, 1), _file_holding(table, 5)
    delete_rows(table, {first: [1]}, inline=True)
    delete_rows(table, {second: [0, 2]}, prefix="ab")
    delete_rows(table, {first: [3]})  # the newest vector holds both of first's hidden rows
    version = DeltaTable(table).version()
    from_commits = deletion_vectors_of(table, version, [first, second])
    whole_before = add_actions_of(table, version, [first])[first]
    DeltaTable(table).create_checkpoint()
    from_checkpoint = deletion_vectors_of(table, version, [first, second])
    assert from_commits == from_checkpoint
    assert {p: list(read_deleted_rows(table, v)) for p, v in from_commits.items()} == {
        first: [1, 3],
        second: [0, 2],
    }
    assert from_commits[second].path_or_inline_dv.startswith("ab")
    whole = add_actions_of(table, version, [first])[first]
    assert (whole["size"], whole["modificationTime"]) == (
        Path(table, first).stat().st_size,
        whole_before["modificationTime"],
    )
    assert json.loads(whole["stats"]) == json.loads(whole_before["stats"])
    # An older version sees the vector of its own time.
    older = deletion_vectors_of(table, version - 2, [first, second])
    assert older[first].storage_type == "i" and second not in older


def test_the_log_replayed_alone_lists_the_live_files_deltalake_lists(tmp_path: Path) -> None:
    # Given: files re-added under vectors (remove and add of one path in a commit), an append, a checkpoint
    # in the middle and an overwrite after it
    table = _table_with_vectors(tmp_path)
    delete_rows(table, {_file_holding(table, 1): [1]})
    write_deltalake(
        table, pa.table({"id": pa.array([100, 101], pa.int64()), "day": ["c", "c"]}), mode="append"
    )
    DeltaTable(table).create_checkpoint()
    delete_rows(table, {_file_holding(table, 5): [0]})
    write_deltalake(table, pa.table({"id": pa.array([7], pa.int64()), "day": ["d"]}), mode="overwrite")
    # Then: at every version, the files and sizes deltalake's snapshot has
    for version in range(DeltaTable(table).version() + 1):
        adds = pa.table(DeltaTable(table, version=version).get_add_actions()).to_pylist()
        expected = {unquote(a["path"]): a["size_bytes"] for a in adds}
        assert {unquote(p): size for p, size in live_file_sizes(table, version).items()} == expected, version


@pytest.mark.parametrize("partitioned", [False, True])
def test_the_reader_leaves_out_hidden_rows_as_deltalake_does(spark, tmp_path: Path, partitioned: bool):
    table = _table_with_vectors(tmp_path, partitioned=partitioned)
    delete_rows(table, {_file_holding(table, 1): [1]}, inline=True)  # id 2
    delete_rows(table, {_file_holding(table, 5): [0, 2]})  # ids 5 and 7
    rows = sorted(r.asDict()["id"] for r in read_table(spark, read_snapshot(table)).collect())
    assert rows == [1, 3, 4, 6]
    assert sorted(r["id"] for r in sorted_rows(table)) == rows


def test_a_vector_is_read_from_storage_once_per_process(tmp_path: Path, mocker) -> None:
    table = _table_with_vectors(tmp_path)
    path = _file_holding(table, 1)
    delete_rows(table, {path: [2]})
    vector = deletion_vectors_of(table, DeltaTable(table).version(), [path])[path]
    opened = mocker.spy(DeltaStorageHandler, "open_input_file")
    first = read_deleted_rows(table, vector, num_records=4)
    second = read_deleted_rows(table, vector, num_records=4)
    assert list(first) == list(second) == [2]
    assert opened.call_count == 1
    with pytest.raises(AttributeError):
        first.add(3)  # kept frozen: no caller can change what the next one reads
