"""Generated merges, run by our engine under every executor that can serve them and by deltalake's merge.

Hypothesis draws small tables (ints, strings, NULLs; partitioned or not; one to three files) and merges
with random mixes of all five clause kinds and random conditions. The final tables must be identical, and
the row counts equal wherever delta-rs and Delta define them alike. Assumed away, as documented
differences (reference section 2.3): multiple matches (source keys are unique unless the merge is
insert-only) and ``*`` expansion (source and target have the same columns).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake
from hypothesis import example, given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import MergeExecutionError
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
from bench.spark_work import last_execution_id
from tests.conftest import table_state
from tests.engine.conftest import ENGINE_SETTINGS, python_udf_plans
from tests.oracle import merge_with_deltalake, sorted_rows

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("name", pa.string())])

ids = st.one_of(st.none(), st.integers(0, 6))
values = st.one_of(st.none(), st.integers(-2, 5))
names = st.sampled_from(["a", "b", None])  # no '': Delta turns an empty partition value into NULL

MATCHED_CONDITIONS = ["s.v > t.v", "t.v IS NULL", "s.name = 'a'", "t.v < 2 OR s.v IS NULL"]
MATCHED_CLAUSES = [
    lambda c: update_all(condition=c),
    lambda c: update({"v": "s.v + t.v"}, condition=c),
    lambda c: update({"name": "s.name", "v": "t.v * 2"}, condition=c),
    lambda c: delete(condition=c),
]
NOT_MATCHED_CONDITIONS = ["s.v > 1", "s.name IS NULL", "s.v IS NOT NULL AND s.name <> 'b'"]
NOT_MATCHED_CLAUSES = [
    lambda c: insert_all(condition=c),
    lambda c: insert({"id": "s.id", "v": "s.v * 10", "name": "'new'"}, condition=c),
    lambda c: insert({"id": "s.id", "v": "s.v"}, condition=c),  # name left out: NULL
]
BY_SOURCE_CONDITIONS = ["t.v > 2", "t.name = 'b'", "t.id IS NULL"]
BY_SOURCE_CLAUSES = [
    lambda c: update_by_source({"v": "t.v - 1"}, condition=c),
    lambda c: update_by_source({"name": "'old'"}, condition=c),
    lambda c: delete_by_source(condition=c),
]
ON_CONDITIONS = [
    "t.id = s.id",
    "t.id = s.id AND t.v > 0",
    "t.id = s.id AND s.v < 3",
    "t.id = s.id AND t.name = s.name",
]

COUNTS = [
    (m.NUM_SOURCE_ROWS, "num_source_rows"),
    (m.NUM_TARGET_ROWS_INSERTED, "num_target_rows_inserted"),
    (m.NUM_TARGET_ROWS_UPDATED, "num_target_rows_updated"),
    (m.NUM_TARGET_ROWS_DELETED, "num_target_rows_deleted"),
]


@st.composite
def clause_group(draw: st.DrawFn, makers: list[Any], conditions: list[str]) -> list[MergeClause]:
    """0-2 clauses of one WHEN group; only the last may omit its condition (the grammar's rule)."""
    count = draw(st.integers(0, 2))
    group = []
    for n in range(count):
        last = n == count - 1
        condition = draw(st.sampled_from([*conditions, None] if last else conditions))
        group.append(draw(st.sampled_from(makers))(condition))
    return group


@st.composite
def merges(draw: st.DrawFn) -> dict[str, Any]:
    clauses = [
        *draw(clause_group(MATCHED_CLAUSES, MATCHED_CONDITIONS)),
        *draw(clause_group(NOT_MATCHED_CLAUSES, NOT_MATCHED_CONDITIONS)),
        *draw(clause_group(BY_SOURCE_CLAUSES, BY_SOURCE_CONDITIONS)),
    ]
    if not clauses:
        clauses = [draw(st.sampled_from(NOT_MATCHED_CLAUSES))(None)]
    insert_only = all(c.group == "not_matched" for c in clauses)
    row = st.tuples(ids, values, names)
    source_rows = draw(
        st.lists(row, max_size=6)
        if insert_only
        else st.lists(row, max_size=6, unique_by=lambda r: r[0] if r[0] is not None else object())
    )
    return {
        "files": draw(st.lists(st.lists(st.tuples(ids, values, names), max_size=5), min_size=1, max_size=3)),
        "partition_by": draw(st.sampled_from([None, ["name"]])),
        "source": source_rows,
        "condition": draw(st.sampled_from(ON_CONDITIONS)),
        "clauses": tuple(clauses),
    }


def executors_for(clauses: tuple[MergeClause, ...]) -> list[str]:
    """Every executor that can serve this clause mix (decided here, not by asking the engine)."""
    groups = {c.group for c in clauses}
    return [
        *(["insert_only"] if groups == {"not_matched"} else []),
        *(["matched_only"] if groups == {"matched"} else []),
        "classic",
    ]


def as_table(rows: list[tuple[Any, ...]]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], SCHEMA)


