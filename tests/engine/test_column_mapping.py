"""Merges into tables with column mapping (``delta.columnMapping.mode`` name or id; issue 21, point 2).

Expected, from PROTOCOL.md "Writer Requirements for Column Mapping": data files name columns by their
physical names (nested fields included) and carry the column ids as parquet field ids; the log keys
partition values and stats by physical names; a column a merge adds gets the next id and a new physical
name, and ``delta.columnMapping.maxColumnId`` moves with it in the same commit. The tables are written by
deltalake (which maps columns as Delta does) and read back by its DataFusion scan, which resolves the
physical names itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import assume, given
from hypothesis import strategies as st

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.commit import transaction as commit_module
from airflow_provider_deltamerge.delta.files.reader import read_table
from airflow_provider_deltamerge.delta.format.column_mapping import PHYSICAL_NAME_KEY
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import TargetTableError
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert, insert_all, update, update_all
from tests.conftest import table_state
from tests.engine.feature_tables import parquet_source
from tests.engine.test_differential import as_table, assert_merges_agree, has_matching_duplicates, merges
from tests.engine.test_differential_deletion_vectors import DV_SETTINGS
from tests.oracle import sorted_rows

POINT = pa.struct([("x", pa.int64()), ("y", pa.string())])


def mapped_table(path: Path, mode: str) -> str:
    """Rows 1-4 (two files, ids 1-2 and 3-4) partitioned by ``p``, with a struct column, under ``mode``."""
    table = str(path)
    for first in (1, 3):
        rows = pa.table(
            {
                "id": pa.array([first, first + 1], pa.int64()),
                "qty": pa.array([first * 10, first * 10 + 10], pa.int64()),
                "pt": pa.array([{"x": first, "y": "a"}, {"x": first + 1, "y": "b"}], POINT),
                "p": pa.array(["a", "a"] if first == 1 else ["b", "b"]),
            }
        )
        write_deltalake(
            table, rows, mode="append", partition_by=["p"], configuration={"delta.columnMapping.mode": mode}
        )
    return table


def point_source(tmp_path: Path, *rows: tuple[int, int, int, str, str]) -> str:
    """A parquet source of rows (id, qty, pt.x, pt.y, p): the test table's columns."""
    ids, qtys, xs, ys, parts = zip(*rows, strict=True)
    return parquet_source(
        tmp_path,
        "s",
        id=pa.array(ids, pa.int64()),
        qty=pa.array(qtys, pa.int64()),
        pt=pa.array([{"x": x, "y": y} for x, y in zip(xs, ys, strict=True)], POINT),
        p=pa.array(parts),
    )


