"""Merging into tables with deletion vectors the table no longer adds to (``delta.enableDeletionVectors``
off; issue 20, point 2: read). A merge then rewrites touched files whole, as Delta does with the property off.

Delta's reader requirement (PROTOCOL.md "Deletion Vectors"): rows a vector hides are not in the table, so a
merge neither matches nor copies them, and a source row whose key only a hidden row had is inserted. A
rewritten file leaves the table as the logical file it is, path and vector: its remove action names the
vector, else the old rows would stay (PROTOCOL.md "Add File and Remove File"). Delta counts each rewritten
file's vector in numTargetDeletionVectorsRemoved.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge.delta.commit.conflicts import ReadSet, Rerun, check_winning_commits
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, delete, insert_all, update_all
from tests.delta.dv_tables import data_file_paths, delete_rows, enable_deletion_vectors
from tests.engine.feature_tables import parquet_source
from tests.oracle import sorted_rows


def ids(*values: int) -> pa.Array:
    return pa.array(values, pa.int64())


def dv_table(tmp_path: Path, *, enabled: bool = False) -> tuple[str, str]:
    """Rows 1..4 (qty 10..40) in one file, rows 2 and 4 hidden by a deletion vector; returns the table and
    the file's log path. ``enabled``: the table property that makes writers add vectors."""
    table = str(tmp_path / "t")
    write_deltalake(table, pa.table({"id": ids(1, 2, 3, 4), "qty": ids(10, 20, 30, 40)}))
    enable_deletion_vectors(table, enabled=enabled)
    (path,) = data_file_paths(table)
    delete_rows(table, {path: [1, 3]})
    return table, path


def last_commit(table: str) -> list[dict]:
    log = sorted((Path(table) / "_delta_log").glob("*.json"))[-1]
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_an_upsert_neither_matches_nor_copies_hidden_rows(spark, tmp_path):
    table, path = dv_table(tmp_path)
    source = parquet_source(tmp_path, "s", id=ids(1, 2, 5), qty=ids(-1, 200, 500))
    spec = MergeSpec(
        target=table,
        source=PathSource(source),
        condition="t.id = s.id",
        clauses=(delete(condition="s.qty < 0"), update_all(), insert_all()),
    )
    result = run_merge(spark, spec)
    # Row 1 deleted; row 2 was hidden, so the source's 2 is an insert; row 3 copied; row 4 stays hidden.
    assert sorted_rows(table) == [
        {"id": 2, "qty": 200},
        {"id": 3, "qty": 30},
        {"id": 5, "qty": 500},
    ]
    metrics = result.metrics
    assert (
        metrics["numTargetRowsDeleted"],
        metrics["numTargetRowsUpdated"],
        metrics["numTargetRowsInserted"],
        metrics["numTargetRowsCopied"],
    ) == (1, 0, 2, 1)
    assert metrics["numTargetFilesRemoved"] == 1
    assert metrics["numTargetDeletionVectorsRemoved"] == 1
    (remove,) = [a["remove"] for a in last_commit(table) if "remove" in a]
    assert remove["path"] == path
    assert remove["deletionVector"]["cardinality"] == 2
    # Nothing of the old logical file is left: the new snapshot has no vector at all.
    assert all(f.deletion_vector is None for f in read_snapshot(table).files)


def test_an_insert_only_merge_inserts_keys_only_hidden_rows_had(spark, tmp_path):
    table, _ = dv_table(tmp_path)
    source = parquet_source(tmp_path, "s", id=ids(3, 4), qty=ids(300, 400))
    spec = MergeSpec(table, PathSource(source), "t.id = s.id", clauses=(insert_all(),))
    result = run_merge(spark, spec)
    assert sorted_rows(table) == [{"id": 1, "qty": 10}, {"id": 3, "qty": 30}, {"id": 4, "qty": 400}]
    assert result.metrics["numTargetRowsInserted"] == 1
    assert result.metrics["numTargetDeletionVectorsRemoved"] == 0


def test_a_matched_only_merge_updates_visible_rows_and_drops_the_vector(spark, tmp_path):
    table, _ = dv_table(tmp_path)
    source = parquet_source(tmp_path, "s", id=ids(2, 3), qty=ids(200, 300))
    spec = MergeSpec(table, PathSource(source), "t.id = s.id", clauses=(update_all(),))
    result = run_merge(spark, spec)
    assert sorted_rows(table) == [{"id": 1, "qty": 10}, {"id": 3, "qty": 300}]
    assert (result.metrics["numTargetRowsUpdated"], result.metrics["numTargetRowsCopied"]) == (1, 1)
    assert result.metrics["numTargetDeletionVectorsRemoved"] == 1


@pytest.mark.parametrize("inline", [True, False])
def test_a_concurrent_delete_by_deletion_vector_of_a_file_the_merge_read_makes_it_rerun(tmp_path, inline):
    """The winning commit swaps the file's vector: the path is in both snapshots, yet rows are gone, so the
    merge must not be rebased over it (Delta's ConcurrentDeleteReadException)."""
    table, path = dv_table(tmp_path)
    base = read_snapshot(table)
    read = ReadSet(base.version, frozenset({path}), lambda _snapshot, files: files)
    delete_rows(table, {path: [0]}, inline=inline)
    decision = check_winning_commits(base, read, same_run=lambda _info: False)
    assert isinstance(decision, Rerun)
    assert DeltaTable(table).version() == base.version + 1