# Each conjunct of ON_CONDITIONS over a (source, target) pair of (id, v, name) rows, with SQL's NULLs.
ON_CONJUNCTS: dict[str, Callable[[tuple[Any, ...], tuple[Any, ...]], bool]] = {
    "t.id = s.id": lambda s, t: s[0] is not None and s[0] == t[0],
    "t.v > 0": lambda s, t: t[1] is not None and t[1] > 0,
    "s.v < 3": lambda s, t: s[1] is not None and s[1] < 3,
    "t.name = s.name": lambda s, t: s[2] is not None and s[2] == t[2],
}


def assert_merges_agree(
    spark: SparkSession, work: Path, case: dict[str, Any], ours: str, oracle: str
) -> None:
    """Merge ``case``'s source with our engine into ``ours`` and with deltalake into ``oracle`` (tables
    holding the same rows, stored as each variant of the suite needs): both must end with the same rows,
    and our counts must be deltalake's."""
    source = as_table(case["source"])
    pq.write_table(source, work / "source.parquet")

    def spec_for(target: str) -> MergeSpec:
        return MergeSpec(target, PathSource(str(work / "source.parquet")), case["condition"], case["clauses"])

    expected = merge_with_deltalake(oracle, spec_for(oracle), source)
    metrics = run_merge(spark, spec_for(ours)).metrics
    assert sorted_rows(ours) == sorted_rows(oracle)
    for name, oracle_name in COUNTS:
        assert metrics[name] == expected[oracle_name], name


def has_matching_duplicates(case: dict[str, Any]) -> bool:
    """Whether some target row satisfies the whole ON condition with more than one source row."""
    conjuncts = [ON_CONJUNCTS[c] for c in case["condition"].split(" AND ")]
    return any(
        sum(all(holds(s, t) for holds in conjuncts) for s in case["source"]) > 1
        for rows in case["files"]
        for t in rows
    )


@ENGINE_SETTINGS
@given(case=merges())
# Duplicated source keys that the rest of the ON condition keeps from matching (NULL < 3): no multiple match.
@example(
    case={
        "files": [[(1, None, "a")]],
        "partition_by": None,
        "source": [(1, None, "a"), (1, None, "a")],
        "condition": "t.id = s.id AND s.v < 3",
        "clauses": (insert_all(),),
    }
)
def test_engine_agrees_with_deltalake(spark, tmp_path_factory, case):
    work = tmp_path_factory.mktemp("merge")
    original = str(work / "original")
    for rows in case["files"]:
        write_deltalake(original, as_table(rows), mode="append", partition_by=case["partition_by"])
    source = as_table(case["source"])
    pq.write_table(source, work / "source.parquet")

    def spec_for(target: str) -> MergeSpec:
        source_path = PathSource(str(work / "source.parquet"))
        return MergeSpec(target, source_path, case["condition"], case["clauses"])

    oracle = str(shutil.copytree(original, work / "oracle"))
    expected = merge_with_deltalake(oracle, spec_for(oracle), source)
    since = last_execution_id(spark)
    for executor in executors_for(case["clauses"]):
        ours = str(shutil.copytree(original, work / executor))
        if executor == "classic" and has_matching_duplicates(case):
            # Delta's classic path refuses what its insert-only path inserts (reference section 1.4).
            before = table_state(ours)
            try:
                run_merge(spark, spec_for(ours), executor="classic")
            except MergeExecutionError as err:
                assert err.error_class == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
            else:
                raise AssertionError("classic accepted a duplicated source key that matches")
            assert table_state(ours) == before
            continue
        metrics = run_merge(spark, spec_for(ours), executor=executor).metrics  # type: ignore[arg-type]
        assert sorted_rows(ours) == sorted_rows(oracle), executor
        for name, oracle_name in COUNTS:
            assert metrics[name] == expected[oracle_name], (executor, name)
        # delta-rs rewrites only files with a changed row; Delta every file its executor touched. Where both
        # rewrote as many files, they copied as many rows.
        if metrics[m.NUM_TARGET_FILES_REMOVED] == expected["num_target_files_removed"]:
            assert metrics[m.NUM_TARGET_ROWS_COPIED] == expected["num_target_rows_copied"], executor
    assert python_udf_plans(spark, since=since) == []
