"""The merge commit as Delta writes it: one commit file with Delta's MERGE actions, read back by deltalake and
Spark; in-commit timestamps, checkpoints, and deltalake's transaction where a store has no conditional put."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, Field, write_deltalake

from airflow_provider_deltamerge.delta.commit import transaction as commit_module
from airflow_provider_deltamerge.delta.commit.conflicts import ReadSet, Rerun, check_winning_commits
from airflow_provider_deltamerge.delta.commit.log_store import (
    FILE_MODE,
    FOLDER_MODE,
    commit_file,
    object_store,
    put_file,
)
from airflow_provider_deltamerge.delta.commit.transaction import Committed, commit_merge
from airflow_provider_deltamerge.delta.files.reader import read_files
from airflow_provider_deltamerge.delta.format.provenance import COMMIT_INFO_KEY
from airflow_provider_deltamerge.delta.log.merge_commits import SUBMISSION_ID
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import TargetTableError, is_final
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all
from tests.oracle import sorted_rows

INFO = {SUBMISSION_ID: "run-1"}
# PROTOCOL.md "Actions": the fields each action must carry.
REQUIRED = {
    "add": {"path", "partitionValues", "size", "modificationTime", "dataChange"},
    "remove": {"path", "dataChange"},
    "metaData": {"id", "format", "schemaString", "partitionColumns", "configuration"},
    "txn": {"appId", "version"},
}


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


def commit(target: str, *, schema: str | None = None, snapshot: Any = None, **changes: Any) -> object:
    snapshot = snapshot or read_snapshot(target)
    return commit_merge(
        snapshot,
        removed=changes.get("removed", ()),
        added=(),
        readded=changes.get("readded", ()),
        change_files=changes.get("change_files", ()),
        operation_parameters={"predicate": "[]"},
        operation_metrics={"numTargetRowsDeleted": 1},
        info=INFO,
        read=ReadSet(snapshot.version, frozenset(f.log_path for f in snapshot.files), lambda s, f: f),
        same_run=lambda info: info.get(SUBMISSION_ID) == "run-1",
        schema=schema,
        engine_info="test",
    )


def actions_of(target: str, version: int) -> list[dict[str, Any]]:
    text = (Path(target) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_a_commit_that_changes_no_data_records_snapshot_isolation_as_delta_does(tmp_path):
    # Delta downgrades a commit with no data-changing file action and no other action (an empty merge
    # recorded under skipRecordingEmptyCommits=false) to SnapshotIsolation; one that removes a file stays
    # Serializable
    target = table(tmp_path / "t")
    before = read_snapshot(target)
    assert commit(target) == Committed(before.version + 1)
    assert commit(target, removed=before.files[:1]) == Committed(before.version + 2)
    levels = [actions_of(target, v)[0]["commitInfo"]["isolationLevel"] for v in (1, 2)]
    assert levels == ["SnapshotIsolation", "Serializable"]


def test_a_schema_change_that_removes_files_is_one_merge_commit(tmp_path):
    target = table(tmp_path / "t", {"delta.enableChangeDataFeed": "false"})
    before = read_snapshot(target)
    outcome = commit(target, removed=before.files[:1], schema=with_note(before.schema_json))
    # Then: one version holds the new schema and the removed file, recorded as Delta's MERGE
    assert outcome == Committed(before.version + 1)
    actions = actions_of(target, before.version + 1)
    assert [next(iter(a)) for a in actions] == ["commitInfo", "metaData", "remove"]
    info = actions[0]["commitInfo"]
    assert (info["operation"], info["readVersion"], info["isolationLevel"]) == (
        "MERGE",
        before.version,
        "Serializable",
    )
    assert info["operationMetrics"] == {"numTargetRowsDeleted": "1"} and info[COMMIT_INFO_KEY] == INFO
    assert actions[2]["remove"]["path"] == before.files[0].log_path
    after, original = DeltaTable(target), DeltaTable(target, version=before.version)
    assert after.history(1)[0]["operation"] == "MERGE"
    assert [f.name for f in after.schema().fields] == ["id", "region", "note"]
    assert after.metadata().id == original.metadata().id
    assert after.metadata().configuration == original.metadata().configuration
    assert after.metadata().created_time == original.metadata().created_time
    assert after.metadata().partition_columns == ["region"] and after.protocol() == original.protocol()
    kept = {"eu": {"id": [2], "region": ["us"]}, "us": {"id": [1], "region": ["eu"]}}
    assert after.to_pyarrow_table().to_pydict() == {
        **kept[dict(before.files[0].partition_values)["region"]],
        "note": [None],
    }


def test_a_merge_commit_has_the_actions_and_fields_delta_writes(spark, tmp_path):
    # Given: a table partitioned by values the log must percent-encode, and a run of an Airflow task
    target = str(tmp_path / "t")
    write_deltalake(
        target,
        pa.table(
            {
                "id": pa.array([1, 2], pa.int64()),
                "p": ["a b/c=d%", "ü#?"],
                "qty": pa.array([1, 2], pa.int32()),
            }
        ),
        partition_by=["p"],
    )
    before = read_snapshot(target)
    source = tmp_path / "s.parquet"
    rows = {
        "id": pa.array([1, 3], pa.int64()),
        "p": ["a b/c=d%", "ü#?"],
        "qty": pa.array([10, 30], pa.int32()),
    }
    pq.write_table(pa.table({**rows, "note": ["n1", "n3"]}), source)
    spec = MergeSpec(
        target=target,
        source=PathSource(str(source)),
        condition="t.id = s.id AND t.p = s.p",
        clauses=(update_all(), insert_all()),
        schema_evolution=True,
    )
    identity = {"dagId": "orders", "taskId": "merge", "runId": "manual__1", "mapIndex": -1, "tryNumber": 3}
    run_merge(spark, spec, provenance=identity)
    # Then: commitInfo first, the new schema, the run as a Delta application transaction, the files
    actions = actions_of(target, before.version + 1)
    kinds = [next(iter(a)) for a in actions]
    assert kinds[:3] == ["commitInfo", "metaData", "txn"] and set(kinds[3:]) == {"remove", "add"}
    for action in actions[1:]:
        kind, body = next(iter(action.items()))
        assert REQUIRED[kind] <= set(body), f"{kind} lacks {REQUIRED[kind] - set(body)}"
    assert actions[2]["txn"]["appId"] == "airflow:orders/merge/manual__1/-1"
    assert DeltaTable(target).transaction_version("airflow:orders/merge/manual__1/-1") == 3
    removed = sorted(a["remove"]["path"] for a in actions if "remove" in a)
    assert removed == sorted(f.log_path for f in before.files if dict(f.partition_values)["p"] == "a b/c=d%")
    for add in (a["add"] for a in actions if "add" in a):
        assert add["dataChange"] is True and json.loads(add["stats"])["numRecords"] >= 1
    # Read back by deltalake (which decodes the paths) and by Spark through our reader, as the merge's rows
    expected = [
        {"id": 1, "p": "a b/c=d%", "qty": 10, "note": "n1"},
        {"id": 2, "p": "ü#?", "qty": 2, "note": None},
        {"id": 3, "p": "ü#?", "qty": 30, "note": "n3"},
    ]
    assert sorted_rows(target) == expected
    after = read_snapshot(target)
    spark_rows = read_files(spark, after, after.files).select("id", "p", "qty", "note").collect()
    assert sorted((r.asDict() for r in spark_rows), key=lambda r: r["id"]) == expected


def enable_in_commit_timestamps(target: str) -> int:
    """Turn in-commit timestamps on as Delta does on a table (deltalake cannot); the commit's ICT."""
    table = DeltaTable(target)
    metadata, version, now = table.metadata(), table.version() + 1, int(time.time() * 1000)
    configuration = {
        **metadata.configuration,
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": str(version),
        "delta.inCommitTimestampEnablementTimestamp": str(now),
    }
    actions = [
        {"commitInfo": {"inCommitTimestamp": now, "timestamp": now, "operation": "SET TBLPROPERTIES"}},
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": [],
                "writerFeatures": ["inCommitTimestamp"],
            }
        },
        {
            "metaData": {
                "id": metadata.id,
                "format": {"provider": "parquet", "options": {}},
                "schemaString": table.schema().to_json(),
                "partitionColumns": metadata.partition_columns,
                "configuration": configuration,
                "createdTime": metadata.created_time,
            }
        },
    ]
    text = "".join(json.dumps(a) + "\n" for a in actions)
    (Path(target) / "_delta_log" / f"{version:020d}.json").write_text(text)
    return now


