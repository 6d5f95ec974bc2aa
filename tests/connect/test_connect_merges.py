"""Merges through a real Spark Connect server: the engine's answers must not depend on the session's kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.connect.session import SparkSession as ConnectSession

from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.resolve.plan_text import has_subquery, projection_plan, top_node
from airflow_provider_deltamerge.engine.source.held import estimated_bytes
from airflow_provider_deltamerge.exceptions import ClauseResolutionError, MergeExecutionError
from airflow_provider_deltamerge.metrics import NUM_TARGET_ROWS_DELETED, NUM_TARGET_ROWS_INSERTED
from airflow_provider_deltamerge.session_kind import is_connect
from airflow_provider_deltamerge.spec import (
    MergeClause,
    MergeSpec,
    PathSource,
    delete,
    delete_by_source,
    insert_all,
    update,
    update_all,
)
from bench.connect_calls import timing_connect_calls
from tests.conftest import make_table, table_state, write_extract
from tests.oracle import sorted_rows

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def remote(connect_url: str) -> Iterator[ConnectSession]:
    """A Connect session, as the job has in its own process. Beside the suite's classic session: built by
    Connect's own builder (the classic one refuses), with PySpark's functions in their Connect mode for the
    module's duration only (PySpark picks the mode from this variable, which the job's builder sets)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
        session = ConnectSession.builder.remote(connect_url).getOrCreate()
        assert is_connect(session)
        yield session
        session.stop()


def _rows(table: str) -> list[tuple[object, ...]]:
    return sorted(tuple(row.values()) for row in sorted_rows(table))


def _spec(target: str, source: str, *clauses: MergeClause, schema_evolution: bool = False) -> MergeSpec:
    return MergeSpec(
        target=target,
        source=PathSource(source),
        condition="t.id = s.id",
        clauses=clauses,
        schema_evolution=schema_evolution,
    )


def test_upsert_updates_and_inserts(remote: SparkSession, tmp_path: Path) -> None:
    # Given: a table of ids 0-9 (qty id*10) and a source updating id 1 and adding id 12
    target = make_table(tmp_path / "t")
    source = write_extract(tmp_path / "s.parquet", [(1, 5, "eu"), (12, 7, "us")])
    # When
    result = run_merge(remote, _spec(target, source, update_all(), insert_all()))
    # Then: one commit with Delta's MERGE operation, and exactly these rows changed
    expected = [(i, i * 10, "eu" if i % 2 == 0 else "us") for i in range(10) if i != 1]
    assert _rows(target) == sorted([*expected, (1, 5, "eu"), (12, 7, "us")])
    assert result.version == 1 and result.metrics[NUM_TARGET_ROWS_INSERTED] == 1
    assert DeltaTable(target).history(1)[0]["operation"] == "MERGE"


def test_insert_only_appends_unmatched_rows(remote: SparkSession, tmp_path: Path) -> None:
    target = make_table(tmp_path / "t")
    source = write_extract(tmp_path / "s.parquet", [(3, 1, "eu"), (20, 2, "us")])
    result = run_merge(remote, _spec(target, source, insert_all()))
    assert result.executor == "insert_only"
    assert (20, 2, "us") in _rows(target) and (3, 30, "us") in _rows(target) and len(_rows(target)) == 11


def test_delete_and_not_matched_by_source(remote: SparkSession, tmp_path: Path) -> None:
    # Given: the source holds ids 0-4; id 0 is deleted by a matched clause, ids 5-9 vanish upstream
    target = make_table(tmp_path / "t")
    source = write_extract(tmp_path / "s.parquet", [(i, i, "eu") for i in range(5)])
    spec = _spec(target, source, delete(condition="s.id = 0"), update({"qty": "s.qty"}), delete_by_source())
    # When
    result = run_merge(remote, spec)
    # Then
    assert _rows(target) == [(i, i, "eu" if i % 2 == 0 else "us") for i in range(1, 5)]
    assert result.metrics[NUM_TARGET_ROWS_DELETED] == 6


def test_schema_evolution_adds_the_new_column(remote: SparkSession, tmp_path: Path) -> None:
    target = make_table(tmp_path / "t")
    source = write_extract(
        tmp_path / "s.parquet", [(1, 5, "eu")], note=pa.array(["new"]), qty2=pa.array([1.5])
    )
    run_merge(remote, _spec(target, source, update_all(), insert_all(), schema_evolution=True))
    schema = [f.name for f in DeltaTable(target).schema().fields]
    assert schema == ["id", "qty", "region", "note", "qty2"]
    assert (1, 5, "eu", "new", 1.5) in _rows(target) and (2, 20, "eu", None, None) in _rows(target)


