"""MERGE INTO as a second front door: parsing, rendering, round trips, and errors in Delta's words."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from spec_strategies import merge_specs

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec import (
    MatchedDelete,
    MatchedUpdate,
    MergeSpec,
    NotMatchedBySourceDelete,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
    PathSource,
    QuerySource,
    TableSource,
    delete,
    insert,
    insert_all,
    parse_merge_sql,
    to_merge_sql,
    update,
    update_all,
)
from airflow_provider_deltamerge.spec.references import column_references

CDC_SQL = """
-- the nightly CDC merge
MERGE WITH SCHEMA EVOLUTION INTO delta.`s3://lake/customers` AS tgt
USING (
  SELECT *, CASE WHEN op = 'D' THEN 1 ELSE 0 END AS is_delete FROM cdc.customers WHERE ds = '{{ ds }}'
) src
ON tgt.id = src.id AND CASE WHEN src.region IS NULL THEN true ELSE tgt.region = src.region END
WHEN MATCHED AND src.is_delete = 1 THEN DELETE
WHEN MATCHED AND src.op = 'U' THEN UPDATE SET tgt.addr.city = src.city, name = upper(src.name)
WHEN MATCHED THEN UPDATE SET *
WHEN NOT MATCHED BY TARGET AND src.is_delete = 0
  THEN INSERT (id, name) VALUES (src.id, named_struct('a', 1).a)
