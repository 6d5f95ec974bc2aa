"""Each deliberate difference from Delta (tests/engine/delta_differences.py), shown on a statement where it
does differ: Delta's runtime and our engine run it on identical copies, and the outcomes differ exactly as
the difference says, and in no other way. Where several statements show one difference, CI runs one of them
a day, another each day (``of_the_day``, tests/run_profile.py); locally every one runs."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import re
from pathlib import Path

import pytest

from airflow_provider_deltamerge import metrics as m
from tests.engine.delta_differences import (
    DIFFERENCES,
    IN_EVERY_COMMIT,
    MESSAGE_DIFFERENCES,
    explained_by,
    internal_failure_explained_by,
    message_explained_by,
    same_merge,
    without_preflight,
)
from tests.engine.delta_differential import (
    AUTO_MERGE,
    CASE_SENSITIVE,
    MATERIALIZE_SOURCE,
    OPTIMIZE_INSERT_ONLY,
    SKIP_EMPTY_COMMITS,
    STORE_ASSIGNMENT,
    Case,
    Outcome,
    message_agrees,
    run_case,
)
from tests.engine.differential_examples import OVERFLOW_AND_BROKEN_CHECK
from tests.run_profile import of_the_day

ONLY_ACTED_ON = next(d for d in DIFFERENCES if d.name == "only-files-a-clause-acts-on")
AS_WRITTEN = next(d for d in MESSAGE_DIFFERENCES if d.name == "expressions-as-written")
NO_PROTOCOL_CHANGE = next(d for d in DIFFERENCES if d.name == "no-protocol-change")
DISTINCT_ALIASES = next(d for d in DIFFERENCES if d.name == "distinct-aliases")
COUNTED_ONCE = next(d for d in DIFFERENCES if d.name == "source-rows-counted-once")
NO_TARGET_ROW_QUALIFIES = next(
    d for d in DIFFERENCES if d.name == "source-rows-counted-where-no-target-row-qualifies"
)
UNIQUE_SOURCE_UNCOUNTED = next(
    d for d in DIFFERENCES if d.name == "source-rows-counted-where-the-source-is-unique"
)
NO_COMPATIBILITY_CHECKPOINT = next(d for d in DIFFERENCES if d.name == "no-compatibility-checkpoint")
UNMATCHED_ROW_MERGED = next(d for d in DIFFERENCES if d.name == "unmatched-row-merged-where-delta-raises")
DELTA_DROPS_ROWS = next(d for d in DIFFERENCES if d.name == "rows-delta-drops-deduplicating-change-data")
ANOTHER_FAILING_ROW = next(d for d in DIFFERENCES if d.name == "another-failing-row")
TARGET_NAME_FIRST = next(d for d in DIFFERENCES if d.name == "target-names-checked-before-submission")
EVERY_METRIC, AS_WRITTEN_IN_THE_COMMIT = IN_EVERY_COMMIT
DAY = datetime.date(2026, 1, 2)
NEXT_DAY = datetime.date(2026, 1, 3)
SYNC = (
    "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
    "WHEN MATCHED THEN UPDATE SET *\n"
    "WHEN NOT MATCHED BY SOURCE AND t.day > DATE'2026-01-02' THEN UPDATE SET t.v = t.v * 2"
)


def test_delta_rewrites_a_file_no_clause_acts_on_and_the_engine_does_not(spark, tmp_path):
    # Given: a table partitioned by day, two rows on the 2nd, one on the 3rd; the source matches the 3rd's
    # row, and the NOT MATCHED BY SOURCE clause holds for no row of the 2nd: no clause acts on the 2nd's file
    case = Case(
        target_columns=("id", "v", "day"),
        source_columns=("id", "v", "day"),
        target_rows=(
            {"id": 1, "v": 1, "day": DAY},
            {"id": 2, "v": 2, "day": DAY},
            {"id": 3, "v": 3, "day": NEXT_DAY},
        ),
        source_rows=({"id": 3, "v": 5, "day": NEXT_DAY},),
        statement=SYNC,
        partition_by="day",
    )
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: the same rows; Delta also rewrote the 2nd's file, copying its two rows the engine left in place
    assert delta.rows == ours.rows and delta.version == ours.version == 1
    copied = [outcome.counts[m.NUM_TARGET_ROWS_COPIED] for outcome in (delta, ours)]
    assert copied == [2, 0]
    assert delta.counts[m.NUM_TARGET_ROWS_UPDATED] == ours.counts[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert explained_by(delta, ours) is ONLY_ACTED_ON


def test_delta_commits_a_rewrite_that_changes_nothing_and_the_engine_commits_no_version(spark, tmp_path):
    # Given: an empty source, and a NOT MATCHED BY SOURCE clause whose condition holds for no row
    case = Case(
        target_columns=("id", "v", "day"),
        source_columns=("id", "v", "day"),
        target_rows=({"id": 1, "v": 1, "day": DAY},),
        source_rows=(),
        statement=SYNC,
    )
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: Delta committed version 1 (its candidate file rewritten, every change count 0); we committed none
    assert (delta.version, ours.version) == (1, 0)
    assert [delta.counts[k] for k in (m.NUM_TARGET_ROWS_UPDATED, m.NUM_TARGET_ROWS_COPIED)] == [0, 1]
    assert delta.rows == ours.rows
    assert explained_by(delta, ours) is ONLY_ACTED_ON
    # And: where empty commits are recorded (skipRecordingEmptyCommits off), committing none is no longer
    # explained
    assert explained_by(delta, dataclasses.replace(ours, confs={SKIP_EMPTY_COMMITS: "false"})) is None


def test_with_empty_commits_recorded_the_engine_commits_the_merge_that_changes_nothing(spark, tmp_path):
    # Given: the same merge that changes nothing, with empty commits recorded
    case = Case(
        target_columns=("id", "v", "day"),
        source_columns=("id", "v", "day"),
        target_rows=({"id": 1, "v": 1, "day": DAY},),
        source_rows=(),
        statement=SYNC,
        confs={SKIP_EMPTY_COMMITS: "false"},
    )
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: both committed version 1, Delta a rewrite of its candidate file, the engine an empty commit that
    # records SnapshotIsolation, as Delta records one that changes no data
    assert (delta.version, ours.version) == (1, 1)
    assert (delta.files[m.NUM_TARGET_FILES_REMOVED], ours.files[m.NUM_TARGET_FILES_REMOVED]) == (1, 0)
    assert [o.commit["isolationLevel"] for o in (delta, ours)] == ["Serializable", "SnapshotIsolation"]
    assert explained_by(delta, ours) is ONLY_ACTED_ON


def test_delta_adds_a_table_feature_by_schema_evolution_and_the_engine_asks_for_it(spark, tmp_path):
    # Given: a table without VARIANT columns (no variantType in its protocol), and a source query that brings
    # a VARIANT column, merged with schema evolution
    case = Case(
        target_columns=("id", "v"),
        source_columns=("id", "v"),
        target_rows=({"id": 1, "v": 1},),
        source_rows=({"id": 1, "v": 2}, {"id": 2, "v": 3}),
        statement=(
            "MERGE WITH SCHEMA EVOLUTION INTO delta.`{target}` AS t\n"
            "USING (SELECT id, v, parse_json('[1, 2]') AS doc FROM parquet.`{source}`) AS s ON t.id = s.id\n"
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        ),
    )
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: Delta committed the new column with variantType added to the protocol; we refused, naming the
    # feature, and committed nothing
    assert delta.error_class is None and delta.version == 1 and len(delta.rows) == 2
    assert ours.error_class == "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT"
    assert "'delta.feature.variantType'" in (ours.message or "")
    assert explained_by(delta, ours) is NO_PROTOCOL_CHANGE
    assert "variantType" in delta.table["protocol"]["writerFeatures"]
    assert "variantType" not in ours.table["protocol"].get("writerFeatures", [])
    # And: the refusal is not explained where Delta committed without changing the protocol
    assert explained_by(dataclasses.replace(delta, table=ours.table), ours) is None
    # And: another refusal is not explained by it
    ours.error_class = "DELTA_MERGE_UNRESOLVED_EXPRESSION"
    assert explained_by(delta, ours) is None


def test_every_commit_of_ours_records_more_metrics_and_predicates_as_written(spark, tmp_path):
    # Given: an upsert both runners commit
    case = Case(
        ("id", "v"), ("id", "v"), ({"id": 1, "v": 1},), ({"id": 1, "v": 2},), SYNC.split("\nWHEN NOT")[0]
    )
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: the same outcome, and each difference every commit shows is there, exactly as listed
    assert delta.observed() == ours.observed()
    assert [d.name for d in IN_EVERY_COMMIT if d.differs_so(delta, ours)] == [d.name for d in IN_EVERY_COMMIT]
    # And: a commit of ours with Delta's metric names, or Delta's predicate text, or a metric of no list, is
    # not as listed
    metrics, predicates = (EVERY_METRIC, AS_WRITTEN_IN_THE_COMMIT)
    assert not metrics.differs_so(delta, dataclasses.replace(ours, commit_info=delta.commit_info))
    unknown = {**ours.commit_info["operationMetrics"], "numTargetRowsGuessed": "1"}
    assert not metrics.differs_so(
        delta, dataclasses.replace(ours, commit_info={**ours.commit_info, "operationMetrics": unknown})
    )
    assert not predicates.differs_so(delta, dataclasses.replace(ours, commit_info=delta.commit_info))


def test_a_difference_in_rows_is_no_deliberate_difference(spark, tmp_path):
    # The list explains no other difference: the same outcomes with one row changed are not accepted
    case = Case(
        ("id", "v"), ("id", "v"), ({"id": 1, "v": 1},), ({"id": 1, "v": 2},), SYNC.split("\nWHEN NOT")[0]
    )
    delta, ours = run_case(spark, case, tmp_path)
    assert delta.observed() == ours.observed()
    ours.rows = [{"id": 1, "v": 3}]
    assert explained_by(delta, ours) is None


def test_an_error_quotes_the_expression_as_written_where_delta_normalizes_it(spark, tmp_path):
    # Given: a narrowing assignment under STRICT, whose expression Spark normalizes (a cast of the literal)
    case = Case(
        target_columns=("id", "amount"),
        source_columns=("id", "amount"),
        target_rows=({"id": 1, "amount": decimal.Decimal("2.50")},),
        source_rows=({"id": 1, "amount": decimal.Decimal("1.00")},),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
            "WHEN MATCHED THEN UPDATE SET t.amount = t.amount * 2"
        ),
        confs={"spark.sql.storeAssignmentPolicy": "STRICT"},
    )
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: the same class; Delta quotes Spark's form of the expression, we the clause's, the types alike
    assert delta.error_class == ours.error_class == "CANNOT_UP_CAST_DATATYPE"
    assert "(t.amount * CAST(2 AS DECIMAL(1,0)))" in (delta.message or "")
    assert 'Cannot up cast t.amount * 2 from "DECIMAL(12,2)" to "DECIMAL(10,2)".' in (ours.message or "")
    assert not message_agrees(delta, ours)
    assert message_explained_by(delta, ours) is AS_WRITTEN
    # And: a message with another type, or with an expression the statement does not hold, is not explained
    # by it
    other_type = (ours.message or "").replace("DECIMAL(12,2)", "DECIMAL(11,2)")
    assert message_explained_by(delta, dataclasses.replace(ours, message=other_type)) is None
    other_expression = (ours.message or "").replace("t.amount * 2", "t.amount * 3")
    assert message_explained_by(delta, dataclasses.replace(ours, message=other_expression)) is None


# Statements whose source Delta counts twice; the source's columns (a column the target lacks, for the
# NOT MATCHED clause to evolve the schema by).
def _keyed(
    clauses: str, target_keys: tuple[int, ...], source_keys: tuple[int, ...], *, evolving: bool = False
):
    """An (id, v) table of ``target_keys`` merged with a source of ``source_keys`` (and a column the target
    lacks under evolution) by ``clauses``, which begin with ON."""
    extra = {"extra": "e"} if evolving else {}
    return Case(
        ("id", "v"),
        ("id", "v", *extra),
        tuple({"id": k, "v": k} for k in target_keys),
        tuple({"id": k, "v": 9, **extra} for k in source_keys),
        f"MERGE INTO delta.`{{target}}` AS t USING parquet.`{{source}}` AS s\n{clauses}",
        confs={AUTO_MERGE: "true"} if evolving else {},
    )


# Statements whose ON has no equality to hash on, with a NOT MATCHED BY SOURCE or a NOT MATCHED clause, that
# Delta's runtime counts twice (each found by the differential suite; the same clauses count once on other
# rows, so the rows are part of each).
COUNTED_TWICE = {
    "or-by-source": _keyed(
        "ON (t.id = s.id OR t.id = s.id + 10)\nWHEN MATCHED THEN UPDATE SET *\n"
        "WHEN NOT MATCHED BY SOURCE THEN DELETE",
        (2, 3, 4),
        (1, 2, 3, 5, 7),
    ),
    "range-by-source": _keyed(
        "ON t.id BETWEEN s.id AND s.id\nWHEN MATCHED THEN UPDATE SET *\n"
        "WHEN NOT MATCHED BY SOURCE THEN DELETE",
        (2, 3, 4),
        (1, 2, 3, 5, 7),
    ),
    "range-inserts-evolving": _keyed(
        "ON t.id BETWEEN s.id AND s.id + 1\nWHEN MATCHED THEN UPDATE SET t.v = s.v\n"
        "WHEN NOT MATCHED AND s.v > 100 THEN INSERT *",
        (2, 3, 4),
        (0, 5, 3),
        evolving=True,
    ),
    "range-inserts-filtered-source": Case(
        ("id", "day"),
        ("id", "day"),
        ({"id": 3, "day": None},),
        ({"id": 2, "day": None}, {"id": 1, "day": None}, {"id": 0, "day": DAY}),
        "MERGE INTO delta.`{target}` AS t USING (SELECT * FROM parquet.`{source}` WHERE rand() < 2) AS s\n"
        "ON t.id BETWEEN s.id AND s.id + 1\nWHEN MATCHED AND t.day > DATE'2026-01-02' THEN UPDATE SET *\n"
        "WHEN NOT MATCHED AND s.day > DATE'2026-01-02' THEN INSERT *",
    ),
}


@pytest.mark.parametrize("name", of_the_day(sorted(COUNTED_TWICE)))
def test_delta_counts_the_source_twice_in_a_nested_loop_join_and_the_engine_once(spark, tmp_path, name):
    # Given: an ON condition with no equality to hash on (an OR, a range), a MATCHED clause, and a NOT
    # MATCHED BY SOURCE or a NOT MATCHED clause
    case = COUNTED_TWICE[name]
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: the same table, rows and every other count; Delta counted the source rows twice
    counted = (delta.counts[m.NUM_SOURCE_ROWS], ours.counts[m.NUM_SOURCE_ROWS])
    assert counted == (2 * len(case.source_rows), len(case.source_rows))
    assert delta.rows == ours.rows and delta.table == ours.table
    assert explained_by(delta, ours) is COUNTED_ONCE
    # And: with an equality to hash on, with MATCHED clauses alone (an inner join), or with Delta's count
    # other than twice ours, the same counts are not explained by it
    on = re.search(r"^ON (.*)$", case.statement, re.M)
    assert on is not None
    equality = dataclasses.replace(ours, statement=case.statement.replace(on[1], "t.id = s.id"))
    assert explained_by(delta, equality) is None
    matched_only = "\n".join(line for line in case.statement.split("\n") if "NOT MATCHED" not in line)
    assert explained_by(delta, dataclasses.replace(ours, statement=matched_only)) is None
    thrice = dataclasses.replace(delta, counts={**delta.counts, m.NUM_SOURCE_ROWS: 3 * len(case.source_rows)})
    assert explained_by(thrice, ours) is None


# Statements whose ON has a conjunct on the target that no target row satisfies, each with how many source
# rows Delta's runtime counts for every one of the source's (found by the differential suite's long runs).
_NOT_NULL_SYNC = _keyed(
    "ON t.id <=> s.id AND t.v IS NULL\nWHEN MATCHED THEN UPDATE SET *\n"
    "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET t.v = t.v * 2",
    (1, 5),
    (1, 4, 6),
)
NO_TARGET_ROW_QUALIFYING = {
    # adaptive execution broadcasts the target side, finds it empty and drops the join, source and all
    "broadcast-side-found-empty": (
        Case(
            ("id", "bin"),
            ("id",),
            ({"id": 0, "bin": None},),
            ({"id": 3}, {"id": 4}, {"id": 5}),
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s\n"
            "ON t.id = s.id AND length(t.bin) > 1\n"
            "WHEN NOT MATCHED THEN INSERT (id) VALUES (s.id)",
            confs={OPTIMIZE_INSERT_ONLY: "false"},
        ),
        0,
    ),
    # `v IS NULL` on a NOT NULL column folds to false: under deletion vectors Spark drops the source side of
    # the right outer join a NOT MATCHED BY SOURCE clause makes, without them it joins by a nested loop
    "folded-to-false-under-deletion-vectors": (
        dataclasses.replace(
            _NOT_NULL_SYNC, features=("notNull",), properties={"delta.enableDeletionVectors": "true"}
        ),
        0,
    ),
    "folded-to-false-nested-loop": (dataclasses.replace(_NOT_NULL_SYNC, features=("notNull",)), 2),
}


@pytest.mark.parametrize("name", of_the_day(sorted(NO_TARGET_ROW_QUALIFYING)))
def test_delta_may_count_no_source_row_where_no_target_row_qualifies_and_the_engine_counts_each(
    spark, tmp_path, name
):
    # Given: an ON condition whose conjunct on the target no target row satisfies
    case, per_source_row = NO_TARGET_ROW_QUALIFYING[name]
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: the same table, rows and every other count; Delta counted the source as Spark planned its join
    assert ours.on_admits_no_target_row
    counted = (delta.counts[m.NUM_SOURCE_ROWS], ours.counts[m.NUM_SOURCE_ROWS])
    assert counted == (per_source_row * len(case.source_rows), len(case.source_rows))
    assert delta.rows == ours.rows and delta.table == ours.table
    assert explained_by(delta, ours) is NO_TARGET_ROW_QUALIFIES
    # And: where a target row qualifies, with Delta's count other than 0 or twice ours, or with another count
    # differing too, the same outcomes are not explained by it
    qualifying = dataclasses.replace(ours, on_admits_no_target_row=False)
    assert explained_by(delta, qualifying) is None
    thrice = dataclasses.replace(delta, counts={**delta.counts, m.NUM_SOURCE_ROWS: 3 * len(case.source_rows)})
    assert explained_by(thrice, ours) is None
    more_output = {**delta.counts, m.NUM_OUTPUT_ROWS: delta.counts[m.NUM_OUTPUT_ROWS] + 1}
    assert explained_by(dataclasses.replace(delta, counts=more_output), ours) is None
    # And: Delta's commit records an ON it folded to false as that constant, ours as written
    recorded = json.loads(delta.commit_info["operationParameters"]["predicate"])
    assert (recorded == ["false"]) == name.startswith("folded-to-false")
    assert AS_WRITTEN_IN_THE_COMMIT.differs_so(delta, ours)
    as_delta = dataclasses.replace(ours, commit_info=delta.commit_info)
    assert not AS_WRITTEN_IN_THE_COMMIT.differs_so(delta, as_delta)


def test_where_a_target_row_qualifies_delta_counts_every_source_row(spark, tmp_path):
    # Given: the statement above whose target now holds a row that satisfies ON's conjunct on the target
    case, _ = NO_TARGET_ROW_QUALIFYING["broadcast-side-found-empty"]
    case = dataclasses.replace(case, target_rows=({"id": 0, "bin": b"abc"},))
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: both count every source row, and the case is not one where no target row qualifies
    assert not ours.on_admits_no_target_row
    assert delta.counts[m.NUM_SOURCE_ROWS] == ours.counts[m.NUM_SOURCE_ROWS] == len(case.source_rows)


# Three source rows, two once grouped by id: one matches a target row, the other target row is not matched.
UNIQUE_SOURCE = Case(
    ("id", "v"),
    ("id", "v"),
    ({"id": 0, "v": 0}, {"id": 2, "v": 2}),
    ({"id": 2, "v": 9}, {"id": 4, "v": 9}, {"id": 4, "v": 8}),
    "MERGE INTO delta.`{target}` AS t USING (SELECT id, max(v) AS v FROM parquet.`{source}` GROUP BY id)"
    " AS s\nON t.id = s.id\nWHEN MATCHED THEN UPDATE SET t.v = s.v\n"
    "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET t.v = t.v * 2",
    confs={MATERIALIZE_SOURCE: "none"},
    properties={"delta.enableDeletionVectors": "true"},
)


def test_delta_counts_no_source_row_where_spark_drops_a_unique_source_and_the_engine_counts_each(
    spark, tmp_path
):
    # Given: under deletion vectors, a MATCHED and a NOT MATCHED BY SOURCE clause, and a source not
    # materialized that is grouped by the column ON joins on
    (tmp_path / "unique").mkdir()
    # When
    delta, ours = run_case(spark, UNIQUE_SOURCE, tmp_path / "unique")
    # Then: the same table, rows and every other count; Delta counted no source row
    assert (delta.counts[m.NUM_SOURCE_ROWS], ours.counts[m.NUM_SOURCE_ROWS]) == (0, 2)
    assert delta.rows == ours.rows and delta.table == ours.table
    assert explained_by(delta, ours) is UNIQUE_SOURCE_UNCOUNTED
    # And: with the source materialized (Delta's default here), Delta counts each grouped row as we do
    (tmp_path / "materialized").mkdir()
    materialized = dataclasses.replace(UNIQUE_SOURCE, confs={})
    delta_materialized, ours_materialized = run_case(spark, materialized, tmp_path / "materialized")
    assert delta_materialized.counts[m.NUM_SOURCE_ROWS] == ours_materialized.counts[m.NUM_SOURCE_ROWS] == 2
    # And: materialized, without deletion vectors, with a NOT MATCHED clause, over an ungrouped source or a
    # grouping ON does not join on, or with Delta's count other than 0, the same outcomes are not explained
    # by it
    statement = UNIQUE_SOURCE.statement
    without_vectors = {
        **ours.table,
        "properties": {**ours.table["properties"], "delta.enableDeletionVectors": "false"},
    }
    unlike = [
        dataclasses.replace(ours, confs={}),
        dataclasses.replace(ours, table=without_vectors),
        dataclasses.replace(
            ours,
            statement=statement.replace(
                "WHEN NOT MATCHED BY SOURCE", "WHEN NOT MATCHED THEN INSERT *\nWHEN NOT MATCHED BY SOURCE"
            ),
        ),
        dataclasses.replace(ours, statement=statement.replace(" GROUP BY id", "")),
        dataclasses.replace(ours, statement=statement.replace("ON t.id = s.id", "ON t.v = s.v")),
    ]
    for outcome in unlike:
        assert explained_by(delta, outcome) is None, outcome.statement
    once = dataclasses.replace(delta, counts={**delta.counts, m.NUM_SOURCE_ROWS: 1})
    assert explained_by(once, ours) is None


def test_one_alias_for_target_and_source_is_refused_where_delta_resolves_each_column(spark, tmp_path):
    # Given: a statement giving the target and the source one alias, whose ON condition names a column only
    # the target has and one only the source has
    case = Case(
        target_columns=("id", "v"),
        source_columns=("extra",),
        target_rows=({"id": 1, "v": 1},),
        source_rows=({"extra": "e"},),
        statement=(
            "MERGE INTO delta.`{target}` AS a USING parquet.`{source}` AS a\n"
            "ON a.v IS NULL AND a.extra = 'e'\n"
            "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (7, 7)"
        ),
    )
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: Delta resolved each column on its side and inserted; we refused and left the table
    assert delta.error_class is None and delta.version == 1 and len(delta.rows) == 2
    assert ours.error_class == "AMBIGUOUS_REFERENCE" and ours.version == 0
    assert explained_by(delta, ours) is DISTINCT_ALIASES
    # And: with two aliases the same refusal is not explained by it
    two_aliases = case.statement.replace("AS a\nON", "AS b\nON")
    assert explained_by(delta, dataclasses.replace(ours, statement=two_aliases)) is None


def test_where_delta_fails_internally_only_a_classed_error_of_ours_has_a_verdict():
    delta = Outcome(error_class="INTERNAL_ERROR", message="[INTERNAL_ERROR] Found the unresolved Cast: ...")
    classed = Outcome(
        error_class="DELTA_CAST_OVERFLOW_IN_TABLE_WRITE",
        message='Failed to write a value of "BIGINT" type into the "INT" type column `qty` due to overflow.',
    )
    verdict = internal_failure_explained_by(delta, classed)
    assert verdict is not None and verdict.name == "a-classed-error"
    merged = Outcome(version=1, rows=[{"id": 1}], counts={m.NUM_TARGET_ROWS_UPDATED: 1})
    internal = Outcome(error_class="INTERNAL_ERROR", message="[INTERNAL_ERROR] Found the unresolved Cast")
    stack = Outcome(error_class="MERGE_EXECUTION", message="boom\n\tat org.apache.spark.sql.Dataset.collect")
    assert [internal_failure_explained_by(delta, ours) for ours in (merged, internal, stack)] == [None] * 3


def test_under_strict_delta_fails_on_an_up_cast_to_a_timestamp_and_the_engine_writes_it(spark, tmp_path):
    case = Case(
        target_columns=("id", "ts", "day"),
        source_columns=("id", "ts", "day"),
        target_rows=({"id": 1, "ts": None, "day": None},),
        source_rows=({"id": 1, "ts": None, "day": DAY},),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
            "WHEN MATCHED THEN UPDATE SET t.ts = s.day"
        ),
        confs={STORE_ASSIGNMENT: "STRICT", "spark.sql.session.timeZone": "Asia/Kolkata"},
    )
    delta, ours = run_case(spark, case, tmp_path)
    # Delta's analyzer fails on its own cast; the engine writes the day at midnight in the session's zone,
    # as Spark's cast of the same value in that session does
    assert "Found the unresolved Cast: cast(day" in (delta.message or "")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    try:
        midnight = spark.sql("SELECT CAST(DATE'2026-01-02' AS TIMESTAMP) AS ts").first().ts
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert ours.error_class is None and ours.version == 1
    assert [row["ts"] for row in ours.rows] == [midnight.astimezone(datetime.UTC)]
    verdict = internal_failure_explained_by(delta, ours)
    assert verdict is not None and verdict.name == "strict-up-cast-to-a-timestamp"
    # And: under ANSI's store assignment, as the suite runs it again, Delta makes the same merge, and not one
    # whose value is another time
    assert verdict.as_delta_runs_it is not None
    ansi, _ = run_case(spark, verdict.as_delta_runs_it(case), tmp_path / "ansi")
    assert same_merge(ansi, ours)
    utc_midnight = [{**row, "ts": datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)} for row in ours.rows]
    assert not same_merge(ansi, dataclasses.replace(ours, rows=utc_midnight))
    # And: no verdict outside STRICT, nor for an internal error of Delta's other than this cast
    assert internal_failure_explained_by(delta, dataclasses.replace(ours, confs={})) is None
    other = dataclasses.replace(delta, message="[INTERNAL_ERROR] Found the unresolved Cast: cast(v as int)")
    assert internal_failure_explained_by(other, ours) is None


def test_the_users_list_of_deliberate_differences_is_the_suites():
    # docs/semantics.md names each deliberate difference it describes; the suite's lists hold the same
    text = (Path(__file__).parents[2] / "docs" / "semantics.md").read_text()
    entry = r"\*\*Deliberate difference\*\* \(`([a-z-]+)`\)"
    named = re.findall(entry, text)
    listed = [d.name for d in (*DIFFERENCES, *MESSAGE_DIFFERENCES, *IN_EVERY_COMMIT)]
    assert sorted(named) == sorted(listed)
    # every one the page describes is named: no other mention but the sentence on where they are listed
    unnamed = re.sub(entry, "", text).replace("Every deliberate difference is listed", "")
    assert not re.search(r"deliberate\s+difference", unnamed, re.IGNORECASE)


ANOTHER_NULL_COLUMN = next(d for d in MESSAGE_DIFFERENCES if d.name == "another-null-column")


def _null_violation(
    column: str, nullable: bool = False, error_class: str = "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
):
    schema = json.dumps(
        {"fields": [{"metadata": {}, "name": column, "nullable": nullable, "type": "integer"}]},
        sort_keys=True,
    )
    message = f"NOT NULL constraint violated for column: {column}.\nThe merge wrote no commit."
    return Outcome(error_class=error_class, message=message, version=0, schema=schema)


@pytest.mark.parametrize(
    ("ours", "explained"),
    [
        (_null_violation("nest"), True),
        (_null_violation("nest", nullable=True), False),  # a column the table lets be NULL
        (_null_violation("nest", error_class="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"), False),
    ],
    ids=["another-not-null-column", "a-nullable-column", "another-class"],
)
def test_a_null_violation_may_name_another_not_null_column_than_delta(ours, explained):
    # Given: Delta's refusal of a NULL id (the differential suite found rows breaking two NOT NULL columns,
    # each side naming the first it met)
    delta = Outcome(
        error_class="DELTA_NOT_NULL_CONSTRAINT_VIOLATED",
        message="[DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT NULL constraint violated for column: id.",
        version=0,
    )
    # Then
    assert not message_agrees(delta, ours)
    assert (message_explained_by(delta, ours) is ANOTHER_NULL_COLUMN) is explained


ANOTHER_MALFORMED_VALUE = next(d for d in MESSAGE_DIFFERENCES if d.name == "another-malformed-value")


def _malformed(value: str, column_type: str = "boolean", target: str = "BOOLEAN", error_class: str = ""):
    schema = json.dumps(
        {"fields": [{"metadata": {}, "name": "flag", "nullable": True, "type": column_type}]}, sort_keys=True
    )
    message = (
        f'The value {value} of the type "STRING" cannot be cast to "{target}" because it is malformed. '
        "Correct the value as per the syntax, or change its target type. Use `try_cast` to tolerate "
        "malformed input and return NULL instead. (column `flag`)\nThe merge wrote no commit."
    )
    return Outcome(error_class=error_class or "CAST_INVALID_INPUT", message=message, version=1, schema=schema)


@pytest.mark.parametrize(
    ("ours", "explained"),
    [
        (_malformed("'c'"), True),
        (_malformed("'c'", column_type="integer"), False),  # the column named is not of the cast's type
        (_malformed("'c'", column_type="integer", target="INT"), False),  # another cast than Delta's
        (_malformed("'c'", error_class="CAST_OVERFLOW"), False),
    ],
    ids=["another-value", "a-column-of-another-type", "another-cast", "another-class"],
)
def test_a_malformed_string_may_be_another_rows_than_deltas(ours, explained):
    # Given: Delta's refusal of one row's string for a BOOLEAN column (the differential suite found two rows
    # whose strings clause 2 assigns to it, each side quoting the first its tasks met)
    delta = Outcome(
        error_class="CAST_INVALID_INPUT",
        message=(
            '[CAST_INVALID_INPUT] The value \'b\' of the type "STRING" cannot be cast to "BOOLEAN" because '
            "it is malformed. Correct the value as per the syntax, or change its target type. SQLSTATE: 22018"
        ),
        version=1,
    )
    # Then
    assert not message_agrees(delta, ours)
    assert (message_explained_by(delta, ours) is ANOTHER_MALFORMED_VALUE) is explained


def test_delta_copies_the_v2_checkpoint_it_read_before_cleaning_up_and_the_engine_does_not(spark, tmp_path):
    # Given: a table with v2 checkpoints, a checkpoint after every version (Delta's at 1 is UUID-named), its
    # log files 80 hours old and an hour's log retention
    case = Case(
        target_columns=("id", "v"),
        source_columns=("id", "v"),
        target_rows=({"id": 1, "v": 1}, {"id": 2, "v": 2}),
        source_rows=({"id": 2, "v": 5}, {"id": 3, "v": 6}),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
            "WHEN MATCHED THEN UPDATE SET *\nWHEN NOT MATCHED THEN INSERT *"
        ),
        properties={
            "delta.checkpointInterval": "1",
            "delta.logRetentionDuration": "interval 1 hours",
            "delta.deletedFileRetentionDuration": "interval 1 hours",
        },
        features=("v2Checkpoint",),
        log_ages=(80.0,),
    )
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: both merged into version 2 and cleaned up the commits before it; Delta kept its classic-named
    # copy of checkpoint 1 as well
    assert delta.version == ours.version == 2 and delta.rows == ours.rows
    assert delta.table["history"] == {"first commit": 2, "checkpoints": (1, 2)}
    assert ours.table["history"] == {"first commit": 2, "checkpoints": (2,)}
    assert explained_by(delta, ours) is NO_COMPATIBILITY_CHECKPOINT
    # And: a history of ours without the merge's checkpoint, or with commits Delta deleted, is not explained
    for history in ({"first commit": 2, "checkpoints": (1,)}, {"first commit": 0, "checkpoints": (2,)}):
        other = dataclasses.replace(ours, table={**ours.table, "history": history})
        assert explained_by(delta, other) is None


def test_delta_drops_an_inserted_or_copied_row_deduplicating_its_change_data_and_the_engine_writes_it(
    spark, tmp_path
):
    # Given: the change data feed on; target rows 1, 1 and 5 in one file, source rows 1, 1 and 9: each target
    # row 1 is matched twice by the lone unconditional DELETE, row 5 is copied, row 9 inserted; the copied
    # row is the target's third and the inserted one the source's third (the long run's seed 20261217,
    # statements 176 and 210, on other rows)
    case = Case(
        target_columns=("id", "v"),
        source_columns=("id", "v"),
        target_rows=({"id": 1, "v": 1}, {"id": 1, "v": 2}, {"id": 5, "v": 5}),
        source_rows=({"id": 1, "v": 10}, {"id": 1, "v": 11}, {"id": 9, "v": 9}),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
            "WHEN MATCHED THEN DELETE\n"
            "WHEN NOT MATCHED THEN INSERT *"
        ),
        properties={"delta.enableChangeDataFeed": "true"},
    )
    # When
    delta, ours = run_case(spark, case, tmp_path)
    # Then: the engine's table holds the copied row and the inserted one; Delta's only one of them, though
    # its counts (one row inserted, one copied) and its change data are the engine's
    assert sorted(r["id"] for r in ours.rows) == [5, 9]
    assert len(delta.rows) == 1 and delta.rows[0] in ours.rows
    assert delta.counts == ours.counts and delta.changes == ours.changes
    assert (ours.counts[m.NUM_TARGET_ROWS_INSERTED], ours.counts[m.NUM_TARGET_ROWS_COPIED]) == (1, 1)
    assert explained_by(delta, ours) is DELTA_DROPS_ROWS
    # And: not explained where ours lacks Delta's row, has more rows than were inserted, or has no change
    # data feed
    missing = [r for r in ours.rows if r not in delta.rows]
    assert explained_by(delta, dataclasses.replace(ours, rows=missing)) is None
    assert explained_by(delta, dataclasses.replace(ours, rows=[*ours.rows, *missing])) is None
    plain = {**ours.table, "properties": {}}
    assert not DELTA_DROPS_ROWS.differs_so(delta, dataclasses.replace(ours, table=plain))


def test_delta_raises_on_a_row_no_clause_takes_under_deletion_vectors_and_the_engine_merges_as_without(
    spark, tmp_path
):
    # Given: a table writing deletion vectors, ON with a null-safe equality, the source's rows 0 and NULL
    # matching no target row and failing the NOT MATCHED condition (the long run's seed 20261220,
    # statement 45, on fewer rows)
    case = Case(
        target_columns=("id", "v"),
        source_columns=("id", "v"),
        target_rows=({"id": 1, "v": 1}, {"id": 1, "v": 2}),
        source_rows=({"id": 1, "v": 10}, {"id": 0, "v": None}, {"id": None, "v": None}),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id <=> s.id\n"
            "WHEN MATCHED THEN DELETE\n"
            "WHEN NOT MATCHED AND s.v > 0 THEN INSERT *"
        ),
        properties={"delta.enableDeletionVectors": "true"},
    )
    # When: on that table, and on the same table without deletion vectors, as the suite runs it again
    delta, ours = run_case(spark, case, tmp_path / "vectors")
    assert UNMATCHED_ROW_MERGED.as_delta_runs_it is not None
    plain_delta, plain_ours = run_case(spark, UNMATCHED_ROW_MERGED.as_delta_runs_it(case), tmp_path / "plain")
    # Then: Delta raised its assertion and left its table; the engine deleted the matched rows and inserted
    # nothing, as Delta (and the engine) do without deletion vectors: the same merge
    assert (delta.error_class, delta.version, ours.error_class, ours.version) == (
        "USER_RAISED_EXCEPTION",
        0,
        None,
        1,
    )
    assert plain_delta.error_class is None and plain_delta.rows == plain_ours.rows == ours.rows == []
    assert plain_delta.counts[m.NUM_TARGET_ROWS_DELETED] == 2
    assert same_merge(plain_delta, ours)
    assert explained_by(delta, ours) is UNMATCHED_ROW_MERGED
    # And: not the same merge where ours had kept a row or counted another
    kept = dataclasses.replace(ours, rows=[{"id": 1, "v": 1}])
    miscounted = dataclasses.replace(ours, counts={**ours.counts, m.NUM_TARGET_ROWS_DELETED: 1})
    assert not same_merge(plain_delta, kept) and not same_merge(plain_delta, miscounted)
    # And: not explained without the null-safe equality, nor where the engine failed too
    plain_on = dataclasses.replace(ours, statement=ours.statement.replace("<=>", "="))
    assert explained_by(delta, plain_on) is None
    assert explained_by(delta, dataclasses.replace(ours, error_class="X", version=0)) is None


def test_of_two_failing_rows_delta_may_report_the_overflow_and_the_engine_the_broken_constraint(
    spark, tmp_path
):
    # Given: the long run's statement (seed 20261330, statement 360): NOT MATCHED BY SOURCE doubles v, which
    # overflows on the rows holding INT_MAX and makes 2 the 4 that the CHECK constraint bounded refuses; on a
    # table with the constraint alone of its features (the suite runs the whole case as an explicit example),
    # where the two rows fail as there, in a third of the time
    case = dataclasses.replace(
        OVERFLOW_AND_BROKEN_CHECK, features=("checkConstraint",), properties={}, excepted=None
    )
    # When: on the table, and on the same table without its constraints, as the suite runs it again
    delta, ours = run_case(spark, case, tmp_path / "constrained")
    assert ANOTHER_FAILING_ROW.as_both_run_it is not None
    plain_delta, plain_ours = run_case(spark, ANOTHER_FAILING_ROW.as_both_run_it(case), tmp_path / "plain")
    # Then: Delta met the overflow first, the engine the broken constraint; both left the table as it was
    assert (delta.error_class, ours.error_class) == (
        "ARITHMETIC_OVERFLOW",
        "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES",
    )
    assert delta.version == ours.version == 2  # the table's insert and its ALTER TABLE ADD CONSTRAINT
    assert "CHECK constraint bounded" in (ours.message or "") and " - v : 4" in (ours.message or "")
    assert explained_by(delta, ours) is ANOTHER_FAILING_ROW
    # And: without the constraints both fail with the overflow, the same outcome
    assert plain_delta.error_class == "ARITHMETIC_OVERFLOW"
    assert plain_delta.observed() == plain_ours.observed()
    # And: not explained where ours had committed, failed with another class, or the table had no constraint
    assert explained_by(delta, dataclasses.replace(ours, error_class=None, version=3)) is None
    assert (
        explained_by(delta, dataclasses.replace(ours, error_class="DELTA_MERGE_UNRESOLVED_EXPRESSION"))
        is None
    )
    unconstrained = {**ours.table, "properties": {}}
    bare = dataclasses.replace(ours, table=unconstrained, schema=ours.schema.replace('"nullable": false', ""))
    assert explained_by(delta, bare) is None


# The long run's statement (seed 20261332, statement 1273) cut to its MATCHED clauses: UPDATE SET * resolves
# each target column on the query source, which lacks the generated column g; the next clause sets a field
# the struct st lacks.
UNRESOLVED_SOURCE_THEN_MISSING_FIELD = Case(
    target_columns=("id", "m", "st"),
    source_columns=("id", "m", "st"),
    target_rows=({"id": 2, "m": None, "st": {"a": 2, "b": "y"}},),
    source_rows=({"id": 2, "m": None, "st": None},),
    statement=(
        "MERGE INTO delta.`{target}` AS t USING (SELECT * FROM parquet.`{source}`) AS s ON t.id = s.id\n"
        "WHEN MATCHED AND s.m['k'] = 1 THEN UPDATE SET *\n"
        "WHEN MATCHED THEN UPDATE SET t.m = map('k', 1), t.st.c = 'q'"
    ),
    features=("generated",),
)


def test_the_operator_tells_a_later_clauses_missing_field_where_delta_tells_the_source_name_it_lacks(
    spark, tmp_path
):
    # Given: a statement with two bad names, the query source's g (in clause 1's *) and the target's st.c
    case = UNRESOLVED_SOURCE_THEN_MISSING_FIELD
    # When: both run it, the engine's side checked before the merge as the operator does, and again without
    delta, ours = run_case(spark, case, tmp_path / "checked")
    assert TARGET_NAME_FIRST.as_both_run_it is without_preflight
    again, merged_alone = run_case(spark, without_preflight(case), tmp_path / "alone")
    # Then: Delta names the source's missing g, the operator the struct's missing field; neither committed
    assert (delta.error_class, ours.error_class) == ("DELTA_MERGE_UNRESOLVED_EXPRESSION", "FIELD_NOT_FOUND")
    assert "No such struct field `c` in `a`, `b`." in (ours.message or "")
    assert delta.version == ours.version == again.version
    assert explained_by(delta, ours) is TARGET_NAME_FIRST
    # And: the merge alone fails as Delta does, with Delta's sentence naming g
    assert merged_alone.observed() == again.observed() and message_agrees(again, merged_alone)
    assert "Cannot resolve g in UPDATE clause" in (merged_alone.message or "")
    # And: not explained for a path source, whose names the operator checks, nor in a case-sensitive session
    # (where it tells nothing after the source's names), nor where ours committed or failed as Delta did
    path_source = case.statement.replace("(SELECT * FROM parquet.`{source}`)", "parquet.`{source}`")
    assert explained_by(delta, dataclasses.replace(ours, statement=path_source)) is None
    assert explained_by(delta, dataclasses.replace(ours, confs={CASE_SENSITIVE: "true"})) is None
    assert explained_by(delta, dataclasses.replace(ours, error_class=None, version=ours.version + 1)) is None
    assert explained_by(delta, merged_alone) is None
