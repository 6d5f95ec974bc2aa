"""A row that breaks a CHECK constraint or a generated column's expression: Delta's runtime and our engine run
the same MERGE on copies of one table, and the engine's error is Delta's, line for line: the constraint as
Spark prints the parsed expression, then each column it reads with its value as Catalyst prints it (sorted
by name, a DATE as its day number, a TIMESTAMP as microseconds, a DECIMAL as java.math.BigDecimal). Only
the values Delta prints as a JVM object differ, as the deliberate difference `constraint-values-as-text`
says. The table is unchanged after both."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.spec import parse_merge_sql
from tests.conftest import table_state
from tests.engine.delta_differences import MESSAGE_DIFFERENCES, constraint_values_as_text
from tests.engine.delta_differential import Outcome
from tests.engine.delta_outcomes import jvm_errors

VIOLATED = "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
VALUES_AS_TEXT = next(d for d in MESSAGE_DIFFERENCES if d.name == "constraint-values-as-text")


@dataclasses.dataclass(frozen=True)
class Violation:
    """A one-row table (``id`` 1 and ``columns``) with ``constraint``, and what a matched update sets."""

    columns: str
    row: str
    constraint: str | None
    update: str


VIOLATIONS = {
    # the differential suite's constraint, broken by a NOT MATCHED BY SOURCE update (seed 20261328)
    "not-equal": Violation("v INT", "2", "v IS NULL OR v <> 4", "v = 4"),
    # every scalar type Delta prints as Catalyst's internal value, one column each, sorted by name
    "scalar-types": Violation(
        "d DOUBLE, f FLOAT, l BIGINT, b BOOLEAN, s STRING, dt DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, "
        "dec DECIMAL(10, 2), tiny TINYINT",
        "NULL, 0F, 0L, false, '', DATE'2024-01-01', TIMESTAMP'2024-01-01 00:00:00', "
        "TIMESTAMP_NTZ'2024-01-01 00:00:00', 0BD, 0Y",
        "id < 0 OR d + f + l + tiny IS NULL OR b IS NULL OR s IS NULL OR dt IS NULL OR ts IS NULL "
        "OR ntz IS NULL OR dec IS NULL",
        "d = 1e10, f = 0.1, l = -5, b = true, s = 'it''s', dt = DATE'1900-01-01', "
        "ts = TIMESTAMP'2024-03-31 02:30:00', ntz = TIMESTAMP_NTZ'1900-01-01 00:00:00', dec = -0.5, "
        "tiny = -3",
    ),
    # java.math.BigDecimal's scientific notation, below an exponent of -6
    "small-decimals": Violation(
        "zero DECIMAL(38, 20), tiny DECIMAL(38, 20), plain DECIMAL(38, 20)",
        "10000BD, 10000BD, 10000BD",
        "zero + tiny + plain > 20000",
        "zero = 0, tiny = 0.00000001, plain = 12345.5",
    ),
    # a NULL value, a dotted name, a nested field and its struct, a name of another case than the column's
    "names": Violation(
        "`we.ird` INT, st STRUCT<a: INT, b: STRING>, V INT, n INT",
        "1, named_struct('a', 1, 'b', 'x'), 1, 1",
        "`we.ird` > 0 AND st.a < 5 AND v IN (1, 2) AND n IS NOT NULL AND upper(st.b) = 'X'",
        "`we.ird` = 2, st = named_struct('a', 3, 'b', 'y'), v = 7, n = NULL",
    ),
    # a generated column's expression, Delta's constraint "Generated Column"
    "generated-column": Violation(
        "qty INT, total INT GENERATED ALWAYS AS (qty * 10)", "1, 10", None, "total = 7"
    ),
    # values Delta prints as JVM objects: the deliberate difference
    "objects": Violation(
        "arr ARRAY<INT>, m MAP<STRING, INT>, bin BINARY",
        "array(1), map('k', 1), X'01'",
        "size(arr) < 2 AND m['k'] < 2 AND length(bin) < 2",
        "arr = array(1, 2), m = map('k', 2), bin = X'0102'",
    ),
}
# Delta's message for each, as Delta 4.4 printed it (values of JVM objects aside): a Delta that prints
# otherwise fails the test before the engine is compared with it.
EXPECTED_FIRST_LINES = {
    "not-equal": "CHECK constraint c ((v IS NULL) OR (NOT (v = 4)))",
    "generated-column": "CHECK constraint Generated Column (total <=> (qty * 10))",
}


def _table(spark, folder: Path, violation: Violation) -> str:
    table = str(folder / "table")
    spark.sql(f"CREATE TABLE delta.`{table}` (id INT, {violation.columns}) USING delta")
    spark.sql(f"INSERT INTO delta.`{table}` SELECT 1, {violation.row}")
    if violation.constraint is not None:
        spark.sql(f"ALTER TABLE delta.`{table}` ADD CONSTRAINT c CHECK ({violation.constraint})")
    return table


def _delta_message(spark, statement: str) -> str:
    try:
        spark.sql(statement).collect()
    except (PySparkException, Py4JJavaError) as err:
        found = next(e for e in jvm_errors(err) if e["errorClass"] == VIOLATED)
        return str(found["message"]).removeprefix(f"[{VIOLATED}] ").rstrip()
    raise AssertionError(f"Delta merged: {statement}")


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_a_broken_constraint_fails_with_deltas_message(spark, tmp_path, name):
    # Given: the one-row table, copied for Delta's runtime
    violation = VIOLATIONS[name]
    ours_table = _table(spark, tmp_path, violation)
    deltas_table = str(tmp_path / "copy")
    shutil.copytree(ours_table, deltas_table)
    before = table_state(ours_table)
    statement = (
        "MERGE INTO delta.`{target}` AS t USING (SELECT 1 AS id) AS s ON t.id = s.id "
        f"WHEN MATCHED THEN UPDATE SET {violation.update}"
    )
    # When
    delta = _delta_message(spark, statement.format(target=deltas_table))
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, parse_merge_sql(statement.format(target=ours_table)))
    # Then: Delta's class, and Delta's message up to our closing sentence
    assert raised.value.error_class == VIOLATED
    ours = str(raised.value).removeprefix(f"[{VIOLATED}] ").split("\nThe merge wrote no commit.")[0]
    if name in EXPECTED_FIRST_LINES:
        assert delta.splitlines()[0] == f"{EXPECTED_FIRST_LINES[name]} violated by row with values:"
    if name == "objects":
        assert constraint_values_as_text(Outcome(VIOLATED, delta), Outcome(VIOLATED, ours))
        assert ours.splitlines()[1:] == [" - arr : [1, 2]", " - bin : X'0102'", " - m : {k -> 2}"]
    else:
        assert ours == delta
    assert table_state(ours_table) == before


ARRAY_OBJECT = "org.apache.spark.sql.catalyst.expressions.UnsafeArrayData@f37c2c84"


def _message(*lines: str) -> Outcome:
    head = "CHECK constraint c (size(arr) < 2) violated by row with values:"
    return Outcome(VIOLATED, "\n".join((head, *lines)))


@pytest.mark.parametrize(
    ("ours", "explained"),
    [
        (_message(" - arr : [1, 2]", " - v : 4"), True),
        (_message(" - arr : [1, 2]", " - v : 5"), False),  # another value Delta prints as it is
        (_message(" - arr : [1, 2]"), False),  # a column left out
        (_message(" - arr : [1, 2]", " - w : 4"), False),  # another column
        (_message(f" - arr : {ARRAY_OBJECT}", " - v : 4"), False),
        (dataclasses.replace(_message(" - arr : [1, 2]", " - v : 4"), error_class="OTHER"), False),
    ],
    ids=["as-text", "another-value", "a-column-left-out", "another-column", "the-same", "another-class"],
)
def test_only_values_delta_prints_as_jvm_objects_may_differ(ours, explained):
    # Given: Delta's message for an array column and an INT one
    delta = _message(f" - arr : {ARRAY_OBJECT}", " - v : 4")
    # Then
    assert VALUES_AS_TEXT.differs_so(delta, ours) is explained