WHEN NOT MATCHED THEN INSERT *
WHEN NOT MATCHED BY SOURCE AND tgt.updated_at < date_sub(current_date(), 30) THEN DELETE
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET tgt.active = false;
"""


def test_every_clause_form_parses_into_the_spec() -> None:
    spec = parse_merge_sql(CDC_SQL)
    assert spec == MergeSpec(
        target="s3://lake/customers",
        source=QuerySource(
            "SELECT *, CASE WHEN op = 'D' THEN 1 ELSE 0 END AS is_delete "
            "FROM cdc.customers WHERE ds = '{{ ds }}'"
        ),
        condition="tgt.id = src.id AND CASE WHEN src.region IS NULL THEN true "
        "ELSE tgt.region = src.region END",
        clauses=(
            MatchedDelete(condition="src.is_delete = 1"),
            MatchedUpdate(
                set=(("tgt.addr.city", "src.city"), ("name", "upper(src.name)")), condition="src.op = 'U'"
            ),
            MatchedUpdate(star=True),
            NotMatchedInsert(
                values=(("id", "src.id"), ("name", "named_struct('a', 1).a")), condition="src.is_delete = 0"
            ),
            NotMatchedInsert(star=True),
            NotMatchedBySourceDelete(condition="tgt.updated_at < date_sub(current_date(), 30)"),
            NotMatchedBySourceUpdate(set=(("tgt.active", "false"),)),
        ),
        target_alias="tgt",
        source_alias="src",
        schema_evolution=True,
    )


@pytest.mark.parametrize(
    ("sql", "target", "source", "aliases"),
    [
        (
            "MERGE INTO db.orders USING db.staged ON orders.id = staged.id",
            "db.orders",
            TableSource("db.staged"),
            ("orders", "staged"),
        ),
        (
            "MERGE INTO `/lake/orders` t USING parquet.`/in/x` s ON t.id = s.id",
            "/lake/orders",
            PathSource("/in/x"),
            ("t", "s"),
        ),
        (
            "MERGE INTO delta.`/lake/o` AS a USING delta.`/in/y` AS b ON a.id = b.id",
            "/lake/o",
            PathSource("/in/y", "delta"),
            ("a", "b"),
        ),
        (
            "merge into cat.db.o as t using csv.`/in/z.csv` s on t.id = s.id",
            "cat.db.o",
            PathSource("/in/z.csv", "csv"),
            ("t", "s"),
        ),
    ],
)
def test_targets_and_sources(sql: str, target: str, source: object, aliases: tuple[str, str]) -> None:
    spec = parse_merge_sql(sql + " WHEN MATCHED THEN DELETE")
    assert (spec.target, spec.source, (spec.target_alias, spec.source_alias)) == (target, source, aliases)


@given(merge_specs(sql_expressible=True))
def test_spec_to_sql_to_spec_round_trips(spec: MergeSpec) -> None:
    assert parse_merge_sql(to_merge_sql(spec)) == spec


def test_rendering_groups_clauses_in_delta_sql_order_keeping_order_within_a_group() -> None:
    spec = MergeSpec(
        target="/t",
        source=TableSource("s"),
        condition="t.id = s.id",
        clauses=(insert_all(), delete(condition="s.op = 'D'"), update_all()),
    )
    again = parse_merge_sql(to_merge_sql(spec))
    assert again.clauses == (delete(condition="s.op = 'D'"), update_all(), insert_all())


@pytest.mark.parametrize(
    ("spec_change", "message"),
    [
        ({"source": PathSource("/in", "csv", {"header": "true"})}, "A path source with reader options"),
        ({"deduplicate_source_by": ("id",), "deduplicate_order_by": ("ts",)}, "Source de-duplication"),
        ({"clauses": (update_all(except_columns=["v"]),)}, r"\* EXCEPT \(clause 1\) has no MERGE INTO form"),
    ],
)
def test_what_merge_into_cannot_say_is_refused(spec_change: dict[str, object], message: str) -> None:
    spec = MergeSpec(target="/t", source=TableSource("s"), condition="t.id = s.id", clauses=(update_all(),))
    with pytest.raises(MergeSpecError, match=message):
        to_merge_sql(dataclasses.replace(spec, **spec_change))  # type: ignore[arg-type]


def test_syntax_error_reports_line_and_column() -> None:
    with pytest.raises(MergeSpecError) as info:
        parse_merge_sql("MERGE INTO t\nUSING s\nON t.id = = s.id\nWHEN MATCHED THEN DELETE")
    assert info.value.error_class == "PARSE_SYNTAX_ERROR"
    assert "Syntax error at or near '='. (line 3, column 11" in str(info.value)
    assert "  ON t.id = = s.id\n            ^" in str(info.value)


@pytest.mark.parametrize(
    ("sql", "error_class", "text"),
    [
        (
            "MERGE INTO t USING s ON t.id = s.id",
            "MERGE_WITHOUT_WHEN",
            "There must be at least one WHEN clause",
        ),
        ("SELECT 1", "PARSE_SYNTAX_ERROR", "Expected one MERGE INTO statement, found SELECT."),
        (
            "MERGE INTO t USING s ON t.id = 'x WHEN MATCHED THEN DELETE",
            "PARSE_SYNTAX_ERROR",
            "an unterminated quote",
        ),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN INSERT *",
            "PARSE_SYNTAX_ERROR",
            "Syntax error at or near 'INSERT'. (line 1, column 55: Spark's MERGE grammar expects UPDATE or "
            "DELETE)",
        ),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN UPDATE SET a = s.a",
            "PARSE_SYNTAX_ERROR",
            "Syntax error at or near 'UPDATE'.",
        ),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN UPDATE SET *",
            "PARSE_SYNTAX_ERROR",
            "Syntax error at or near '*'.",
        ),
        (
            "MERGE INTO t AS x USING s AS x ON x.id = x.id WHEN MATCHED THEN DELETE",
            "AMBIGUOUS_REFERENCE",
            "Reference `x`.`id` is ambiguous, could be: [`x`.`id`, `x`.`id`]. (ON) Give the target and the "
            "source different aliases.",
        ),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET a = 1, t.A = 2",
            "DELTA_CONFLICT_SET_COLUMN",
            "There is a conflict from these SET columns: [`a`, `A`]. (clause 1, WHEN MATCHED UPDATE)",
        ),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, id) VALUES (1, 2)",
            "DELTA_DUPLICATE_COLUMNS_ON_INSERT",
            "Duplicate column names in INSERT clause (clause 1, WHEN NOT MATCHED INSERT)",
        ),
        (
            "MERGE INTO `/p` USING s ON 1 = 1 WHEN MATCHED THEN DELETE",
            "DELTAMERGE_MISSING_ALIAS",
            "Give it one, e.g. ... AS t.",
        ),
    ],
)
def test_statements_delta_would_refuse(sql: str, error_class: str, text: str) -> None:
    with pytest.raises(MergeSpecError) as info:
        parse_merge_sql(sql)
    assert info.value.error_class == error_class
    assert text in str(info.value)


def test_spark_s_parse_errors_come_before_delta_s_analysis_errors() -> None:
    # Spark's parser stops at the first clause that omits its condition too early; a conflicting SET in a
    # later clause is Delta's analysis, which never runs.
    with pytest.raises(MergeSpecError) as info:
        parse_merge_sql(
            "MERGE INTO t USING s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET a = 1 "
            "WHEN MATCHED THEN UPDATE SET a = 1, a = 2"
        )
    assert info.value.error_class == "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION"
    assert str(info.value).endswith(
        "only the last MATCHED clause can omit the condition. (clause 1, WHEN MATCHED UPDATE) "
        "Give this clause a condition or move it after the others of its kind."
    )


def test_delta_s_analysis_errors_are_collected_with_clause_positions() -> None:
    with pytest.raises(MergeSpecError) as info:
        parse_merge_sql(
            "MERGE INTO t USING s ON t.id = s.id "
            "WHEN MATCHED AND s.op = 'U' THEN UPDATE SET a = 1, a = 2 "
            "WHEN NOT MATCHED THEN INSERT (id, id) VALUES (1, 2)"
        )
    message = str(info.value)
    assert "1. [DELTA_CONFLICT_SET_COLUMN]" in message and "(clause 1, WHEN MATCHED UPDATE)" in message
    assert (
        "2. [DELTA_DUPLICATE_COLUMNS_ON_INSERT]" in message
        and "(clause 2, WHEN NOT MATCHED INSERT)" in message
    )


def test_expressions_reach_the_spec_verbatim() -> None:
    # sqlglot would re-generate these (CAST -> TRY_CAST, == -> =, spacing); the spec keeps the author's text.
    spec = parse_merge_sql(
        "MERGE INTO t USING s ON t.id == s.id WHEN MATCHED THEN UPDATE SET qty = CAST(s.qty AS INT)  +1"
    )
    assert spec.condition == "t.id == s.id"
    assert spec.clauses == (update({"qty": "CAST(s.qty AS INT)  +1"}),)


def test_variant_paths_reach_the_spec_verbatim() -> None:
    # Spark 4's VARIANT path extraction: sqlglot's Spark dialect reads ``:`` only as a parameter marker
    sql = (
        "MERGE INTO t USING s ON t.id = s.id AND t.v:a::int > 1 "
        "WHEN MATCHED AND s.v:['k'].b[0]::string = 'x' THEN UPDATE SET x = s.v:a::int, w = s.v:a "
        "WHEN NOT MATCHED THEN INSERT (id, x) VALUES (s.id, s.v:`a b`.c::decimal(10, 2))"
    )
    spec = parse_merge_sql(sql)
    assert spec.condition == "t.id = s.id AND t.v:a::int > 1"
    assert spec.clauses == (
        update({"x": "s.v:a::int", "w": "s.v:a"}, condition="s.v:['k'].b[0]::string = 'x'"),
        insert({"id": "s.id", "x": "s.v:`a b`.c::decimal(10, 2)"}),
    )
    assert parse_merge_sql(to_merge_sql(spec)) == spec
    # Only the VARIANT column is a column reference; the path's keys are not
    assert set(column_references("t.v:a.b[0]::int > s.v:c")) == {("t", "v"), ("s", "v")}


def test_a_merge_without_on_is_spark_s_syntax_error_at_when():
    with pytest.raises(MergeSpecError, match=r"Syntax error at or near 'WHEN'.*line 2, column 1") as raised:
        parse_merge_sql("MERGE INTO delta.`/x` AS t USING parquet.`/y` AS s\nWHEN MATCHED THEN DELETE")
    assert raised.value.error_class == "PARSE_SYNTAX_ERROR"


def test_an_insert_with_fewer_values_than_columns_is_sparks_count_mismatch():
    with pytest.raises(MergeSpecError) as raised:
        parse_merge_sql(
            "MERGE INTO delta.`/x` t USING parquet.`/y` s ON t.a = s.a "
            "WHEN NOT MATCHED THEN INSERT (a, b) VALUES (s.a)"
        )
    assert raised.value.error_class == "MERGE_INSERT_VALUE_COUNT_MISMATCH"
    assert (
        "The number of provided values (1) must match the number of expected columns (2) in the INSERT "
        "clause of MERGE. (clause 1, WHEN NOT MATCHED INSERT)"
    ) in str(raised.value)
