"""Merges into tables with the change data feed on (``delta.enableChangeDataFeed=true``; issue 21, point 1).

Expected, from Delta's MergeOutputGeneration.generateCdcAndOutputRows, DelayedCommitProtocol and
MergeIntoCommand.runMerge: a merge that rewrites files writes, in the same commit, change files under
``_change_data/`` (in the table's partition folders) named by ``cdc`` actions with ``dataChange`` false.
They hold one row per change: ``update_preimage`` and ``update_postimage`` for an updated row, ``delete``
for a deleted one (once, however many source rows matched it), ``insert`` for an inserted one; copied rows
are not changes. A merge that only adds files (insert-only, or no file touched) writes none: readers take
its added files as inserts. The feed is read back with deltalake's own reader (``load_cdf``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.commit import transaction as commit_module
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.execute import joins
from airflow_provider_deltamerge.exceptions import ClauseResolutionError, TargetTableError
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    delete,
    delete_by_source,
    insert_all,
    update,
    update_all,
    update_by_source,
)
from tests.conftest import table_state
from tests.delta.dv_tables import enable_deletion_vectors
from tests.engine.feature_tables import parquet_source
from tests.oracle import sorted_rows

FEED = {"delta.enableChangeDataFeed": "true"}


def ids(*values: int) -> pa.Array:
    return pa.array(values, pa.int64())


def feed_table(tmp_path: Path, *, partitioned: bool = False) -> str:
    """Rows (1, 10, a), (2, 20, a), (3, 30, b) with the feed on, partitioned by ``p`` or in one file."""
    table = str(tmp_path / "t")
    rows = pa.table({"id": ids(1, 2, 3), "qty": ids(10, 20, 30), "p": pa.array(["a", "a", "b"])})
    write_deltalake(table, rows, partition_by=["p"] if partitioned else None, configuration=FEED)
    return table


def changes(table: str, version: int) -> list[tuple[Any, ...]]:
    """The feed of ``version`` as deltalake reads it: (change type, id, qty, p), sorted."""
    feed = pa.table(DeltaTable(table).load_cdf(starting_version=version, ending_version=version).read_all())
    return sorted((r["_change_type"], r["id"], r["qty"], r["p"]) for r in feed.to_pylist())


def log_actions(table: str, version: int) -> list[dict[str, Any]]:
    text = (Path(table) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def upsert(table: str, source: str, *clauses) -> MergeSpec:
    clauses = clauses or (delete(condition="s.qty < 0"), update_all(), insert_all())
    return MergeSpec(table, PathSource(source), "t.id = s.id", clauses)


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_an_upsert_writes_one_change_row_per_change_in_the_same_commit(spark, tmp_path, partitioned):
    table = feed_table(tmp_path, partitioned=partitioned)
    source = parquet_source(tmp_path, "s", id=ids(1, 4, 3), qty=ids(11, 40, -1), p=pa.array(["a", "b", "b"]))
    result = run_merge(spark, upsert(table, source))
    assert result.version == 1
    assert changes(table, 1) == [
        ("delete", 3, 30, "b"),
        ("insert", 4, 40, "b"),
        ("update_postimage", 1, 11, "a"),
        ("update_preimage", 1, 10, "a"),
    ]
    assert [(r["id"], r["qty"]) for r in sorted_rows(table)] == [(1, 11), (2, 20), (4, 40)]
    actions = log_actions(table, 1)
    cdc = [a["cdc"] for a in actions if "cdc" in a]
    assert cdc and all(c["dataChange"] is False for c in cdc)
    for c in cdc:
        folder, _, name = c["path"].rpartition("/")
        assert name.startswith("cdc-") and name.endswith(".parquet")
        assert folder == ("_change_data/p=" + c["partitionValues"]["p"] if partitioned else "_change_data")
        assert (Path(table) / c["path"]).stat().st_size == c["size"]
    assert result.metrics[m.NUM_TARGET_CHANGE_FILES_ADDED] == len(cdc)
    assert result.metrics[m.NUM_TARGET_CHANGE_FILE_BYTES] == sum(c["size"] for c in cdc)
    commit_metrics = next(a["commitInfo"] for a in actions if "commitInfo" in a)["operationMetrics"]
    assert commit_metrics[m.NUM_TARGET_CHANGE_FILES_ADDED] == str(len(cdc))
    # Added files carry stats of the table's columns only, never of the change type.
    for add in (a["add"] for a in actions if "add" in a):
        assert "_change_type" not in add["stats"]
        assert json.loads(add["stats"])["numRecords"] > 0


def test_the_feed_matches_deltalakes_merge_of_the_same_tables(spark, tmp_path):
    ours, theirs = (
        feed_table(tmp_path / "ours", partitioned=True),
        feed_table(tmp_path / "theirs", partitioned=True),
    )
    rows = {"id": ids(1, 2, 5), "qty": ids(-1, 21, 50), "p": pa.array(["a", "a", "b"])}
    source = parquet_source(tmp_path, "s", **rows)
    run_merge(spark, upsert(ours, source))
    (
        DeltaTable(theirs)
        .merge(pa.table(rows), "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete("s.qty < 0")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (
        changes(ours, 1)
        == changes(theirs, 1)
        == [
            ("delete", 1, 10, "a"),
            ("insert", 5, 50, "b"),
            ("update_postimage", 2, 21, "a"),
            ("update_preimage", 2, 20, "a"),
        ]
    )


@pytest.fixture(params=[None, 0], ids=["broadcast", "no-broadcast"])
def broadcast_budget(request, monkeypatch) -> None:
    """The default memory budget for broadcasting a source, or one no source fits in (a full outer join)."""
    if request.param is not None:
        monkeypatch.setattr(joins, "MAX_BROADCAST_BYTES", request.param)


def test_a_row_deleted_by_several_source_rows_is_one_delete(spark, tmp_path, broadcast_budget):
    table = feed_table(tmp_path)
    source = parquet_source(
        tmp_path, "s", id=ids(1, 1, 2, 9, 9), qty=ids(0, 0, 0, 90, 91), p=pa.array(["a"] * 5)
    )
    result = run_merge(spark, upsert(table, source, delete(), insert_all()))
    assert changes(table, 1) == [
        ("delete", 1, 10, "a"),
        ("delete", 2, 20, "a"),
        ("insert", 9, 90, "a"),
        ("insert", 9, 91, "a"),
    ]
    assert result.metrics[m.NUM_TARGET_ROWS_DELETED] == 2
    assert [(r["id"], r["qty"]) for r in sorted_rows(table)] == [(3, 30), (9, 90), (9, 91)]


def test_not_matched_by_source_changes_and_deletion_vectors(spark, tmp_path):
    table = str(tmp_path / "t")
    rows = pa.table({"id": ids(1, 2, 3, 4), "qty": ids(10, 20, 30, 40), "p": pa.array(["a", "a", "b", "b"])})
    write_deltalake(table, rows, configuration=FEED)
    enable_deletion_vectors(table)
    source = parquet_source(tmp_path, "s", id=ids(1), qty=ids(12), p=pa.array(["a"]))
    clauses = (
        update(set={"qty": "s.qty"}),
        update_by_source({"qty": "t.qty + 1"}, condition="t.id = 2"),
        delete_by_source(condition="t.id = 3"),
    )
    result = run_merge(spark, upsert(table, source, *clauses))
    assert changes(table, 2) == [
        ("delete", 3, 30, "b"),
        ("update_postimage", 1, 12, "a"),
        ("update_postimage", 2, 21, "a"),
        ("update_preimage", 1, 10, "a"),
        ("update_preimage", 2, 20, "a"),
    ]
    assert [(r["id"], r["qty"]) for r in sorted_rows(table)] == [(1, 12), (2, 21), (4, 40)]
    # Row 4 stays where it was, under the file's new vector: a change to no one.
    assert any("deletionVector" in a.get("add", {}) for a in log_actions(table, 2))
    assert result.metrics[m.NUM_TARGET_ROWS_COPIED] == 0


def test_a_merge_that_only_adds_files_writes_no_change_files(spark, tmp_path):
    table = feed_table(tmp_path)
    for version, clauses in ((1, (insert_all(),)), (2, (update_all(), insert_all()))):
        new_ids = ids(7 + version * 10, 8 + version * 10)
        source = parquet_source(tmp_path, f"s{version}", id=new_ids, qty=ids(70, 80), p=pa.array(["b", "b"]))
        result = run_merge(spark, upsert(table, source, *clauses))
        assert not any("cdc" in a for a in log_actions(table, version))
        assert result.metrics[m.NUM_TARGET_CHANGE_FILES_ADDED] == 0
        assert changes(table, version) == [
            ("insert", 7 + version * 10, 70, "b"),
            ("insert", 8 + version * 10, 80, "b"),
        ]


def test_schema_evolution_may_not_add_a_column_the_feed_reserves(spark, tmp_path):
    table = feed_table(tmp_path)
    before = table_state(table)
    source = parquet_source(
        tmp_path, "s", id=ids(1), qty=ids(11), p=pa.array(["a"]), _change_type=pa.array(["x"])
    )
    spec = upsert(table, source, update_all(), insert_all())
    with pytest.raises(ClauseResolutionError, match=r"reserved columns \[_change_type\]") as raised:
        run_merge(
            spark, MergeSpec(spec.target, spec.source, spec.condition, spec.clauses, schema_evolution=True)
        )
    assert raised.value.error_class == "RESERVED_CDC_COLUMNS_ON_WRITE"
    assert table_state(table) == before


@pytest.mark.parametrize("mode", ["name", "id"])
def test_change_files_of_a_mapped_table_use_physical_names(spark, tmp_path, mode):
    """Under column mapping Delta writes change files as it writes data files, with the physical schema
    (``_change_type`` keeps its name), and a cdc action keys its partition values by physical names.
    deltalake's ``load_cdf`` refuses mapped tables, so the change files are read with pyarrow."""
    table = str(tmp_path / "t")
    rows = pa.table({"id": ids(1, 2, 3), "qty": ids(10, 20, 30), "p": pa.array(["a", "a", "b"])})
    write_deltalake(table, rows, partition_by=["p"], configuration={**FEED, "delta.columnMapping.mode": mode})
    source = parquet_source(tmp_path, "s", id=ids(1, 4, 3), qty=ids(11, 40, -1), p=pa.array(["a", "b", "b"]))
    result = run_merge(spark, upsert(table, source))
    (metadata,) = [a["metaData"] for a in log_actions(table, 0) if "metaData" in a]
    fields = {f["name"]: f["metadata"] for f in json.loads(metadata["schemaString"])["fields"]}
    names = {name: f["delta.columnMapping.physicalName"] for name, f in fields.items()}
    assert all(name != names[name] for name in ("id", "qty", "p"))
    cdc = [a["cdc"] for a in log_actions(table, result.version) if "cdc" in a]
    assert cdc and all(set(c["partitionValues"]) == {names["p"]} for c in cdc)
    found = []
    for c in cdc:
        written = pq.read_table(Path(table) / c["path"])
        assert written.column_names == [names["id"], names["qty"], "_change_type"]
        field_ids = [
            written.schema.field(n).metadata[b"PARQUET:field_id"] for n in (names["id"], names["qty"])
        ]
        assert [int(i) for i in field_ids] == [
            fields["id"]["delta.columnMapping.id"],
            fields["qty"]["delta.columnMapping.id"],
        ]
        p = c["partitionValues"][names["p"]]
        found += [(r["_change_type"], r[names["id"]], r[names["qty"]], p) for r in written.to_pylist()]
    assert sorted(found) == [
        ("delete", 3, 30, "b"),
        ("insert", 4, 40, "b"),
        ("update_postimage", 1, 11, "a"),
        ("update_preimage", 1, 10, "a"),
    ]


