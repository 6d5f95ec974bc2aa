"""Commits read by version: each commitInfo carries the version of the file it came from, even when a
commit lands while the log is being read (``DeltaTable.history()`` would shift every label by one)."""

from __future__ import annotations

from airflow_provider_deltamerge.delta.log.commit_match import CommitCriteria
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.merge_commits import find_commit, find_merge_commit_where
from tests.airflow.conftest import make_table, merge_commit

RUN = {"dagId": "d", "taskId": "t", "mapIndex": -1, "tryNumber": 1}


def test_each_commit_is_read_with_the_version_of_its_own_file(tmp_path):
    table = make_table(tmp_path / "t")
    for run in ("r1", "r2", "r3"):
        merge_commit(table, metrics={"numTargetRowsInserted": 1}, provenance={**RUN, "runId": run})
    entries = list(LogReader(table).recent_commits(10))
    assert [e["version"] for e in entries] == [3, 2, 1, 0]
    assert [e.get("deltamerge", {}).get("runId") for e in entries] == ["r3", "r2", "r1", None]
    assert [e["version"] for e in LogReader(table).recent_commits(2)] == [3, 2]


def test_a_commit_landing_during_the_read_is_not_taken_for_an_older_version(tmp_path, monkeypatch):
    # Given: the reader found version 1 as the newest, then run r2's commit landed as version 2
    table = make_table(tmp_path / "t")
    merge_commit(table, metrics={"numTargetRowsInserted": 1}, provenance={**RUN, "runId": "r1"})
    monkeypatch.setattr(LogReader, "latest_version", lambda self: 1)
    merge_commit(table, metrics={"numTargetRowsInserted": 7}, provenance={**RUN, "runId": "r2"})
    # Then: r2's commit is not found yet (a sensor polls again), and never as version 1
    assert find_commit(table, CommitCriteria(run_id="r2")) is None
    assert find_merge_commit_where(table, lambda info: info.get("runId") == "r2") is None
    found = find_commit(table, CommitCriteria(run_id="r1"))
    assert found is not None and found.version == 1