def test_in_commit_timestamps_never_go_back(tmp_path, monkeypatch):
    # Given: a table keeping in-commit timestamps, and a clock an hour behind its last commit's
    target = table(tmp_path / "t")
    previous = enable_in_commit_timestamps(target)
    monkeypatch.setattr(commit_module.time, "time", lambda: previous / 1000 - 3600)
    outcome = commit(target)
    # Then: commitInfo comes first with a timestamp just after the previous one, which readers take
    assert isinstance(outcome, Committed)
    assert actions_of(target, outcome.version)[0]["commitInfo"]["inCommitTimestamp"] == previous + 1
    assert DeltaTable(target).history(1)[0]["timestamp"] == previous + 1


def test_a_checkpoint_is_written_every_checkpoint_interval(tmp_path):
    target = table(tmp_path / "t", {"delta.checkpointInterval": "2"})
    log = Path(target) / "_delta_log"
    outcomes = [commit(target) for _ in range(3)]
    assert outcomes == [Committed(1), Committed(2), Committed(3)]
    assert sorted(p.name for p in log.glob("*.checkpoint.parquet")) == [
        "00000000000000000002.checkpoint.parquet"
    ]
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 2
    # A reader starting from the checkpoint sees the same table
    (log / f"{0:020d}.json").unlink()
    (log / f"{1:020d}.json").unlink()
    assert DeltaTable(target).version() == 3 and len(DeltaTable(target).file_uris()) == 2


