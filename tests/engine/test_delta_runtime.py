"""Against Delta Lake's own runtime: each spec run by our engine, by the delta-spark backend and by Delta's
own ``MERGE INTO``, on identical tables written with deltalake, in the tests' session (which has Delta's
jars, extension and catalog). The tables are read back with deltalake, a reader independent of all three
runners.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine.backends import delta_spark as backend
from airflow_provider_deltamerge.engine.backends.delta_spark import missing_delta_runtime
from airflow_provider_deltamerge.exceptions import (
    ClauseResolutionError,
    DeltaMergeError,
    DeltaRuntimeError,
    MergeExecutionError,
)
from airflow_provider_deltamerge.spec import (
    MergeClause,
    MergeSpec,
    PathSource,
    delete,
    delete_by_source,
    insert,
    insert_all,
    update,
    update_all,
    update_by_source,
)
from airflow_provider_deltamerge.spec.json_form import spec_to_json
from tests.conftest import make_table
from tests.engine.delta_outcomes import (
    BACKEND,
    ENGINE,
    RETRY,
    ROW_COUNTS,
    RUNNERS,
    SQL,
    catalogued_sentence,
    delta_error_classes,
    run_case,
)
from tests.engine.test_bad_input import MAX_MESSAGE_LINES
from tests.engine.test_delta_spark_backend import (
    DELTA_CONFS,
    SQL_METRICS_ONLY,
    DeltaConfiguredSession,
)
from tests.oracle import sorted_rows
from tests.run_profile import of_the_day

TARGET = pa.table(
    {
        "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "qty": pa.array([10, 20, 30, 40, 50], pa.int32()),
        "region": pa.array(["eu", "us", "eu", "us", "eu"]),
    }
)
TARGET_ROWS = [(1, 10, "eu"), (2, 20, "us"), (3, 30, "eu"), (4, 40, "us"), (5, 50, "eu")]
SOURCE = pa.table(
    {
        "id": pa.array([2, 4, 6], pa.int64()),
        "qty": pa.array([21, 0, 60], pa.int32()),
        "region": pa.array(["us", "us", "eu"]),
    }
)
# Issue 18's retry: the first run deletes (1, 10) and inserts 3; a second merge would insert (1, -1).
RETRIED_TARGET = pa.table({"id": pa.array([1, 2], pa.int64()), "qty": pa.array([10, 20], pa.int32())})
RETRIED_SOURCE = pa.table({"id": pa.array([1, 3], pa.int64()), "qty": pa.array([-1, 30], pa.int32())})
RUN = {"dagId": "orders", "taskId": "merge", "runId": "manual__1", "mapIndex": -1}

# ROW_COUNTS (Delta's row counts of a MERGE commit) are compared as they are here, copied and output rows
# too, because each runner rewrites exactly the files with a matched row (one file, or one per partition).


def changed(*, inserted: int = 0, updated: int = 0, deleted: int = 0) -> dict[str, int]:
    return {
        m.NUM_TARGET_ROWS_INSERTED: inserted,
        m.NUM_TARGET_ROWS_UPDATED: updated,
        m.NUM_TARGET_ROWS_DELETED: deleted,
    }


@dataclass(frozen=True)
class Case:
    """A merge's clauses and source, and what Delta's MERGE makes of them: rows and counts, or an error."""

    clauses: tuple[MergeClause, ...]
    source: pa.Table = field(default_factory=lambda: SOURCE)
    target: pa.Table = field(default_factory=lambda: TARGET)
    partition_by: tuple[str, ...] = ()
    schema_evolution: bool = False
    rows: list[tuple[Any, ...]] = field(default_factory=list)  # the target's rows after the merge, by id
    counts: Mapping[str, int] = field(default_factory=dict)
    error: tuple[type[DeltaMergeError], str] | None = None  # our error, and Delta's class for it
    commits: bool = True  # False: Delta skips the empty commit (commitIfNeeded), and so do the others
    catalog_table: str | None = None  # the backend names its target by this catalog table, at its path


CASES = {
    "upsert": Case(
        (update_all(), insert_all()),
        rows=[(1, 10, "eu"), (2, 21, "us"), (3, 30, "eu"), (4, 0, "us"), (5, 50, "eu"), (6, 60, "eu")],
        counts=changed(inserted=1, updated=2),
    ),
    "conditional-update-delete-insert": Case(
        (
            update({"qty": "t.qty + s.qty"}, condition="s.qty > 0"),
            delete(condition="s.qty = 0"),
            insert_all(condition="s.region = 'eu'"),
        ),
        rows=[(1, 10, "eu"), (2, 41, "us"), (3, 30, "eu"), (5, 50, "eu"), (6, 60, "eu")],
        counts=changed(inserted=1, updated=1, deleted=1),
    ),
    "delete-only": Case(
        (delete(),),
        rows=[(1, 10, "eu"), (3, 30, "eu"), (5, 50, "eu")],
        counts=changed(deleted=2),
    ),
    "insert-only": Case(
        (insert({"id": "s.id", "qty": "s.qty * 2", "region": "upper(s.region)"}),),
        rows=[*TARGET_ROWS, (6, 120, "EU")],
        counts=changed(inserted=1),
    ),
    "not-matched-by-source-update-and-delete": Case(
        (update_all(), update_by_source({"qty": "-1"}, condition="t.id = 1"), delete_by_source()),
        rows=[(1, -1, "eu"), (2, 21, "us"), (4, 0, "us")],
        counts={
            **changed(updated=3, deleted=2),
            m.NUM_TARGET_ROWS_MATCHED_UPDATED: 2,
            m.NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_UPDATED: 1,
            m.NUM_TARGET_ROWS_NOT_MATCHED_BY_SOURCE_DELETED: 2,
        },
    ),
    "schema-evolution": Case(
        (update_all(), insert_all()),
        source=SOURCE.append_column("note", pa.array(["changed", None, "new"])),
        schema_evolution=True,
        rows=[
            (1, 10, "eu", None),
            (2, 21, "us", "changed"),
            (3, 30, "eu", None),
            (4, 0, "us", None),
            (5, 50, "eu", None),
            (6, 60, "eu", "new"),
        ],
        counts=changed(inserted=1, updated=2),
    ),
    "partitioned-upsert": Case(
        (update_all(), insert_all()),
        partition_by=("region",),
        rows=[(1, 10, "eu"), (2, 21, "us"), (3, 30, "eu"), (4, 0, "us"), (5, 50, "eu"), (6, 60, "eu")],
        counts=changed(inserted=1, updated=2),
    ),
    "retried-delete-update-insert": Case(
        (delete(condition="s.qty < 0"), update_all(), insert_all()),
        target=RETRIED_TARGET,
        source=RETRIED_SOURCE,
        rows=[(2, 20), (3, 30)],  # after the retry too: (1, -1) does not come back
        counts=changed(inserted=1, deleted=1),
    ),
    "catalog-target-upsert": Case(
        (update_all(), insert_all()),
        catalog_table="deltamerge_runtime_orders",
        rows=[(1, 10, "eu"), (2, 21, "us"), (3, 30, "eu"), (4, 0, "us"), (5, 50, "eu"), (6, 60, "eu")],
        counts=changed(inserted=1, updated=2),
    ),
    # No source row matches and there is no insert: Delta's merge writes no file and commits nothing.
    "nothing-matches": Case(
        (update_all(),),
        source=SOURCE.set_column(0, "id", pa.array([7, 8, 9], pa.int64())),
        rows=TARGET_ROWS,
        commits=False,
    ),
    "multiple-matches": Case(
        (update_all(), insert_all()),
        source=pa.concat_tables([SOURCE, SOURCE.slice(0, 1)]),  # id 2 twice
        error=(MergeExecutionError, "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"),
    ),
    "unresolvable-column": Case(
        (update({"qty": "s.nope"}),),
        error=(ClauseResolutionError, "DELTA_MERGE_UNRESOLVED_EXPRESSION"),
    ),
    "cast-overflow": Case(
        (update({"qty": "s.qty"}),),
        # BIGINT into an INT column: Delta's ANSI store assignment fails the write (CheckOverflowInTableWrite)
        source=SOURCE.set_column(1, "qty", pa.array([3_000_000_000, 0, 60], pa.int64())),
        error=(MergeExecutionError, "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE"),
    ),
}
# Each case's three merges cost about 30 s of a CI run's worker: CI runs one case of each kind a day, another
# each day (``of_the_day``, tests/run_profile.py), and the partitioned upsert, which a test of its own reads;
# locally every case runs.
MERGING = sorted(
    {
        "partitioned-upsert",
        *of_the_day([name for name, case in CASES.items() if case.error is None and case.commits]),
    }
)
NOT_COMMITTING = of_the_day([name for name, case in CASES.items() if case.error is None and not case.commits])
FAILING = of_the_day([name for name, case in CASES.items() if case.error is not None])


@dataclass(frozen=True)
class DeltaRuns:
    """What the session lacked of Delta's runtime, and per case each runner's outcome and target table."""

    missing: list[str]
    outcomes: Mapping[str, Mapping[str, Any]]
    targets: Mapping[str, Mapping[str, str]]


@pytest.fixture(scope="module")
def delta_runs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DeltaRuns:
    """The run's cases' three merges each, run once for the module in the tests' Delta session."""
    folder = tmp_path_factory.mktemp("delta-runtime")
    targets: dict[str, dict[str, str]] = {}
    specs: dict[str, dict[str, str]] = {}
    tables: dict[str, str] = {}  # catalog name: path, registered in the session for the runs
    for name in [*MERGING, *NOT_COMMITTING, *FAILING]:
        case = CASES[name]
        source = folder / f"{name}.parquet"
        pq.write_table(case.source, source)
        partition_by = list(case.partition_by) or None
        targets[name] = {
            runner: make_table(folder / name / runner, case.target, partition_by=partition_by)
            for runner in RUNNERS
        }
        named = dict(targets[name])
        if case.catalog_table is not None:
            tables[case.catalog_table] = named[BACKEND]
            named[BACKEND] = case.catalog_table
        specs[name] = {
            runner: spec_to_json(
                MergeSpec(
                    target=target,
                    source=PathSource(str(source)),
                    condition="t.id = s.id",
                    clauses=case.clauses,
                    schema_evolution=case.schema_evolution,
                )
            )
            for runner, target in named.items()
        }
    for name, path in tables.items():
        spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{path}'")
    try:
        outcomes = {name: run_case(spark, case_specs, RUN) for name, case_specs in specs.items()}
    finally:
        for name in tables:
            spark.sql(f"DROP TABLE {name}")
    return DeltaRuns(list(missing_delta_runtime(spark)), outcomes, targets)