@pytest.mark.parametrize(
    ("condition", "error_class"),
    [
        ("rand() > 0.5", "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED"),
        ("max(s.qty) > 1", "DELTA_AGGREGATION_NOT_SUPPORTED"),
        ("s.id IN (SELECT 1)", "DELTA_UNSUPPORTED_SUBQUERY"),
        # Non-deterministic too: Delta refuses these for that, the first of its checks, and so does the engine
        # on a classic session (tests/engine/test_resolution.py, against Delta's runtime); on Connect the
        # engine tells an expression's determinism only by sorting on it, which Spark refuses for a subquery
        # or an aggregate, so they are refused for those (docs/spark-connect.md, Limits)
        ("s.id IN (SELECT 1) AND rand() > 0.5", "DELTA_UNSUPPORTED_SUBQUERY"),
        ("max(s.qty) > rand()", "DELTA_AGGREGATION_NOT_SUPPORTED"),
    ],
    ids=[
        "non-deterministic",
        "aggregate",
        "subquery",
        "non-deterministic-subquery",
        "non-deterministic-aggregate",
    ],
)
def test_a_condition_delta_refuses_is_refused_and_nothing_changes(
    remote: SparkSession, tmp_path: Path, condition: str, error_class: str
) -> None:
    # Given: an upsert whose MATCHED clause's condition Delta refuses (checked with the clauses' values in
    # one analysis on Connect, and on its own only when that analysis does not clear it)
    target = make_table(tmp_path / "t")
    before = table_state(target)
    source = write_extract(tmp_path / "s.parquet", [(1, 5, "eu")])
    # When / Then
    with pytest.raises(ClauseResolutionError, match="clause 1") as raised:
        run_merge(remote, _spec(target, source, update_all(condition=condition), insert_all()))
    assert raised.value.error_class == error_class
    assert table_state(target) == before


def test_a_row_breaking_a_check_constraint_fails_with_the_stored_rule_and_the_row(
    remote: SparkSession, tmp_path: Path
) -> None:
    # Given: a table whose CHECK constraint keeps qty under 100 (added by delta-rs, as a user's tool would),
    # and a source setting id 1's qty to 500
    target = make_table(tmp_path / "t")
    DeltaTable(target).alter.add_constraint({"small_qty": "qty < 100"})
    before = table_state(target)
    source = write_extract(tmp_path / "s.parquet", [(1, 500, "us"), (12, 7, "us")])
    # When / Then: Delta's class; with no parser in the client, the rule as the table stores it and the
    # table's columns of the row as JSON (docs/spark-connect.md, Limits), not the writer's own columns
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(remote, _spec(target, source, update_all(), insert_all()))
    assert raised.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert str(raised.value).startswith(
        "[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES] CHECK constraint small_qty qty < 100 violated by row with "
        "values:\n"
        '{"id":1,"qty":500,"region":"us"}\nThe merge wrote no commit.'
    )
    assert table_state(target) == before


@pytest.mark.parametrize(
    ("texts", "top", "deterministic", "subquery", "analyses"),
    [
        (["id + 1", "upper(region)"], "Project", True, False, 1),
        (["id", "rand() > 0.5"], "Project", False, False, 1),
        # none of these can be a sort key: the projection analysed again, non-deterministic (the safe answer)
        (["map(id, region)"], "Project", False, False, 2),
        (["max(qty)"], "Aggregate", False, False, 2),
        (["id IN (SELECT 1)"], "Project", False, True, 2),
    ],
    ids=["deterministic", "non-deterministic", "map", "aggregate", "subquery"],
)
def test_one_analysis_tells_the_values_plan_and_determinism(
    remote: SparkSession, texts: list[str], top: str, deterministic: bool, subquery: bool, analyses: int
) -> None:
    # Given: an empty frame of the orders' columns, as resolution analyses (no job)
    frame = remote.createDataFrame([], "id long, qty long, region string").alias("s")
    # When
    with timing_connect_calls() as timed:
        plan, found_deterministic = projection_plan(frame, texts)
    # Then: the plan's top node, its determinism and its subqueries, in one analysis where Spark can sort by
    # the values
    assert (top_node(plan), found_deterministic, has_subquery(plan)) == (top, deterministic, subquery)
    assert sum(len(s) for (kind, _), s in timed.calls.items() if kind == "analysis") == analyses