def test_a_store_without_conditional_put_commits_through_deltalake(tmp_path, monkeypatch):
    # Given: a store obstore cannot put to conditionally (HDFS, say)
    monkeypatch.setattr(commit_module, "log_store", lambda uri: None)
    target = table(tmp_path / "t")
    before = read_snapshot(target)
    # Then: files and schema commit through deltalake's transaction (recorded as WRITE), with our record
    assert commit(target, removed=before.files[:1]) == Committed(before.version + 1)
    assert commit(target, schema=with_note(before.schema_json)) == Committed(before.version + 2)
    entry = DeltaTable(target).history(1)[0]
    assert entry["operation"] == "WRITE" and entry[COMMIT_INFO_KEY] == INFO
    assert [f.name for f in DeltaTable(target).schema().fields][-1] == "note"
    # ... but a schema change that removes files, which deltalake cannot make one commit, changes nothing
    evolved = read_snapshot(target)
    with pytest.raises(TargetTableError, match="evolves the schema and rewrites files"):
        commit(target, removed=evolved.files[:1], schema=with_note(with_note(evolved.schema_json)))
    assert DeltaTable(target).version() == evolved.version


@pytest.mark.parametrize(
    ("needs", "error_class"),
    [
        ("schema_change_removing_files", "DELTAMERGE_SCHEMA_CHANGE_NEEDS_CONDITIONAL_WRITE"),
        ("deletion_vectors", "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"),
        ("column_mapping", "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"),
        ("change_data_feed", "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"),
    ],
)
def test_what_a_store_without_conditional_put_cannot_commit_is_refused_for_good(
    tmp_path, monkeypatch, needs, error_class
):
    # Given: a store obstore cannot put to conditionally (HDFS, say); a commit only our own log write makes
    monkeypatch.setattr(commit_module, "log_store", lambda uri: None)
    target = table(tmp_path / "t")
    before = read_snapshot(target)
    changes: dict[str, Any] = {
        "schema_change_removing_files": {
            "removed": before.files[:1],
            "schema": with_note(before.schema_json),
        },
        "deletion_vectors": {"readded": [{"path": before.files[0].log_path}]},
        "column_mapping": {
            "snapshot": dataclasses.replace(before, configuration=(("delta.columnMapping.mode", "name"),))
        },
        "change_data_feed": {"change_files": [object()]},
    }[needs]
    # When: the merge commits
    with pytest.raises(TargetTableError) as raised:
        commit(target, **changes)
    # Then: refused with its class, as an error that comes back on every try (Airflow does not retry it)
    assert raised.value.error_class == error_class
    assert is_final(raised.value)
    assert "Nothing was changed" in str(raised.value)
    assert DeltaTable(target).version() == before.version