def rows_by_id(table: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(row.values()) for row in sorted_rows(table)), key=itemgetter(0))


# --- the runtime check ------------------------------------------------------------------------------------


def test_the_delta_session_passes_the_runtime_check(delta_runs):
    # The job's session has Delta's jars (found on the JVM's classpath), extension, catalog and package,
    # with a Spark that delta-spark declares it supports: nothing may be missing.
    assert delta_runs.missing == []


@pytest.mark.parametrize("spark_version", ["3.5.0", "99.0.0"])
def test_a_spark_that_the_installed_delta_spark_does_not_support_is_refused(spark_version):
    # Given: the installed delta-spark's own declaration of the pyspark versions it works with
    supported = backend._delta_spark_range()
    assert supported is not None, "delta-spark declares no pyspark range: a mismatch could not be refused"
    if supported.contains(spark_version, prereleases=True):
        pytest.fail(f"delta-spark {importlib.metadata.version('delta-spark')} claims Spark {spark_version}")
    # When: a session with Delta's confs runs that Spark
    session: Any = DeltaConfiguredSession(DELTA_CONFS, spark_version)
    # Then: refused before Delta's jars meet a Spark they were not built for
    with pytest.raises(DeltaRuntimeError) as raised:
        backend.require_delta_runtime(session)
    assert f"this session runs Spark {spark_version}" in raised.value.message
    assert f"({supported})" in raised.value.message
    assert raised.value.error_class == "DELTA_RUNTIME_MISSING"