def alter_fields(table: str, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    """Commit version 2 with version 1's schema, its fields changed by ``change`` (an ALTER TABLE)."""
    metadata = schema_of(table, 1)
    schema = json.loads(metadata["schemaString"])
    metadata = {**metadata, "schemaString": json.dumps({**schema, "fields": change(schema["fields"])})}
    (Path(table) / "_delta_log" / f"{2:020d}.json").write_text(json.dumps({"metaData": metadata}) + "\n")


def commit(table: str, version: int) -> list[dict[str, Any]]:
    text = (Path(table) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def schema_of(table: str, version: int) -> dict[str, Any]:
    for v in range(version, -1, -1):
        for action in commit(table, v):
            if "metaData" in action:
                return action["metaData"]
    raise AssertionError("no metaData")


def max_column_id(table: str, version: int) -> int:
    return int(schema_of(table, version)["configuration"]["delta.columnMapping.maxColumnId"])


def physical(field: dict[str, Any]) -> str:
    return field["metadata"]["delta.columnMapping.physicalName"]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_an_upsert_reads_and_writes_physical_columns(spark, tmp_path, mode):
    table = mapped_table(tmp_path / "t", mode)
    source = point_source(tmp_path, (2, 21, 20, "u", "a"), (9, 90, 90, "n", "b"))
    spec = MergeSpec(table, PathSource(source), "t.id = s.id", (update_all(), insert_all()))
    result = run_merge(spark, spec)
    assert [(r["id"], r["qty"], r["pt"], r["p"]) for r in sorted_rows(table)] == [
        (1, 10, {"x": 1, "y": "a"}, "a"),
        (2, 21, {"x": 20, "y": "u"}, "a"),
        (3, 30, {"x": 3, "y": "a"}, "b"),
        (4, 40, {"x": 4, "y": "b"}, "b"),
        (9, 90, {"x": 90, "y": "n"}, "b"),
    ]
    # The source's keys prune by the stats the log keys by physical names.
    assert result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 1
    fields = {f["name"]: f for f in json.loads(schema_of(table, 0)["schemaString"])["fields"]}
    names = {name: physical(f) for name, f in fields.items()}
    nested = {f["name"]: physical(f) for f in fields["pt"]["type"]["fields"]}
    actions = commit(table, result.version)
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    assert adds and removes
    for action in (*adds, *removes):
        assert set(action["partitionValues"]) == {names["p"]}
    for add in adds:
        stats = json.loads(add["stats"])
        assert set(stats["minValues"]) == {names["id"], names["qty"], names["pt"]}
        assert set(stats["minValues"][names["pt"]]) == set(nested.values())
        written = pq.read_schema(Path(table) / add["path"])
        assert written.names == [names["id"], names["qty"], names["pt"]]
        ids = [int(written.field(n).metadata[b"PARQUET:field_id"]) for n in written.names]
        assert ids == [fields[c]["metadata"]["delta.columnMapping.id"] for c in ("id", "qty", "pt")]
        struct = written.field(names["pt"]).type
        assert [struct.field(i).name for i in range(struct.num_fields)] == list(nested.values())


@pytest.mark.parametrize("mode", ["name", "id"])
def test_schema_evolution_gives_new_columns_the_next_ids(spark, tmp_path, mode):
    table = mapped_table(tmp_path / "t", mode)
    before = max_column_id(table, 1)
    source = parquet_source(
        tmp_path,
        "s",
        id=pa.array([1, 7], pa.int64()),
        qty=pa.array([11, 70], pa.int64()),
        pt=pa.array([{"x": 1, "y": "a"}, {"x": 7, "y": "g"}], POINT),
        p=pa.array(["a", "b"]),
        note=pa.array(["one", "seven"]),
    )
    spec = MergeSpec(
        table, PathSource(source), "t.id = s.id", (update_all(), insert_all()), schema_evolution=True
    )
    result = run_merge(spark, spec)
    metadata = schema_of(table, result.version)
    (note,) = [f for f in json.loads(metadata["schemaString"])["fields"] if f["name"] == "note"]
    assert note["metadata"]["delta.columnMapping.id"] == before + 1
    assert physical(note).startswith("col-") and physical(note) != "note"
    assert max_column_id(table, result.version) == before + 1
    assert metadata["configuration"]["delta.columnMapping.mode"] == mode
    assert [(r["id"], r["qty"], r["note"]) for r in sorted_rows(table)] == [
        (1, 11, "one"),
        (2, 20, None),
        (3, 30, None),
        (4, 40, None),
        (7, 70, "seven"),
    ]
    for add in (a["add"] for a in commit(table, result.version) if "add" in a):
        written = pq.read_schema(Path(table) / add["path"])
        assert int(written.field(physical(note)).metadata[b"PARQUET:field_id"]) == before + 1


@pytest.mark.parametrize("mode", ["name", "id"])
def test_schema_evolution_adds_a_mapped_field_inside_a_struct(spark, tmp_path, mode):
    """A source struct with a field the target's lacks: the new nested field gets the next id and a
    ``col-`` physical name too (Delta's DeltaColumnMapping.assignColumnIdAndPhysicalName walks nested
    fields), and older rows read it as NULL."""
    table = mapped_table(tmp_path / "t", mode)
    before = max_column_id(table, 1)
    wider = pa.struct([("x", pa.int64()), ("y", pa.string()), ("z", pa.string())])
    source = parquet_source(
        tmp_path,
        "s",
        id=pa.array([1, 7], pa.int64()),
        qty=pa.array([11, 70], pa.int64()),
        pt=pa.array([{"x": 1, "y": "a", "z": "new"}, {"x": 7, "y": "g", "z": "seven"}], wider),
        p=pa.array(["a", "b"]),
    )
    spec = MergeSpec(
        table, PathSource(source), "t.id = s.id", (update_all(), insert_all()), schema_evolution=True
    )
    result = run_merge(spark, spec)
    metadata = schema_of(table, result.version)
    fields = {f["name"]: f for f in json.loads(metadata["schemaString"])["fields"]}
    old_fields = {f["name"]: f for f in json.loads(schema_of(table, 1)["schemaString"])["fields"]}
    assert fields["pt"]["metadata"] == old_fields["pt"]["metadata"]  # the struct keeps its id and name
    nested = {f["name"]: f for f in fields["pt"]["type"]["fields"]}
    assert list(nested) == ["x", "y", "z"]
    z = nested["z"]
    assert z["metadata"]["delta.columnMapping.id"] == before + 1
    assert physical(z).startswith("col-")
    assert max_column_id(table, result.version) == before + 1
    assert [(r["id"], r["pt"]) for r in sorted_rows(table)] == [
        (1, {"x": 1, "y": "a", "z": "new"}),
        (2, {"x": 2, "y": "b", "z": None}),
        (3, {"x": 3, "y": "a", "z": None}),
        (4, {"x": 4, "y": "b", "z": None}),
        (7, {"x": 7, "y": "g", "z": "seven"}),
    ]
    adds = [a["add"] for a in commit(table, result.version) if "add" in a]
    assert adds
    for add in adds:
        struct = pq.read_schema(Path(table) / add["path"]).field(physical(fields["pt"])).type
        names = [struct.field(i).name for i in range(struct.num_fields)]
        assert names == [physical(f) for f in nested.values()]
        assert int(struct.field(physical(z)).metadata[b"PARQUET:field_id"]) == before + 1


@DV_SETTINGS
@given(case=merges(), mode=st.sampled_from(["name", "id"]))
def test_a_merge_into_mapped_columns_ends_as_one_into_plain_columns(spark, tmp_path_factory, case, mode):
    assume(not has_matching_duplicates(case))
    work = tmp_path_factory.mktemp("merge")
    ours, oracle = str(work / "ours"), str(work / "oracle")
    for rows in case["files"]:
        write_deltalake(
            ours,
            as_table(rows),
            mode="append",
            partition_by=case["partition_by"],
            configuration={"delta.columnMapping.mode": mode},
        )
        write_deltalake(oracle, as_table(rows), mode="append", partition_by=case["partition_by"])
    assert_merges_agree(spark, work, case, ours, oracle)


def test_renamed_and_dropped_columns_keep_their_stored_data(spark, tmp_path):
    """A rename changes only the logical name and a drop only the schema (Delta's RENAME/DROP COLUMN under
    column mapping): the files keep the physical columns, and a merge reads and writes them by those."""
    table = mapped_table(tmp_path / "t", "name")
    alter_fields(
        table,
        lambda fields: [
            {**f, "name": "amount"} if f["name"] == "qty" else f for f in fields if f["name"] != "pt"
        ],
    )
    source = parquet_source(
        tmp_path,
        "s",
        id=pa.array([1, 5], pa.int64()),
        amount=pa.array([11, 50], pa.int64()),
        p=pa.array(["a", "b"]),
    )
    spec = MergeSpec(table, PathSource(source), "t.id = s.id", (update_all(), insert_all()))
    result = run_merge(spark, spec)
    assert result.version == 3
    assert [(r["id"], r["amount"], r["p"]) for r in sorted_rows(table)] == [
        (1, 11, "a"),
        (2, 20, "a"),
        (3, 30, "b"),
        (4, 40, "b"),
        (5, 50, "b"),
    ]
    qty = next(f for f in json.loads(schema_of(table, 2)["schemaString"])["fields"] if f["name"] == "amount")
    for add in (a["add"] for a in commit(table, 3) if "add" in a):
        assert physical(qty) in pq.read_schema(Path(table) / add["path"]).names


def test_id_mode_finds_a_files_columns_by_field_id(spark, tmp_path):
    """Delta reads an ``id``-mode table's files by parquet field id (DeltaParquetFileFormat keeps the ids in
    its read schema; Delta's session extension turns on ``spark.sql.parquet.fieldId.read.enabled``). Here
    the log gives ``qty`` and ``pt.y`` new physical names, so only their ids still name the files' columns:
    read by name they would be NULL."""
    table = mapped_table(tmp_path / "t", "id")

    def renamed(field: dict[str, Any]) -> dict[str, Any]:
        if isinstance(field["type"], dict):
            field = {
                **field,
                "type": {**field["type"], "fields": [renamed(f) for f in field["type"]["fields"]]},
            }
        if field["name"] not in ("qty", "y"):
            return field
        return {
            **field,
            "metadata": {**field["metadata"], PHYSICAL_NAME_KEY: f"col-elsewhere-{field['name']}"},
        }

    alter_fields(table, lambda fields: [renamed(f) for f in fields])
    source = point_source(tmp_path, (1, 1, 1, "a", "a"), (9, 90, 9, "i", "b"))
    spec = MergeSpec(
        table, PathSource(source), "t.id = s.id", (update({"qty": "t.qty + s.qty"}), insert_all())
    )
    result = run_merge(spark, spec)
    rows = [r.asDict(recursive=True) for r in read_table(spark, read_snapshot(table)).collect()]
    assert sorted((r["id"], r["qty"], r["pt"]["y"], r["p"]) for r in rows) == [
        (1, 11, "a", "a"),
        (2, 20, "b", "a"),
        (3, 30, "a", "b"),
        (4, 40, "b", "b"),
        (9, 90, "i", "b"),
    ]
    # The written files hold the copied row's values too, under the new names.
    fields = {f["name"]: f for f in json.loads(schema_of(table, 2)["schemaString"])["fields"]}
    id_name, pt_name = physical(fields["id"]), physical(fields["pt"])
    written = [
        (r[id_name], r["col-elsewhere-qty"], r[pt_name]["col-elsewhere-y"])
        for a in commit(table, result.version)
        if "add" in a
        for r in pq.read_table(Path(table) / a["add"]["path"]).to_pylist()
    ]
    assert sorted(written) == [(1, 11, "a"), (2, 20, "b"), (9, 90, "i")]


def test_a_store_without_our_commit_refuses_a_mapped_table(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(commit_module, "log_store", lambda uri: None)  # HDFS, say: deltalake's transaction
    table = mapped_table(tmp_path / "t", "id")
    before = table_state(table)
    source = parquet_source(tmp_path, "s", id=pa.array([9], pa.int64()), qty=pa.array([90], pa.int64()))
    spec = MergeSpec(table, PathSource(source), "t.id = s.id", (insert({"id": "s.id", "p": "'a'"}),))
    with pytest.raises(TargetTableError, match="column mapping"):
        run_merge(spark, spec)
    assert table_state(table) == before


def test_stats_columns_are_named_logically_and_stored_physically(spark, tmp_path):
    table = mapped_table(tmp_path / "t", "name")
    DeltaTable(table).alter.set_table_properties({"delta.dataSkippingStatsColumns": "qty,pt.y"})
    source = parquet_source(tmp_path, "s", id=pa.array([9], pa.int64()), qty=pa.array([90], pa.int64()))
    spec = MergeSpec(table, PathSource(source), "t.id = s.id", (insert({"id": "s.id", "qty": "s.qty"}),))
    result = run_merge(spark, spec)
    fields = {f["name"]: f for f in json.loads(schema_of(table, result.version)["schemaString"])["fields"]}
    y = next(f for f in fields["pt"]["type"]["fields"] if f["name"] == "y")
    (add,) = [a["add"] for a in commit(table, result.version) if "add" in a]
    stats = json.loads(add["stats"])
    assert stats["minValues"] == {physical(fields["qty"]): 90, physical(fields["pt"]): {}}  # y is all NULL
    assert stats["nullCount"] == {physical(fields["qty"]): 0, physical(fields["pt"]): {physical(y): 1}}