@pytest.fixture
def umask_000() -> Iterator[None]:
    """The worker's umask at 000, as some containers run: every file and folder made with the default mode is
    world-writable."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_the_commit_writes_have_modes_the_umask_does_not_decide(tmp_path, umask_000):
    # Given: a table checkpointed at every version, and a umask of 000
    target = table(tmp_path / "t", {"delta.checkpointInterval": "1"})
    before = read_snapshot(target)
    # When: the merge commits
    assert commit(target, removed=before.files[:1]) == Committed(before.version + 1)
    # Then: its commit file and checkpoint are Spark's 0644, not world-writable; no staged file is left
    log = Path(target) / "_delta_log"
    written = [
        commit_file(before.version + 1),
        f"{before.version + 1:020d}.checkpoint.parquet",
        "_last_checkpoint",
    ]
    assert {name: oct(mode(log / name)) for name in written} == {name: oct(FILE_MODE) for name in written}
    assert not [p.name for p in log.iterdir() if p.name.startswith(".")]
    # And: a file our code puts into a new folder (a deletion vector, a job's report) makes it 0755
    put_file(object_store(target), "_deltamerge/reports/r1", b"{}")
    assert (mode(Path(target) / "_deltamerge"), mode(Path(target) / "_deltamerge/reports")) == (
        FOLDER_MODE,
    ) * 2
    assert mode(Path(target) / "_deltamerge/reports/r1") == FILE_MODE
    # And: a put-if-absent still refuses a taken name
    assert not put_file(object_store(target), "_deltamerge/reports/r1", b"{}", if_absent=True)
    assert (Path(target) / "_deltamerge/reports/r1").read_bytes() == b"{}"


def test_a_concurrent_schema_change_makes_the_merge_run_again(tmp_path):
    # Given: a merge read version v, then another writer added a column
    target = table(tmp_path / "t")
    base = read_snapshot(target)
    DeltaTable(target).alter.add_columns([Field("other", "string")])
    read = ReadSet(base.version, frozenset(), lambda s, f: [])
    # Then: never rebased over, whatever it read
    decision = check_winning_commits(base, read, same_run=lambda info: False)
    assert isinstance(decision, Rerun) and "schema" in decision.reason


def test_racing_commits_of_one_version_have_one_winner(tmp_path):
    # Given: two commits written for the same version at once
    from concurrent.futures import ThreadPoolExecutor

    from airflow_provider_deltamerge.delta.commit.log_store import commit_file, log_store

    target = table(tmp_path / "t")
    store = log_store(target)
    assert store is not None
    name = commit_file(DeltaTable(target).version() + 1)
    payloads = [
        json.dumps({"commitInfo": {"writer": i, "timestamp": int(time.time() * 1000)}}).encode()
        for i in range(8)
    ]
    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda data: store.put_if_absent(name, data), payloads))
    # Then: exactly one lands, whole
    assert won.count(True) == 1
    assert (Path(target) / "_delta_log" / name).read_bytes() == payloads[won.index(True)]