# --- merges that commit ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MERGING)
def test_the_three_merges_leave_the_expected_rows(delta_runs, name):
    outcomes, targets = delta_runs.outcomes[name], delta_runs.targets[name]
    failed = {runner: outcomes[runner] for runner in RUNNERS if "error" in outcomes[runner]}
    assert failed == {}
    rows = {runner: rows_by_id(targets[runner]) for runner in RUNNERS}
    assert rows == dict.fromkeys(RUNNERS, CASES[name].rows)


@pytest.mark.parametrize("name", MERGING)
def test_the_three_merges_count_rows_alike(delta_runs, name):
    engine, backend_run, sql = (delta_runs.outcomes[name][runner] for runner in RUNNERS)
    delta_counts = {k: int(v) for k, v in sql["commit"]["operationMetrics"].items() if k in ROW_COUNTS}
    # Delta records every one of them in its MERGE commit (DeltaOperationMetrics.MERGE), so none is skipped
    assert set(delta_counts) == set(ROW_COUNTS)
    assert {k: delta_counts[k] for k in CASES[name].counts} == CASES[name].counts
    assert {k: engine["metrics"][k] for k in ROW_COUNTS} == delta_counts
    assert {k: backend_run["metrics"][k] for k in ROW_COUNTS} == delta_counts


