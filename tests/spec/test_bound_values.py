"""Template values bound into SQL by where they land: whatever a value holds, it stays inside its token."""

from __future__ import annotations

import datetime
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec.bound_values import bind_values, sql_identifier, sql_literal

MARKERS = re.compile(r"__deltamerge_value_test_(\d+)__")
MARK = "__deltamerge_value_test_0__"
# What an attacker types: quotes, backslashes, comment and statement breaks, newlines, any unicode.
hostile = st.text(alphabet=st.sampled_from("'\"`\\;-/*() \n\tORa1=\u00e9\u2028"), max_size=30) | st.text(
    max_size=30
)


def tokens(sql: str) -> list[tuple[TokenType, str]]:
    return [(t.token_type, t.text) for t in Spark().tokenizer().tokenize(sql)]


@pytest.mark.parametrize(
    ("template", "kind"),
    [
        (f"t.region = '{MARK}' AND t.x = 1", TokenType.STRING),
        (f't.region = "{MARK}" AND t.x = 1', TokenType.STRING),
        (f"t.region = 'eu-{MARK}-x' AND t.x = 1", TokenType.STRING),
        (f"MERGE INTO delta.`/lake/{MARK}/orders` AS t", TokenType.IDENTIFIER),
    ],
)
@given(value=hostile)
def test_a_quoted_value_stays_one_token_holding_exactly_the_value(template, kind, value):
    bound = bind_values(template, [value], MARKERS, where="condition")

    benign = tokens(template)
    actual = tokens(bound)
    # The same statement shape as with a harmless value: no token added, removed or changed in kind.
    assert [k for k, _ in actual] == [k for k, _ in benign]
    position = next(i for i, (k, _) in enumerate(benign) if k == kind)
    # Spark's lexer gives back exactly the value (with the template's own text around it).
    assert actual[position][1] == benign[position][1].replace(MARK, value)


@pytest.mark.parametrize("value", ["5", "-1.5", "1e3", "true", "FALSE"])
def test_a_number_or_boolean_may_stand_outside_quotes(value):
    assert bind_values(f"t.qty > {MARK}", [value], MARKERS, where="condition") == f"t.qty > {value}"


@pytest.mark.parametrize("value", ["eu' OR '1'='1", "t.qty", "1 OR true", "1; DROP TABLE t", "1--", "x"])
def test_any_other_value_outside_quotes_is_refused_with_the_fix(value):
    with pytest.raises(MergeSpecError, match=r"DELTAMERGE_UNSAFE_TEMPLATE_VALUE.*condition.*sql_literal"):
        bind_values(f"t.region = {MARK}", [value], MARKERS, where="condition")


@pytest.mark.parametrize(
    ("template", "why"),
    [
        (f"t.x = 1 -- {MARK}", "in a comment"),
        (f"t.x = 1 /* {MARK} */", "in a comment"),
        (f"t.x = r'{MARK}'", "raw or prefixed string"),
        (f"t.x = X'{MARK}'", "is not Spark SQL"),
    ],
)
def test_a_value_in_a_comment_or_raw_string_is_refused(template, why):
    with pytest.raises(MergeSpecError, match=why):
        bind_values(template, ["a\n OR true"], MARKERS, where="condition")


@given(value=hostile)
def test_sql_literal_of_any_text_is_one_string_token_holding_it(value):
    [(kind, text)] = tokens(sql_literal(value))
    assert (kind, text) == (TokenType.STRING, value)


@given(value=hostile.filter(bool))
def test_sql_identifier_of_any_text_is_one_name(value):
    [(kind, text)] = tokens(sql_identifier(value))
    assert kind in (TokenType.IDENTIFIER, TokenType.VAR)
    assert text == value


def test_sql_literal_of_other_values():
    assert sql_literal(["eu", "u's", 3]) == "('eu', 'u\\'s', 3)"
    assert sql_literal(None) == "NULL"
    assert sql_literal(True) == "true"
    assert sql_literal(2.5) == "2.5"
    assert sql_literal(datetime.date(2024, 1, 2)) == "DATE'2024-01-02'"
    with pytest.raises(MergeSpecError, match="has no SQL literal"):
        sql_literal({"a": 1})
