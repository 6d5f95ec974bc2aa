"""The history's page reader on real Delta tables: newest first, our commits told from other writers', pages
that end where log clean-up removed files, and the cost of a page in a 10,000-commit log (printed)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.delta.log.log_reader import commit_path
from airflow_provider_deltamerge.exceptions import TargetTableError
from airflow_provider_deltamerge.history.log_pages import DeltaLog
from airflow_provider_deltamerge.metrics import (
    EXECUTION_TIME_MS,
    NUM_TARGET_FILES_ADDED,
    NUM_TARGET_ROWS_INSERTED,
)
from tests.history.delta_logs import long_log, other_writer_commit, table_with_merges


def test_pages_list_commits_newest_first_and_tell_our_merges_from_other_writers(tmp_path):
    # Given: version 0 by delta-rs, merges 1-5 with our provenance record, version 6 appended by delta-rs
    table = table_with_merges(tmp_path / "orders", 5)
    other_writer_commit(table)
    log = DeltaLog(table)
    # When: the history is read three commits a page
    pages = [log.page(n, page_size=3) for n in (1, 2, 3)]
    # Then: versions 6..0 in order, split 3/3/1, and only the merges carry a DAG run and merge metrics
    assert [[e.version for e in p.entries] for p in pages] == [[6, 5, 4], [3, 2, 1], [0]]
    assert {p.pages for p in pages} == {3} and {p.latest_version for p in pages} == {6}
    newest, merge_5 = pages[0].entries[0], pages[0].entries[1]
    assert not newest.ours and newest.numbers[NUM_TARGET_ROWS_INSERTED] == 1  # delta-rs' num_added_rows
    assert merge_5.ours and merge_5.provenance["runId"] == "scheduled__0005"
    assert merge_5.numbers[NUM_TARGET_ROWS_INSERTED] == 2 and merge_5.numbers[EXECUTION_TIME_MS] == 1005
    assert merge_5.rows_changed == 2 + 2 + 1 and merge_5.time is not None
    assert [e.ours for e in pages[2].entries] == [False]


def test_a_page_past_the_last_is_empty(tmp_path):
    log = DeltaLog(table_with_merges(tmp_path / "orders", 2))
    assert log.page(9, page_size=50).entries == []


@pytest.mark.parametrize("commits", [1, 2, 99, 100, 101, 257])
def test_the_latest_version_is_found_above_the_checkpoint_as_deltalake_finds_it(tmp_path, commits):
    table = long_log(tmp_path / "t", commits, since_checkpoint=commits // 3)
    assert DeltaLog(table).latest_version() == DeltaTable(table).version() == commits


def test_a_page_ends_where_log_clean_up_removed_the_older_commits(tmp_path):
    # Given: a log checkpointed at version 160 whose commits below 150 were removed, as log clean-up does
    table = long_log(tmp_path / "t", 200, since_checkpoint=40)
    for version in range(150):
        (Path(table) / commit_path(version)).unlink()
    # When: the page holding version 150 and older ones is read
    page = DeltaLog(table).page(2, page_size=40)  # versions 160..121
    # Then: it holds what is left and says that older commits are gone
    assert [e.version for e in page.entries] == list(range(160, 149, -1))
    assert page.older_removed
    assert page.entries[0].numbers[NUM_TARGET_FILES_ADDED] == 2


def test_a_path_without_a_delta_log_is_a_product_error(tmp_path):
    with pytest.raises(TargetTableError, match="is not a Delta table"):
        DeltaLog(str(tmp_path)).latest_version()


def test_a_page_of_a_10000_commit_log_reads_only_its_commits(tmp_path):
    # Speed is measured and printed, never asserted (STYLE.md: speed belongs in bench/).
    table = long_log(tmp_path / "t", 10_000)
    assert DeltaTable(table).version() == 10_000
    log = DeltaLog(table)
    timings = {}
    for page in (1, 100, 200):
        started = time.perf_counter()
        entries = log.page(page).entries
        timings[page] = time.perf_counter() - started
        assert [e.version for e in entries] == list(range(10_000 - (page - 1) * 50, 10_000 - page * 50, -1))[
            : len(entries)
        ]
    assert len(log.page(201).entries) == 1  # version 0
    print(
        "history page of a 10,000-commit log: "
        + ", ".join(f"page {p} {seconds * 1000:.1f} ms" for p, seconds in timings.items())
    )