@pytest.mark.parametrize("name", MERGING)
def test_backend_metrics_are_its_commits_in_the_engines_shape(delta_runs, name):
    engine, backend_run = delta_runs.outcomes[name][ENGINE], delta_runs.outcomes[name][BACKEND]
    commit = backend_run["commit"]  # the table's newest commit, as Delta's own history() reads it
    assert (commit["operation"], commit["version"], backend_run["version"]) == ("MERGE", 1, 1)
    recorded = {k: int(v) for k, v in commit["operationMetrics"].items() if k in m.METRIC_DESCRIPTIONS}
    assert set(ROW_COUNTS) <= set(recorded)
    assert {k: backend_run["metrics"][k] for k in recorded} == recorded
    # One XCom shape whichever backend ran: the engine's keys, each measured (what Delta's commit leaves out
    # from Delta's own command); ON is t.id = s.id, no target-only predicate, so Delta skipped no file
    assert set(backend_run["metrics"]) == set(engine["metrics"])
    assert {k for k, v in backend_run["metrics"].items() if v is None} == set()
    skipping = (m.NUM_TARGET_FILES_AFTER_SKIPPING, m.NUM_TARGET_BYTES_AFTER_SKIPPING)
    assert [backend_run["metrics"][k] for k in skipping] == [
        backend_run["metrics"][k]
        for k in (m.NUM_TARGET_FILES_BEFORE_SKIPPING, m.NUM_TARGET_BYTES_BEFORE_SKIPPING)
    ]
    # deltalake wrote one file, or one per partition, at version 0
    files = len(DeltaTable(delta_runs.targets[name][BACKEND], version=0).file_uris())
    assert backend_run["metrics"][m.NUM_TARGET_FILES_BEFORE_SKIPPING] == files
    # Delta's runtime reads the engine's commit as the MERGE it is
    assert (engine["commit"]["operation"], engine["commit"]["version"], engine["version"]) == ("MERGE", 1, 1)


@pytest.mark.parametrize("name", MERGING)
def test_a_retry_of_the_same_run_returns_the_first_commit(delta_runs, name):
    first, retry = delta_runs.outcomes[name][BACKEND], delta_runs.outcomes[name][RETRY]
    assert (first["alreadyCommitted"], retry["alreadyCommitted"]) == (False, True)
    assert retry["version"] == first["version"]
    assert DeltaTable(delta_runs.targets[name][BACKEND]).version() == first["version"]  # no second commit
    # The retry ran no command: what only Delta's SQL metrics hold is not measured there, the rest the same
    assert {k: v for k, v in retry["metrics"].items() if k not in SQL_METRICS_ONLY} == {
        k: v for k, v in first["metrics"].items() if k not in SQL_METRICS_ONLY
    }
    assert {retry["metrics"][k] for k in SQL_METRICS_ONLY} == {None}