def test_the_overhead_bench_times_each_query_of_a_merge_by_its_call_site(
    remote: SparkSession, tmp_path: Path
) -> None:
    # Given: an upsert, timed by the overhead benchmark's recorder of Connect calls (bench/connect_calls.py)
    target = make_table(tmp_path / "t")
    source = write_extract(tmp_path / "s.parquet", [(1, 5, "eu"), (12, 7, "us")])
    # When
    with timing_connect_calls() as timed:
        run_merge(remote, _spec(target, source, update_all(), insert_all()))
    remote.range(1).collect()  # after the block: not recorded
    # Then: the write is a query of its own, timed; it is the merge's one query over the table's rows (the
    # source's rows were counted while Connect materialized it, so the small merge needs no phase 1)
    queries = {site: seconds for (kind, site), seconds in timed.calls.items() if kind == "query"}
    assert len(queries["delta/files/writer.py:write_files"]) == 1
    assert "engine/execute/touched_files.py:_collected_files" not in queries, queries
    # Integer keys select their files on the driver, and an observation asks the server nothing; the held
    # source's keys are read where it is held (no append path's bounds, no key tuples' query)
    assert "engine/plan/pruning.py:select" not in queries, queries
    assert "engine/plan/pruning.py:_key_sets_from_tuples" not in queries, queries
    assert "engine/execute/append.py:append_if_nothing_matches" not in queries, queries
    analyses = {site for kind, site in timed.calls if kind == "analysis"}
    # The ON condition is cleared in the analysis of the values its clauses assign, not on its own; the
    # writer is told its columns
    assert "engine/resolve/resolution.py:_check" not in analyses, analyses
    assert "delta/files/writer.py:write_files" not in analyses, analyses
    # The source's schema is read once, before the plan; its held frame's is known (MergePlan.source_schema)
    # Resolution analyses the values of each group of clauses that see the same columns once: MATCHED (the
    # target's and the source's) and NOT MATCHED (the source's)
    assert len(timed.calls[("analysis", "engine/resolve/plan_text.py:analyzed_plan")]) == 2
    assert "engine/plan/pruning.py:_analyse" not in analyses, analyses
    assert (
        "engine/observed.py:_observed_on_connect" not in analyses
        and "engine/observed.py:observe" not in analyses
    )
    assert all(s > 0 for seconds in queries.values() for s in seconds)
    assert any(kind == "analysis" for kind, _ in timed.calls)
    assert "(outside the package)" not in {site for _, site in timed.calls}


def test_a_condition_checked_on_its_own_is_analysed_once(remote: SparkSession, tmp_path: Path) -> None:
    # Given: a MATCHED clause that assigns a non-deterministic value, so neither its condition nor ON is
    # cleared with the values (one non-deterministic value makes all of them count as one): each is checked on
    # its own
    target = make_table(tmp_path / "t")
    source = write_extract(tmp_path / "s.parquet", [(1, 5, "eu"), (2, 1, "us")])
    clause = update({"qty": "s.qty + cast(rand() * 0 AS BIGINT)"}, condition="s.qty > 1")
    # When
    with timing_connect_calls() as timed:
        run_merge(remote, _spec(target, source, clause))
    # Then: the MATCHED values once, then the clause's condition and ON once each, a condition's plan and
    # determinism in one analysis (plan_text.projection_plan); the merge did its work
    assert len(timed.calls[("analysis", "engine/resolve/plan_text.py:analyzed_plan")]) == 3
    qty = {row[0]: row[1] for row in _rows(target)}
    assert (qty[1], qty[2]) == (5, 20)


def test_the_held_source_is_gated_on_sparks_estimate_as_on_a_classic_session(
    remote: SparkSession, tmp_path: Path
) -> None:
    # Given: a one-row extract, and a file of 200,000 rows (several MiB)
    small = write_extract(tmp_path / "s.parquet", [(1, 5, "eu")])
    large = tmp_path / "large.parquet"
    pq.write_table(pa.table({"id": range(200_000), "pad": [f"{n:032x}" for n in range(200_000)]}), large)
    # When / Then: the Connect server's explained estimate is the files' size, as a classic session's is
    # (exact in bytes, to the tenth of the unit it prints a larger size in)
    assert estimated_bytes(remote.read.parquet(small)) == Path(small).stat().st_size
    estimate = estimated_bytes(remote.read.parquet(str(large)))
    assert estimate == pytest.approx(large.stat().st_size, rel=0.05)
    assert estimate > 2**20
