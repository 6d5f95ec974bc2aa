"""Spark's reflection functions run any JVM code: a merge refuses them wherever they are written."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    QuerySource,
    delete,
    insert,
    parse_merge_sql,
    update,
)

GETENV = "java_method('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY')"


@pytest.mark.parametrize(
    ("where", "fields"),
    [
        ("ON", {"condition": f"t.id = s.id AND {GETENV} IS NOT NULL"}),
        ("clause 1", {"clauses": (update({"v": GETENV}),)}),
        ("clause 1", {"clauses": (delete(condition=f"{GETENV} = 'x'"),)}),
        ("clause 1", {"clauses": (insert({"v": "`REFLECT`('java.lang.Runtime', 'getRuntime')"}),)}),
        ("clause 1", {"clauses": (insert({"v": "system.builtin.try_reflect('a', 'b')"}),)}),
        ("source query", {"source": QuerySource(f"SELECT id, {GETENV} AS v FROM parquet.`/lake/x`")}),
    ],
)
def test_reflection_is_refused_in_every_sql_text_of_a_merge(where, fields):
    values = {
        "target": "/lake/t",
        "source": PathSource("/lake/s"),
        "condition": "t.id = s.id",
        "clauses": (insert({"id": "s.id"}),),
        **fields,
    }
    with pytest.raises(MergeSpecError, match=rf"DELTAMERGE_REFLECTION_REFUSED.*\({where}"):
        MergeSpec(**values)


def test_reflection_in_merge_into_text_is_refused_too():
    with pytest.raises(MergeSpecError, match="The function java_method calls Java methods"):
        parse_merge_sql(
            "MERGE INTO delta.`/lake/t` AS t USING parquet.`/lake/s` AS s ON t.id = s.id "
            f"WHEN MATCHED THEN UPDATE SET v = {GETENV}"
        )


def test_a_string_or_column_that_only_mentions_the_name_is_fine():
    MergeSpec(
        target="/lake/t",
        source=PathSource("/lake/s"),
        condition="t.id = s.id AND s.note <> 'reflect(x)'",
        clauses=(update({"reflect": "s.java_method"}),),
    )