def test_a_partitioned_target_s_partitions_are_counted_as_the_engine_counts_them(delta_runs):
    engine, backend_run = (delta_runs.outcomes["partitioned-upsert"][runner] for runner in (ENGINE, BACKEND))
    # Delta rewrites the us file (ids 2 and 4 matched) and writes the insert (id 6) into eu
    partitions = {m.NUM_TARGET_PARTITIONS_REMOVED_FROM: 1, m.NUM_TARGET_PARTITIONS_ADDED_TO: 2}
    assert {k: backend_run["metrics"][k] for k in partitions} == partitions
    assert {k: engine["metrics"][k] for k in partitions} == partitions
    assert backend_run["metrics"][m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 2


# --- merges that commit nothing -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NOT_COMMITTING)
def test_a_merge_that_changes_nothing_commits_nothing(delta_runs, name):
    outcomes, targets = delta_runs.outcomes[name], delta_runs.targets[name]
    for runner in RUNNERS:
        target = targets[runner]
        assert (runner, DeltaTable(target).version(), rows_by_id(target)) == (runner, 0, CASES[name].rows)
    assert [outcomes[runner]["committed"] for runner in (ENGINE, BACKEND, RETRY)] == [False, False, False]
    assert outcomes[SQL]["commit"]["version"] == 0  # Delta's own MERGE INTO skipped the empty commit too


@pytest.mark.parametrize("name", NOT_COMMITTING)
def test_a_merge_without_commit_reports_deltas_own_command_metrics(delta_runs, name):
    metrics = delta_runs.outcomes[name][BACKEND]["metrics"]
    assert metrics[m.NUM_SOURCE_ROWS] == CASES[name].source.num_rows  # no commit records it: Delta's command
    assert metrics[m.EXECUTION_TIME_MS] > 0
    # Nothing landed since version 0, so Delta read that snapshot: its files and bytes, as deltalake has them
    adds = pa.table(DeltaTable(delta_runs.targets[name][BACKEND], version=0).get_add_actions())
    assert metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == adds.num_rows
    assert metrics[m.NUM_TARGET_BYTES_BEFORE_SKIPPING] == sum(adds.column("size_bytes").to_pylist())
    assert {k for k, v in metrics.items() if v is None} == set()
    changes = [k for k in ROW_COUNTS if k != m.NUM_SOURCE_ROWS]
    assert {k: metrics[k] for k in changes} == dict.fromkeys(changes, 0)


# --- merges that fail -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FAILING)
def test_a_failed_merge_is_deltas_error_in_our_words_and_changes_nothing(delta_runs, name):
    error, error_class = CASES[name].error
    outcomes = delta_runs.outcomes[name]
    # Delta's own MERGE INTO fails with that class: the expectation is Delta's, read from its JVM exception
    assert error_class in delta_error_classes(outcomes[SQL].get("jvmErrors", [])), outcomes[SQL]
    for runner in (ENGINE, BACKEND):
        raised = (outcomes[runner].get("error"), outcomes[runner].get("errorClass"))
        assert (runner, *raised) == (runner, error.__name__, error_class)
        # Each says it in Delta's words, in a few lines, without the JVM's frames
        assert catalogued_sentence(error_class).search(outcomes[runner]["message"]), outcomes[runner]
        text = outcomes[runner]["text"]
        assert "at org.apache" not in text and "INTERNAL_ERROR" not in text
        assert "Cannot find main error class" not in text
        assert len(text.splitlines()) <= MAX_MESSAGE_LINES, text
    # Nothing was committed by any of the three
    for runner in RUNNERS:
        target = delta_runs.targets[name][runner]
        assert (runner, DeltaTable(target).version(), rows_by_id(target)) == (runner, 0, TARGET_ROWS)
