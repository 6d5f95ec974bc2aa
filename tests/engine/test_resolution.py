"""Resolution against real schemas: names, what each clause sees, refused conditions, one current time."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.resolve.resolution import ResolvedClause, pin_current_time
from airflow_provider_deltamerge.exceptions import ClauseResolutionError
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    delete,
    insert,
    insert_all,
    to_merge_sql,
    update,
    update_all,
    update_by_source,
)
from tests.conftest import make_table, table_state
from tests.engine.delta_outcomes import delta_error_classes, jvm_errors
from tests.engine.test_executors import rows, source_file
from tests.oracle import sorted_rows


def test_names_resolve_case_insensitively(spark, tmp_path):
    target = make_table(tmp_path / "t", rows([1, 2]))
    source = source_file(tmp_path, pa.table({"ID": pa.array([2, 3], pa.int64()), "Value": [7, 8]}))
    spec = MergeSpec(
        target,
        source,
        "T.Id = S.iD",
        (update({"VALUE": "s.VALUE + T.value"}, condition="S.value > 0"), insert_all()),
    )
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    assert [(r["id"], r["value"]) for r in sorted_rows(target)] == [(1, 10), (2, 27), (3, 8)]


FIX = (
    "Fix the column name; NOT MATCHED clauses see only the source, NOT MATCHED BY SOURCE clauses only the "
    "target."
)


# Expected texts: Delta's (ResolveDeltaMergeInto.throwIfNotResolved names the unresolved column and lists the
# columns the clause sees, target's first; PreprocessTableMerge.checkCondition refuses aggregates) or Spark's
# (AMBIGUOUS_REFERENCE), then our clause position and fix.
@pytest.mark.parametrize(
    ("condition", "clauses", "error_class", "message"),
    [
        (
            "t.id = s.id",
            (update_all(condition="value > 1"),),
            "AMBIGUOUS_REFERENCE",
            "Reference `value` is ambiguous, could be: [`s`.`value`, `t`.`value`]. "
            "(clause 1, WHEN MATCHED UPDATE, in 'value > 1') Qualify the column with its alias.",
        ),
        (
            "t.id = s.id",
            (update({"value": "value + 1"}),),
            "AMBIGUOUS_REFERENCE",
            "Reference `value` is ambiguous, could be: [`s`.`value`, `t`.`value`]. "
            "(clause 1, WHEN MATCHED UPDATE, in 'value + 1') Qualify the column with its alias.",
        ),
        (
            "t.id = s.id",
            (insert_all(condition="t.value > 1"),),
            "DELTA_MERGE_UNRESOLVED_EXPRESSION",
            f"Cannot resolve t.value in INSERT condition given columns s.id, s.value. "
            f"(clause 1, WHEN NOT MATCHED INSERT) {FIX}",
        ),
        (
            "t.id = s.id",
            (update_by_source({"value": "s.value"}),),
            "DELTA_MERGE_UNRESOLVED_EXPRESSION",
            f"Cannot resolve s.value in UPDATE clause given columns t.id, t.value. "
            f"(clause 1, WHEN NOT MATCHED BY SOURCE UPDATE) {FIX}",
        ),
        (
            "t.id = s.id AND coalesce(s.nope, 0) > 0",
            (update_all(),),
            "DELTA_MERGE_UNRESOLVED_EXPRESSION",
            f"Cannot resolve s.nope in search condition given columns t.id, t.value, s.id, s.value. "
            f"(the ON condition) {FIX}",
        ),
        (
            "t.id = s.id",
            (delete(condition="rand() > 0.5"),),
            "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED",
            "Non-deterministic functions are not supported in the DELETE condition of MERGE operation "
            "(condition = rand() > 0.5). (clause 1, WHEN MATCHED DELETE)",
        ),
        (
            "t.id = s.id",
            (update_all(condition="max(s.value) > 0"),),
            "DELTA_AGGREGATION_NOT_SUPPORTED",
            "Aggregate functions are not supported in the UPDATE condition of MERGE operation "
            "(condition = max(s.value) > 0). (clause 1, WHEN MATCHED UPDATE)",
        ),
        (
            "t.id = max(s.id)",
            (update_all(),),
            "DELTA_AGGREGATION_NOT_SUPPORTED",
            "Aggregate functions are not supported in the search condition of MERGE operation "
            "(condition = t.id = max(s.id)). (the ON condition)",
        ),
        (
            "t.id = s.id",
            (insert_all(condition="s.id IN (SELECT 1)"),),
            "DELTA_UNSUPPORTED_SUBQUERY",
            "Subqueries are not supported in the INSERT condition of MERGE operation "
            "(condition = s.id IN (SELECT 1)). (clause 1, WHEN NOT MATCHED INSERT)",
        ),
    ],
    ids=[
        "ambiguous-condition",
        "ambiguous-assignment",
        "insert-sees-no-target",
        "by-source-sees-no-source",
        "on-names-the-column",
        "non-deterministic",
        "aggregate",
        "aggregate-in-on",
        "subquery",
    ],
)
def test_bad_expressions_fail_naming_the_clause_and_change_nothing(
    spark, tmp_path, condition, clauses, error_class, message
):
    target = make_table(tmp_path / "t", rows([1, 2]))
    before = table_state(target)
    spec = MergeSpec(target, source_file(tmp_path, rows([2, 3])), condition, clauses)
    with pytest.raises(ClauseResolutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == error_class
    assert raised.value.message.startswith(message)
    assert table_state(target) == before


@pytest.mark.parametrize(
    "condition",
    ["s.id IN (SELECT 1) AND rand() > 0.5", "max(s.value) > rand()"],
    ids=["subquery", "aggregate"],
)
def test_a_non_deterministic_condition_holding_a_subquery_or_aggregate_is_refused_as_delta_refuses_it(
    spark, tmp_path, condition
):
    # Given: a MATCHED clause's condition that Delta refuses on two counts; Delta checks determinism first
    # (on Connect the engine cannot: tests/connect/test_connect_merges.py)
    source = source_file(tmp_path, rows([2, 3]))
    specs = [
        MergeSpec(
            make_table(tmp_path / name, rows([1, 2])),
            source,
            "t.id = s.id",
            (update_all(condition=condition),),
        )
        for name in ("delta", "engine")
    ]
    before = [table_state(spec.target) for spec in specs]
    # When: Delta's own MERGE, and the engine
    with pytest.raises((PySparkException, Py4JJavaError)) as by_delta:
        spark.sql(to_merge_sql(specs[0])).collect()
    with pytest.raises(ClauseResolutionError) as by_engine:
        run_merge(spark, specs[1])
    # Then: the same class, and neither table changed
    deltas = delta_error_classes(jvm_errors(by_delta.value))[0]
    assert deltas == by_engine.value.error_class == "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED"
    assert [table_state(spec.target) for spec in specs] == before


@pytest.mark.parametrize(
    ("clause", "message", "evolved"),
    [
        (
            insert_all(),
            "Cannot resolve value in INSERT clause given columns s.id. (clause 1, WHEN NOT MATCHED INSERT)",
            m.NUM_TARGET_ROWS_INSERTED,
        ),
        (
            update_all(),
            "Cannot resolve value in UPDATE clause given columns s.id. (clause 1, WHEN MATCHED UPDATE)",
            m.NUM_TARGET_ROWS_UPDATED,
        ),
    ],
    ids=["insert", "update"],
)
def test_star_over_a_source_without_a_target_column_fails_as_in_delta(
    spark, tmp_path, clause, message, evolved
):
    # Without schema evolution Delta expands * over the target's columns and resolves each in the source
    # only; a column the source lacks is an error for INSERT * too (never a NULL).
    target = make_table(tmp_path / "t", rows([1, 2]))
    before = table_state(target)
    source = source_file(tmp_path, pa.table({"id": pa.array([2, 3], pa.int64())}))
    with pytest.raises(ClauseResolutionError) as raised:
        run_merge(spark, MergeSpec(target, source, "t.id = s.id", (clause,)))
    assert raised.value.error_class == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
    assert raised.value.message.startswith(message)
    assert table_state(target) == before
    # With schema evolution * runs over the source's columns: row 3 is inserted with a NULL value, or row 2
    # is updated keeping its value.
    evolving = MergeSpec(target, source, "t.id = s.id", (clause,), schema_evolution=True)
    assert run_merge(spark, evolving).metrics[evolved] == 1


def with_struct(ids: list[int]) -> pa.Table:
    """``rows(ids)`` with a struct column ``st`` of one field, ``a``."""
    return rows(ids).append_column("st", pa.array([{"a": i} for i in ids], pa.struct([("a", pa.int64())])))


@pytest.mark.parametrize(
    ("condition", "clauses", "case_sensitive", "unresolved"),
    [
        ("t.nope = s.id", (update({"t.st.z": "1"}),), False, "t.nope"),
        ("t.ID = s.id", (update({"t.st.z": "1"}),), True, "t.ID"),
        (
            "t.id = s.id",
            (update({"t.value": "s.nope"}, condition="s.id > 0"), update({"t.st.z": "1"})),
            False,
            "s.nope",
        ),
    ],
    ids=["on-condition", "on-condition-in-another-case", "earlier-clause"],
)
def test_a_name_delta_resolves_first_fails_the_merge_before_a_later_clause_s_missing_field(
    spark, tmp_path, condition, clauses, case_sensitive, unresolved
):
    # Given: an unknown name in the ON condition or an earlier clause, and after it an assignment to a field
    # the struct lacks (FIELD_NOT_FOUND, were it resolved first)
    source = source_file(tmp_path, with_struct([2, 3]))
    specs = [
        MergeSpec(make_table(tmp_path / name, with_struct([1, 2])), source, condition, clauses)
        for name in ("delta", "engine")
    ]
    before = table_state(specs[1].target)
    spark.conf.set("spark.sql.caseSensitive", str(case_sensitive).lower())
    try:
        # When: Delta's own MERGE, and the engine
        with pytest.raises((PySparkException, Py4JJavaError)) as by_delta:
            spark.sql(to_merge_sql(specs[0])).collect()
        with pytest.raises(ClauseResolutionError) as by_engine:
            run_merge(spark, specs[1])
    finally:
        spark.conf.unset("spark.sql.caseSensitive")
    # Then: both fail on the unknown name (Delta's runtime lacks the message of its class: the class alone)
    deltas = delta_error_classes(jvm_errors(by_delta.value))[0]
    assert deltas == by_engine.value.error_class == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
    assert by_engine.value.message.startswith(f"Cannot resolve {unresolved} in")
    assert table_state(specs[1].target) == before


def test_non_deterministic_on_condition_is_refused_but_assignments_may_be(spark, tmp_path):
    target = make_table(tmp_path / "t", rows([1, 2]))
    source = source_file(tmp_path, rows([2, 3]))
    refused = MergeSpec(target, source, "t.id = s.id AND rand() < 2", (insert_all(),))
    with pytest.raises(ClauseResolutionError, match="in the search condition of MERGE operation") as raised:
        run_merge(spark, refused)
    assert raised.value.error_class == "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED"
    allowed = MergeSpec(target, source, "t.id = s.id", (insert({"id": "s.id", "value": "rand() * 0"}),))
    assert run_merge(spark, allowed).metrics[m.NUM_TARGET_ROWS_INSERTED] == 1


NOW = datetime(2026, 3, 1, 23, 30, 0, 250000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "pinned"),
    [
        ("current_timestamp()", "TIMESTAMP '2026-03-01 23:30:00.250000+00:00'"),
        ("NOW ( ) > t.ts", "TIMESTAMP '2026-03-01 23:30:00.250000+00:00' > t.ts"),
        ("current_date = s.d", "DATE '2026-03-02' = s.d"),  # the session time zone's date
        ("localtimestamp()", "TIMESTAMP_NTZ '2026-03-02 00:30:00.250000'"),
        (
            "'current_timestamp()' || s.now || `current_date`",
            "'current_timestamp()' || s.now || `current_date`",
        ),
        ("s.current_timestamps_seen + now", "s.current_timestamps_seen + now"),
    ],
)
def test_current_time_is_pinned_outside_quoted_text(text, pinned):
    clause = ResolvedClause(1, "matched_update", "matched", text, {"v": text})
    condition, (out,) = pin_current_time(text, (clause,), NOW, time_zone="Europe/Paris")
    assert condition == out.condition == out.assignments["v"] == pinned
