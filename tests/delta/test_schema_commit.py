"""Committing a merge that evolves the schema: what lands in the log, and what a failure leaves (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, Field, write_deltalake

from airflow_provider_deltamerge.delta.commit import SCHEMA_CHANGE_KEY, Committed, commit_merge
from airflow_provider_deltamerge.delta.conflicts import ReadSet, Rerun, check_winning_commits
from airflow_provider_deltamerge.delta.history import COMMIT_INFO_KEY, SUBMISSION_ID
from airflow_provider_deltamerge.delta.snapshot import read_snapshot
from airflow_provider_deltamerge.exceptions import MergeCommitError

INFO = {SUBMISSION_ID: "run-1"}


def table(path: Path, configuration: dict[str, str] | None = None) -> str:
    write_deltalake(
        str(path),
        pa.table({"id": pa.array([1, 2], pa.int64()), "region": ["eu", "us"]}),
        partition_by=["region"],
        configuration=configuration,
    )
    return str(path)


def with_note(schema_json: str) -> str:
    schema = json.loads(schema_json)
    schema["fields"].append({"name": "note", "type": "string", "nullable": True, "metadata": {}})
    return json.dumps(schema)


def commit(target: str, **changes: object) -> object:
    snapshot = read_snapshot(target)
    return commit_merge(
        snapshot,
        removed=changes.get("removed", ()),  # type: ignore[arg-type]
        added=(),
        operation_parameters={"predicate": "[]"},
        operation_metrics={"numTargetRowsDeleted": 1},
        info=INFO,
        read=ReadSet(snapshot.version, frozenset(f.log_path for f in snapshot.files), lambda s, f: f),
        same_run=lambda info: info.get(SUBMISSION_ID) == "run-1",
        schema=with_note(snapshot.schema_json),
    )


def test_a_merge_that_removes_files_commits_its_schema_first_then_its_files(tmp_path):
    target = table(tmp_path / "t", {"delta.enableChangeDataFeed": "true"})
    before = read_snapshot(target)
    outcome = commit(target, removed=before.files[:1])
    # Then: the schema commit (no merge record: a retried task never takes it for its merge), then the files
    assert outcome == Committed(before.version + 2)
    history = {e["version"]: e for e in DeltaTable(target).history(2)}
    schema_commit = history[before.version + 1]
    assert SCHEMA_CHANGE_KEY in schema_commit and COMMIT_INFO_KEY not in schema_commit
    assert history[before.version + 2][COMMIT_INFO_KEY] == INFO
    after = DeltaTable(target)
    assert [f.name for f in after.schema().fields][-1] == "note"
    original = DeltaTable(target, version=before.version)
    assert after.metadata().id == original.metadata().id
    assert after.metadata().configuration == original.metadata().configuration
    assert after.metadata().partition_columns == ["region"] and after.protocol() == original.protocol()
    assert len(after.file_uris()) == len(before.files) - 1


def test_a_refused_file_commit_puts_the_schema_back(tmp_path):
    # Given: an append-only table, whose log refuses a commit that removes a file
    target = table(tmp_path / "t", {"delta.appendOnly": "true"})
    before = read_snapshot(target)
    with pytest.raises(MergeCommitError, match="refused the merge commit"):
        commit(target, removed=before.files[:1])
    # Then: the schema was committed and restored; files and rows as before
    after = read_snapshot(target)
    assert after.schema_json == before.schema_json
    assert after.version == before.version + 2
    assert {f.log_path for f in after.files} == {f.log_path for f in before.files}


def test_a_concurrent_schema_change_makes_the_merge_run_again(tmp_path):
    # Given: a merge read version v, then another writer added a column
    target = table(tmp_path / "t")
    base = read_snapshot(target)
    DeltaTable(target).alter.add_columns([Field("other", "string")])
    read = ReadSet(base.version, frozenset(), lambda s, f: [])
    # Then: never rebased over, whatever it read
    decision = check_winning_commits(base, read, same_run=lambda info: False)
    assert isinstance(decision, Rerun) and "schema" in decision.reason
