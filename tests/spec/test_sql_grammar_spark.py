"""``parse_merge_sql`` accepts exactly the MERGE INTO text that Spark's SQL parser accepts, with its classes.

Delta Lake parses ``MERGE INTO`` with Spark's own parser, so Spark 4.2's parser (in the test session's JVM,
no Delta needed) is the oracle: for generated statements, both accept, or both refuse with the same error
class, and for a syntax error at the same token. The statements vary what the parser judges (clause kinds
and their order, actions, ``*`` and ``* EXCEPT``, conditions, INSERT value counts), not names and types,
which Delta's analysis judges later.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec import parse_merge_sql

KINDS = ["MATCHED", "NOT MATCHED", "NOT MATCHED BY TARGET", "NOT MATCHED BY SOURCE"]
ACTIONS = [
    "DELETE",
    "UPDATE SET *",
    "UPDATE SET * EXCEPT (v)",
    "UPDATE SET v = 1",
    "UPDATE SET t.v = t.v + 1, w = 2",
    "INSERT *",
    "INSERT * EXCEPT (v)",
    "INSERT (id, v) VALUES (s.id, s.v)",
    "INSERT (id, v) VALUES (s.id)",
    "INSERT (id) VALUES (s.id, 2)",
    "INSERT VALUES (s.id)",
    # Spark 4's VARIANT path extraction (``column:path``, ``::type``), which sqlglot's Spark dialect lacks
    "UPDATE SET v = s.v:a::int",
    "INSERT (id, v) VALUES (s.id, s.v:a.b[0])",
]
clauses = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from([None, "t.v > 1", "s.v IS NULL", "t.v:a::int > 1", "s.v:['a'].b[0]::string = 'x'"]),
        st.sampled_from(ACTIONS),
    ),
    max_size=4,
)
heads = st.sampled_from(["MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO"])
targets = st.sampled_from(["t", "delta.`/lake/t` AS t", "cat.db.t AS t"])
sources = st.sampled_from(["s", "(SELECT 1 AS id, 2 AS v) AS s", "parquet.`/in/s` s"])
ons = st.sampled_from(["t.id = s.id", "t.id = s.id AND t.v:a::int > 1"])


def statement(
    head: str, target: str, source: str, whens: list[tuple[str, str | None, str]], on: str = "t.id = s.id"
) -> str:
    text = f"{head} {target} USING {source} ON {on}"
    for kind, condition, action in whens:
        text += f"\nWHEN {kind}{f' AND {condition}' if condition else ''} THEN {action}"
    return text


@pytest.fixture(scope="module")
def spark_parser(spark: SparkSession) -> Any:
    # The parser logs every error it raises at ERROR with its JVM stack; the test reads the exception.
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "SQLQueryContextLogger", jvm.org.apache.logging.log4j.Level.OFF
    )
    return spark._jsparkSession.sessionState().sqlParser()


def spark_outcome(parser: Any, sql: str) -> tuple[str, str] | None:
    """None when Spark parses ``sql``, else its error class and, for a syntax error, the token it names."""
    try:
        parser.parsePlan(sql)
    except PySparkException as err:
        near = dict(err.getMessageParameters() or {}).get("error", "")
        return err.getCondition() or "", near.strip("'") if err.getCondition() == "PARSE_SYNTAX_ERROR" else ""
    return None


def our_outcome(sql: str) -> tuple[str, str] | None:
    try:
        parse_merge_sql(sql)
    except MergeSpecError as err:
        if err.error_class == "PARSE_SYNTAX_ERROR":
            return "PARSE_SYNTAX_ERROR", err.message.split("Syntax error at or near '", 1)[1].split("'", 1)[0]
        return err.error_class or "", ""
    return None


@settings(max_examples=300)
@given(heads, targets, sources, clauses, ons)
def test_the_front_door_accepts_and_refuses_what_sparks_parser_does(
    spark_parser: Any, head: str, target: str, source: str, whens: list[tuple[str, str | None, str]], on: str
) -> None:
    sql = statement(head, target, source, whens, on)
    assert our_outcome(sql) == spark_outcome(spark_parser, sql), sql


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # Each row is what Spark 4.2's parser says, written out so that the expectation does not hang on
        # the oracle alone.
        ("WHEN MATCHED THEN UPDATE SET * EXCEPT (v)", ("PARSE_SYNTAX_ERROR", "EXCEPT")),
        ("WHEN NOT MATCHED THEN INSERT * WHEN MATCHED THEN DELETE", ("PARSE_SYNTAX_ERROR", "MATCHED")),
        (
            "WHEN NOT MATCHED BY SOURCE THEN DELETE WHEN NOT MATCHED THEN INSERT *",
            ("PARSE_SYNTAX_ERROR", "THEN"),
        ),
        ("WHEN NOT MATCHED BY SOURCE THEN UPDATE SET *", ("PARSE_SYNTAX_ERROR", "*")),
        ("WHEN MATCHED THEN INSERT *", ("PARSE_SYNTAX_ERROR", "INSERT")),
        ("WHEN NOT MATCHED THEN INSERT (a, b) VALUES (s.a)", ("MERGE_INSERT_VALUE_COUNT_MISMATCH", "")),
        (
            "WHEN MATCHED THEN DELETE WHEN MATCHED THEN UPDATE SET *",
            ("NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION", ""),
        ),
        (
            "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY TARGET THEN INSERT *",
            ("NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION", ""),
        ),
        (
            "WHEN NOT MATCHED BY SOURCE THEN DELETE WHEN NOT MATCHED BY SOURCE THEN DELETE",
            ("NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION", ""),
        ),
        ("", ("MERGE_WITHOUT_WHEN", "")),
        ("WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED BY TARGET THEN INSERT *", None),
    ],
)
def test_spark_s_answers_written_out(spark_parser: Any, sql: str, expected: tuple[str, str] | None) -> None:
    statement = f"MERGE INTO t USING s ON t.id = s.id {sql}".strip()
    assert our_outcome(statement) == expected
    assert spark_outcome(spark_parser, statement) == expected
