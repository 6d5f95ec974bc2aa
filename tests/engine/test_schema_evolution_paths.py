"""Schema evolution through explicit assignments, against Delta's runtime: which names add a column or a
struct field, and which Delta cannot resolve.

The differential suite draws sources whose structs have a field the target's lack, and assignments of the
source's new column (tests/engine/delta_differential.py); here each shape of name is written once, as a
user's grown extract has them. Each statement runs on Delta and on the engine, each on its
own copy of the table: the schema and rows after it, or the error class, must be the same. CI runs one shape
of each list a day, another each day (``of_the_day``, tests/run_profile.py); locally every one runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import DeltaMergeError
from airflow_provider_deltamerge.spec import parse_merge_sql
from tests.engine.delta_outcomes import delta_error_classes, jvm_errors
from tests.run_profile import of_the_day

# The source: `st` with a field `c` the target's `st` lacks (between its two), `nest.a` with a field `z` the
# target's lacks, and a column `x` the target lacks.
SOURCE = (
    "SELECT 1 AS id, named_struct('a', 5, 'c', 'new', 'b', 'y') AS st, 'xx' AS x, "
    "named_struct('a', named_struct('b', 7, 'z', 8), 'd', 9) AS nest "
    "UNION ALL SELECT 2, named_struct('a', 6, 'c', 'n2', 'b', 'z'), 'yy', "
    "named_struct('a', named_struct('b', 3, 'z', 4), 'd', 5)"
)
TARGET = (
    "SELECT 1 AS id, named_struct('a', 1, 'b', 'x') AS st, "
    "named_struct('a', named_struct('b', 1), 'd', 2) AS nest"
)

AGREED = {
    # an existing field assigned: the source's other fields of the struct are not added
    "existing field": "WHEN MATCHED THEN UPDATE SET t.st.a = s.st.a, t.st.b = s.st.b",
    "existing field, unqualified": "WHEN MATCHED THEN UPDATE SET st.a = s.st.a",
    # ... but with INSERT * beside it the whole struct is
    "existing field and INSERT *": (
        "WHEN MATCHED THEN UPDATE SET t.st.a = s.st.a WHEN NOT MATCHED THEN INSERT *"
    ),
    # a new column named as the source names it is added; with the target's alias Delta cannot resolve it
    "new column": "WHEN MATCHED THEN UPDATE SET x = s.x",
    "new column, qualified": "WHEN MATCHED THEN UPDATE SET t.x = s.x",
    # backticks quote a name; they do not qualify it
    "new column, backticked": "WHEN MATCHED THEN UPDATE SET `x` = s.x",
    "new column, qualified and backticked": "WHEN MATCHED THEN UPDATE SET `t`.`x` = s.x",
    "new column inserted": "WHEN NOT MATCHED THEN INSERT (id, x) VALUES (s.id, s.x)",
    "new column inserted, qualified": "WHEN NOT MATCHED THEN INSERT (id, t.x) VALUES (s.id, s.x)",
    # a new field named as the source names it is added at the end of its struct; with the target's alias
    # it is unresolved
    "new field": "WHEN MATCHED THEN UPDATE SET st.c = s.st.c, st.a = s.st.a",
    "new field alone": "WHEN MATCHED THEN UPDATE SET st.c = upper(s.st.c)",
    "new field, qualified": "WHEN MATCHED THEN UPDATE SET t.st.c = s.st.c",
    "new nested field": "WHEN MATCHED THEN UPDATE SET nest.a.z = s.nest.a.z, nest.d = 0",
    "new field and INSERT *": "WHEN MATCHED THEN UPDATE SET st.c = s.st.c WHEN NOT MATCHED THEN INSERT *",
    "new field and INSERT of its struct": (
        "WHEN MATCHED THEN UPDATE SET st.c = s.st.c WHEN NOT MATCHED THEN INSERT (id, st) VALUES (s.id, s.st)"
    ),
    # the clause that updates the row does not assign the field another clause adds
    "new field, another clause updates": (
        "WHEN MATCHED AND s.id = 2 THEN UPDATE SET st.c = s.st.c WHEN MATCHED THEN UPDATE SET st.a = s.st.a"
    ),
    "new field, by source beside": (
        "WHEN MATCHED THEN UPDATE SET st.c = s.st.c WHEN NOT MATCHED BY SOURCE THEN UPDATE SET st.a = 0"
    ),
}


# A source whose structs are the target's: a field neither has, named as the source would name it, is the
# source's missing field (the source resolves the column); with the target's alias, an unresolved name.
NARROW = (
    "SELECT 1 AS id, named_struct('a', 5, 'b', 'y') AS st, "
    "named_struct('a', named_struct('b', 7), 'd', 9) AS nest"
)
NEITHER_HAS = {
    "field neither has": "WHEN MATCHED THEN UPDATE SET st.c = 'q'",
    "nested field neither has": "WHEN MATCHED THEN UPDATE SET nest.a.z = 1, st.a = 1",
    "field neither has, qualified": "WHEN MATCHED THEN UPDATE SET t.st.c = 'q'",
    "field of a column neither has": "WHEN MATCHED THEN UPDATE SET y.c = 'q'",
}


def outcome(spark: SparkSession, table: str, merge: Callable[[], Any]) -> tuple[object, ...]:
    """The table's schema and rows after ``merge``, or the class of the error it raised."""
    try:
        merge()
    except DeltaMergeError as err:
        return ("error", err.error_class)
    except (PySparkException, Py4JJavaError) as err:
        return ("error", next(iter(delta_error_classes(jvm_errors(err))), type(err).__name__))
    after = spark.read.format("delta").load(table)
    return (after.schema.simpleString(), sorted(str(row) for row in after.collect()))


def both_sides(
    spark: SparkSession, tmp_path: Path, clauses: str, source_rows: str = SOURCE
) -> tuple[tuple[object, ...], ...]:
    """Delta's outcome and the engine's of ``MERGE WITH SCHEMA EVOLUTION ... <clauses>``, each on its copy."""
    source = str(tmp_path / "source")
    spark.sql(source_rows).write.parquet(source)
    outcomes = []
    for side in ("delta", "engine"):
        table = str(tmp_path / side)
        spark.sql(TARGET).write.format("delta").save(table)
        statement = (
            f"MERGE WITH SCHEMA EVOLUTION INTO delta.`{table}` AS t USING parquet.`{source}` AS s "
            f"ON t.id = s.id {clauses}"
        )
        merge = (
            (lambda sql=statement: spark.sql(sql).collect())
            if side == "delta"
            else (lambda sql=statement: run_merge(spark, parse_merge_sql(sql)))
        )
        outcomes.append(outcome(spark, table, merge))
    return tuple(outcomes)


@pytest.mark.parametrize("name", of_the_day(list(AGREED)))
def test_explicit_assignments_evolve_the_schema_as_delta_does(
    spark: SparkSession, tmp_path: Path, name: str
) -> None:
    delta, engine = both_sides(spark, tmp_path, AGREED[name])
    assert engine == delta


@pytest.mark.parametrize("name", of_the_day(list(NEITHER_HAS)))
def test_a_field_neither_side_has_fails_as_on_delta(spark: SparkSession, tmp_path: Path, name: str) -> None:
    delta, engine = both_sides(spark, tmp_path, NEITHER_HAS[name], NARROW)
    assert delta[0] == "error"
    assert engine == delta
