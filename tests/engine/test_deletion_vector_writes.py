"""Merges that write deletion vectors (``delta.enableDeletionVectors=true``; issue 20, point 3).

Expected, from Delta's ClassicMergeExecutor.writeDVs and DMLWithDeletionVectorsHelper: the rows a clause
updates or deletes are hidden in their file's vector, the file coming back under it (a remove of the old
logical file, an add of the same path with the new vector and wide-bound stats); new files hold only the
updated and inserted rows, so numTargetRowsCopied is 0; a file whose every row is gone is removed outright.
File metrics count only files removed whole; numTargetDeletionVectorsAdded/Removed include the updated ones
(Delta's MERGE_DELETION_VECTORS sums). The rows are read back by deltalake's scan, which decodes the
vectors with its own reader.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from airflow_provider_deltamerge.delta.format.deletion_vectors import DeletionVector, read_deleted_rows
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import MergeCommitError
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, delete, insert_all, update_all
from tests.conftest import table_state
from tests.delta.dv_tables import data_file_paths, delete_rows, enable_deletion_vectors
from tests.engine.feature_tables import parquet_source
from tests.oracle import sorted_rows


def ids(*values: int) -> pa.Array:
    return pa.array(values, pa.int64())


def table_writing_vectors(tmp_path: Path) -> tuple[str, str]:
    """Rows 1..4 (qty 10..40) in one file of a table whose writers add deletion vectors."""
    table = str(tmp_path / "t")
    write_deltalake(table, pa.table({"id": ids(1, 2, 3, 4), "qty": ids(10, 20, 30, 40)}))
    enable_deletion_vectors(table)
    (path,) = data_file_paths(table)
    return table, path


def upsert(table: str, source: str) -> MergeSpec:
    clauses = (delete(condition="s.qty < 0"), update_all(), insert_all())
    return MergeSpec(table, PathSource(source), "t.id = s.id", clauses)


def last_commit(table: str) -> list[dict]:
    log = sorted((Path(table) / "_delta_log").glob("*.json"))[-1]
    return [json.loads(line) for line in log.read_text().splitlines()]


def vector_files(table: str) -> list[Path]:
    return sorted(Path(table).glob("deletion_vector_*.bin"))


def counts(metrics, *names: str) -> tuple[int, ...]:
    return tuple(metrics[name] for name in names)


ROWS = ("numTargetRowsDeleted", "numTargetRowsUpdated", "numTargetRowsInserted", "numTargetRowsCopied")
VECTORS = (
    "numTargetDeletionVectorsAdded",
    "numTargetDeletionVectorsRemoved",
    "numTargetDeletionVectorsUpdated",
)


def test_an_upsert_hides_its_rows_in_a_vector_and_copies_none(spark, tmp_path):
    table, path = table_writing_vectors(tmp_path)
    source = parquet_source(tmp_path, "s", id=ids(1, 2, 5), qty=ids(-1, 200, 500))
    result = run_merge(spark, upsert(table, source))
    assert sorted_rows(table) == [
        {"id": 2, "qty": 200},
        {"id": 3, "qty": 30},
        {"id": 4, "qty": 40},
        {"id": 5, "qty": 500},
    ]
    assert counts(result.metrics, *ROWS) == (1, 1, 1, 0)
    assert counts(result.metrics, *VECTORS) == (1, 0, 0)
    assert result.metrics["numTargetFilesRemoved"] == 0
    assert result.metrics["numTargetBytesRemoved"] == 0
    actions = last_commit(table)
    (remove,) = [a["remove"] for a in actions if "remove" in a]
    assert remove["path"] == path and "deletionVector" not in remove
    (readd,) = [a["add"] for a in actions if "add" in a and a["add"]["path"] == path]
    vector = DeletionVector.from_action(readd["deletionVector"])
    assert vector is not None and vector.storage_type == "u"
    assert list(read_deleted_rows(table, vector)) == [0, 1]  # ids 1 (deleted) and 2 (updated)
    stats = json.loads(readd["stats"])
    assert stats["tightBounds"] is False and stats["numRecords"] == 4
    assert (stats["minValues"], stats["maxValues"]) == ({"id": 1, "qty": 10}, {"id": 4, "qty": 40})
    # The new files hold only the updated and the inserted row.
    new_files = [a["add"] for a in actions if "add" in a and a["add"]["path"] != path]
    assert sum(json.loads(a["stats"])["numRecords"] for a in new_files) == 2
    assert len(vector_files(table)) == 1


def test_a_second_merge_extends_the_files_vector(spark, tmp_path):
    table, path = table_writing_vectors(tmp_path)
    run_merge(spark, upsert(table, parquet_source(tmp_path, "s1", id=ids(1), qty=ids(-1))))
    result = run_merge(spark, upsert(table, parquet_source(tmp_path, "s2", id=ids(3), qty=ids(300))))
    assert sorted_rows(table) == [{"id": 2, "qty": 20}, {"id": 3, "qty": 300}, {"id": 4, "qty": 40}]
    assert counts(result.metrics, *VECTORS) == (1, 1, 1)
    actions = last_commit(table)
    (remove,) = [a["remove"] for a in actions if "remove" in a]
    assert remove["path"] == path and remove["deletionVector"]["cardinality"] == 1
    (readd,) = [a["add"] for a in actions if "add" in a and a["add"]["path"] == path]
    assert list(read_deleted_rows(table, DeletionVector.from_action(readd["deletionVector"]))) == [0, 2]


def test_a_file_whose_last_rows_go_is_removed_with_its_vector(spark, tmp_path):
    table, path = table_writing_vectors(tmp_path)
    delete_rows(table, {path: [0, 1]})
    source = parquet_source(tmp_path, "s", id=ids(3, 4), qty=ids(-1, -1))
    result = run_merge(spark, upsert(table, source))
    assert sorted_rows(table) == []
    assert counts(result.metrics, *VECTORS) == (0, 1, 0)
    assert result.metrics["numTargetFilesRemoved"] == 1
    actions = last_commit(table)
    assert not [a for a in actions if "add" in a]
    (remove,) = [a["remove"] for a in actions if "remove" in a]
    assert remove["deletionVector"]["cardinality"] == 2


def test_a_failed_commit_leaves_no_vector_file_and_the_table_unchanged(spark, tmp_path, mocker):
    table, _ = table_writing_vectors(tmp_path)
    before = table_state(table)
    mocker.patch(
        "airflow_provider_deltamerge.engine.merge.commit_merge",
        side_effect=MergeCommitError("the store refused the commit"),
    )
    source = parquet_source(tmp_path, "s", id=ids(1, 2), qty=ids(-1, 200))
    with pytest.raises(MergeCommitError):
        run_merge(spark, upsert(table, source))
    assert table_state(table) == before
    assert vector_files(table) == []
    assert {p.name for p in Path(table).glob("*.parquet")} == {Path(p).name for p in data_file_paths(table)}


def test_a_dry_run_writes_no_vector(spark, tmp_path):
    table, _ = table_writing_vectors(tmp_path)
    before = table_state(table)
    result = run_merge(
        spark, upsert(table, parquet_source(tmp_path, "s", id=ids(1), qty=ids(-1))), dry_run=True
    )
    assert not result.committed
    assert table_state(table) == before and vector_files(table) == []
    assert result.dry_run is not None
    assert result.dry_run["filesToMarkWithDeletionVectors"] == data_file_paths(table)
    assert result.dry_run["filesToRewrite"] == []


def test_a_table_written_by_an_older_writer_without_row_counts_is_copied_as_before(spark, tmp_path):
    """A file with a vector must have numRecords (PROTOCOL.md); without it, files are rewritten whole."""
    table = str(tmp_path / "t")
    write_deltalake(table, pa.table({"id": ids(1, 2), "qty": ids(10, 20)}))
    enable_deletion_vectors(table)
    log = sorted((Path(table) / "_delta_log").glob("*.json"))[0]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for action in lines:
        if "add" in action:
            action["add"].pop("stats", None)
    log.write_text("".join(json.dumps(a) + "\n" for a in lines))
    result = run_merge(spark, upsert(table, parquet_source(tmp_path, "s", id=ids(1), qty=ids(100))))
    assert sorted_rows(table) == [{"id": 1, "qty": 100}, {"id": 2, "qty": 20}]
    assert result.metrics["numTargetRowsCopied"] == 1 and vector_files(table) == []


def test_vectors_survive_the_checkpoints_deltalake_writes_between_merges(spark, tmp_path):
    """With a checkpoint every two versions, the first merge lands at version 2 with a checkpoint, so the
    second finds the file's vector only in that checkpoint (written by deltalake) and extends it."""
    table = str(tmp_path / "t")
    write_deltalake(
        table,
        pa.table({"id": ids(1, 2, 3, 4, 5), "qty": ids(10, 20, 30, 40, 50)}),
        configuration={"delta.checkpointInterval": "2"},
    )
    enable_deletion_vectors(table)
    (path,) = data_file_paths(table)
    for n, key in enumerate((1, 2, 3)):
        run_merge(spark, upsert(table, parquet_source(tmp_path, f"s{n}", id=ids(key), qty=ids(-1))))
    assert list((Path(table) / "_delta_log").glob("*.checkpoint.parquet"))
    assert sorted_rows(table) == [{"id": 4, "qty": 40}, {"id": 5, "qty": 50}]
    (readd,) = [a["add"] for a in last_commit(table) if "add" in a and a["add"]["path"] == path]
    assert list(read_deleted_rows(table, DeletionVector.from_action(readd["deletionVector"]))) == [0, 1, 2]
