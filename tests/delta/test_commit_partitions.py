"""The partitions one commit touched, read from its add and remove actions in a real Delta log."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge.delta.log.commit_partitions import touched_partitions


def events(days: list[str | None], ids: list[int]) -> pa.Table:
    return pa.table({"day": pa.array(days, pa.string()), "id": pa.array(ids, pa.int64())})


def test_a_merge_names_the_partitions_it_updated_and_inserted_into_only(tmp_path):
    table = str(tmp_path / "events")
    write_deltalake(table, events(["d1", "d2", "d3"], [1, 2, 3]), partition_by=["day"])
    # deltalake's own merge: id 2 updated (rewrites d2's file), id 4 inserted into a new partition d4.
    (
        DeltaTable(table)
        .merge(events(["d2", "d4"], [2, 4]), "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )

    assert touched_partitions(table, 1) == [{"day": "d2"}, {"day": "d4"}]
    assert touched_partitions(table, 0) == [{"day": "d1"}, {"day": "d2"}, {"day": "d3"}]


def test_a_delete_names_the_partition_it_removed_a_file_from_and_a_null_value_stays_null(tmp_path):
    table = str(tmp_path / "events")
    write_deltalake(table, events(["d1", None], [1, 2]), partition_by=["day"])
    DeltaTable(table).delete("id = 2")

    assert touched_partitions(table, 1) == [{"day": None}]


def test_an_unpartitioned_table_has_no_partitions(tmp_path):
    table = str(tmp_path / "orders")
    write_deltalake(table, events(["d1"], [1]))
    write_deltalake(table, events(["d2"], [2]), mode="append")

    assert touched_partitions(table, 1) == []