def test_a_column_schema_evolution_adds_is_null_before_and_set_after_an_update(spark, tmp_path):
    """Delta's change rows are the rows it writes: an update's preimage is the target row as it was, so a
    column the merge's schema evolution adds is NULL there, and the postimage has the source's value."""
    table = feed_table(tmp_path)
    source = parquet_source(
        tmp_path, "s", id=ids(1, 4), qty=ids(11, 40), p=pa.array(["a", "b"]), note=pa.array(["one", "four"])
    )
    spec = upsert(table, source, update_all(), insert_all())
    run_merge(spark, MergeSpec(spec.target, spec.source, spec.condition, spec.clauses, schema_evolution=True))
    feed = pa.table(DeltaTable(table).load_cdf(starting_version=1, ending_version=1).read_all())
    assert sorted((r["_change_type"], r["id"], r["qty"], r["note"]) for r in feed.to_pylist()) == [
        ("insert", 4, 40, "four"),
        ("update_postimage", 1, 11, "one"),
        ("update_preimage", 1, 10, None),
    ]
    assert [(r["id"], r["note"]) for r in sorted_rows(table)] == [
        (1, "one"),
        (2, None),
        (3, None),
        (4, "four"),
    ]


def test_a_store_without_our_commit_refuses_and_leaves_no_change_files(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(commit_module, "log_store", lambda uri: None)  # HDFS, say: deltalake's transaction
    table = feed_table(tmp_path)
    before = table_state(table)
    source = parquet_source(tmp_path, "s", id=ids(1), qty=ids(11), p=pa.array(["a"]))
    with pytest.raises(TargetTableError, match="cannot write the cdc actions"):
        run_merge(spark, upsert(table, source))
    assert table_state(table) == before
    assert not list(Path(table).glob("_change_data/**/*.parquet"))
