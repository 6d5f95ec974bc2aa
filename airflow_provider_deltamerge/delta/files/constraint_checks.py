"""The table's row rules (NOT NULL, CHECK constraints, invariants, generated columns) applied to the rows a
merge writes, and Delta's error for a row that breaks one.

A broken rule fails the Spark task that met the row, as Delta's ``DeltaInvariantCheckerExec`` does; the
task's message carries what Delta's ``DeltaInvariantViolationException`` shows: the rule as Spark prints the
parsed expression (``((v IS NULL) OR (NOT (v = 4)))``), then ` - <column> : <value>` for each column the
rule reads, sorted by name, each value as Catalyst's internal value prints (a DATE as its day number, a
TIMESTAMP as microseconds). Struct, array and map values print as Spark's cast to a string, a binary one as
a SQL literal (``X'0102'``), where Delta prints a JVM object (``[B@28ab63f3``, ``UnsafeArrayData@f37c2c84``)
that changes between runs (docs/semantics.md, "constraint-values-as-text").

A Spark Connect session has no parser to ask: there the rule shows as the table stores it and the values
as the whole row's JSON (docs/spark-connect.md, Limits).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, DateType, DecimalType, TimestampNTZType, TimestampType

from airflow_provider_deltamerge.delta.log.protocol import ConstraintCheck, violation_message
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.session_kind import is_connect
from airflow_provider_deltamerge.spec.names import format_path, quote_part

# Marks a constraint violation raised inside Spark, so it can be told apart from other task failures.
_VIOLATION = "DELTAMERGE_CONSTRAINT_VIOLATION"
_VIOLATION_PATTERN = re.compile(_VIOLATION + r"\[(\d+)\](.*?)(?:" + _VIOLATION + r"_END)", re.S)
_UNRESOLVED_ATTRIBUTE = "org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute"
# Where java.math.BigDecimal.toString, which Catalyst's Decimal prints through, turns to scientific notation.
_PLAIN_EXPONENT_FLOOR = -6
_MAX_DIGITS = 38  # a DECIMAL's most


def checked(
    rows: DataFrame, checks: Sequence[ConstraintCheck], columns: Sequence[str], applies: Column | None
) -> DataFrame:
    """``rows`` unchanged, but a row that violates a check fails its Spark task with a marked message that
    holds the check's index and the values its message shows.

    A NULL result counts as a violation, as Delta's invariant checker treats it.

    Args:
        columns: the table's columns (``rows`` may hold the writer's own too): the row a Connect session's
            message shows.
        applies: which rows are checked; None for all.
    """
    if not checks:
        return rows
    failure: Column | None = None
    for index, check in enumerate(checks):
        broken = F.coalesce(F.expr(check.expression), F.lit(False)) == F.lit(False)
        if applies is not None:
            broken = broken & applies
        values = _values(rows, check, columns)
        raised = F.raise_error(F.concat(F.lit(f"{_VIOLATION}[{index}]"), values, F.lit(f"{_VIOLATION}_END")))
        failure = F.when(broken, raised) if failure is None else failure.when(broken, raised)
    assert failure is not None
    return rows.filter(failure.isNull())


def violation_error(
    spark: SparkSession, err: Exception, checks: Sequence[ConstraintCheck]
) -> MergeExecutionError | None:
    """The constraint error a failed write carries, or None when it failed for another reason."""
    found = _VIOLATION_PATTERN.search(str(err))
    if found is None:
        return None
    check = checks[int(found.group(1))]
    expression = check.expression if is_connect(spark) else _parsed(spark, check.expression).sql()
    return MergeExecutionError(
        violation_message(check, expression, found.group(2))
        + "\nThe merge wrote no commit. Fix the source rows or the clause that produces this row.",
        error_class=check.error_class,
    )


def _values(rows: DataFrame, check: ConstraintCheck, columns: Sequence[str]) -> Column:
    """The text of the values a violation of ``check`` shows, one line per column it reads."""
    if not check.shows_values:
        return F.lit("")
    spark = rows.sparkSession
    if is_connect(spark):
        return F.to_json(F.struct(*[F.col(quote_part(c)) for c in columns]))
    # Delta keys the values by each attribute's name as written (a dotted part backquoted) and sorts them as
    # Scala sorts strings, by UTF-16 code unit.
    named = {a.name(): _parts(a) for a in _attributes(_parsed(spark, check.expression))}
    lines = [
        F.concat(F.lit(f" - {name} : "), F.coalesce(_value_text(rows, named[name]), F.lit("null")))
        for name in sorted(named, key=lambda n: n.encode("utf-16-be"))
    ]
    return F.concat_ws("\n", *lines) if lines else F.lit("")


def _parsed(spark: SparkSession, expression: str) -> Any:
    """Spark's parsed (unresolved) expression, as Delta keeps a rule."""
    return spark._jsparkSession.sessionState().sqlParser().parseExpression(expression)


def _attributes(node: Any) -> Iterator[Any]:
    """The column references of a parsed expression (lambda variables are another class)."""
    if node.getClass().getName() == _UNRESOLVED_ATTRIBUTE:
        yield node
    children = node.children()
    for index in range(children.size()):
        yield from _attributes(children.apply(index))


def _parts(attribute: Any) -> tuple[str, ...]:
    parts = attribute.nameParts()
    return tuple(parts.apply(i) for i in range(parts.size()))


def _value_text(rows: DataFrame, parts: tuple[str, ...]) -> Column:
    """The column's value as Delta's message prints it, Catalyst's internal value's ``toString``; a struct,
    array or map value as Spark casts it to a string, a binary one as a SQL literal (the module's docstring
    says why)."""
    path = format_path(parts)
    column = F.col(path)
    data_type = rows.select(column).schema.fields[0].dataType
    if isinstance(data_type, DateType):
        return F.expr(f"unix_date({path})").cast("string")
    if isinstance(data_type, TimestampType):
        return F.expr(f"unix_micros({path})").cast("string")
    if isinstance(data_type, TimestampNTZType):
        since_epoch = f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {path})"
        return F.expr(since_epoch).cast("string")
    if isinstance(data_type, DecimalType):
        return _decimal_text(column, data_type)
    if isinstance(data_type, BinaryType):  # its cast to a string would be the bytes themselves
        return F.concat(F.lit("X'"), F.hex(column), F.lit("'"))
    return column.cast("string")


def _decimal_text(column: Column, data_type: DecimalType) -> Column:
    """``java.math.BigDecimal.toString`` at the column's scale: plain, but scientific where the exponent
    ``digits - 1 - scale`` is below -6 (``0E-20``, ``1.000000000000E-8`` in a DECIMAL(38, 20))."""
    plain = column.cast("string")
    if data_type.scale <= -_PLAIN_EXPONENT_FLOOR:
        return plain  # fewer than 7 decimals never reach that exponent
    digits = F.regexp_replace(F.regexp_replace(plain, r"[-.]", ""), "^0+(?=.)", "")
    exponent = F.length(digits) - 1 - data_type.scale
    scientific = F.concat(
        F.when(column < 0, F.lit("-")).otherwise(F.lit("")),
        F.substring(digits, 1, 1),
        F.when(F.length(digits) > 1, F.concat(F.lit("."), F.substring(digits, 2, _MAX_DIGITS))).otherwise(
            F.lit("")
        ),
        F.lit("E"),
        exponent.cast("string"),
    )
    return F.when(exponent < _PLAIN_EXPONENT_FLOOR, scientific).otherwise(plain)
