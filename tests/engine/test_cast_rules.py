"""The Python port of Spark's cast rules (for Connect sessions) answers as the JVM's Cast and TypeCoercion."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from airflow_provider_deltamerge.engine.resolve import cast_rules

_FIXED = [
    T.NullType(),
    T.BooleanType(),
    T.ByteType(),
    T.ShortType(),
    T.IntegerType(),
    T.LongType(),
    T.FloatType(),
    T.DoubleType(),
    T.StringType(),
    T.StringType("UTF8_LCASE"),
    T.BinaryType(),
    T.DateType(),
    T.TimestampType(),
    T.TimestampNTZType(),
    T.TimeType(6),
    T.TimeType(0),
    T.CalendarIntervalType(),
    T.VariantType(),
]
_DAY_TIME = [T.DayTimeIntervalType(s, e) for s in range(4) for e in range(4) if s <= e]
_YEAR_MONTH = [T.YearMonthIntervalType(s, e) for s in range(2) for e in range(2) if s <= e]
atomic_types = st.one_of(
    st.sampled_from(_FIXED + _DAY_TIME + _YEAR_MONTH),
    st.integers(1, 38).flatmap(lambda p: st.builds(T.DecimalType, st.just(p), st.integers(0, p))),
)


class _JvmRules:
    """The JVM's own answers, asked through py4j as the classic engine asks them."""

    def __init__(self, spark: SparkSession) -> None:
        jvm: Any = spark._jvm
        self._session: Any = spark._jsparkSession
        self._catalyst = jvm.org.apache.spark.sql.catalyst

    def _type(self, data_type: T.DataType) -> Any:
        return self._session.parseDataType(data_type.json())

    def answers(self, source: T.DataType, target: T.DataType) -> dict[str, bool]:
        cast = self._catalyst.expressions.Cast
        s, t = self._type(source), self._type(target)
        default = self._catalyst.expressions.Literal.default(s)
        return {
            "can_up_cast": bool(cast.canUpCast(s, t)),
            "can_ansi_cast": bool(cast.canAnsiCast(s, t)),
            "can_cast": bool(cast.canCast(s, t)),
            "implicit_cast": bool(self._catalyst.analysis.TypeCoercion.implicitCast(default, t).isDefined()),
        }


def _python(source: T.DataType, target: T.DataType) -> dict[str, bool]:
    return {
        name: getattr(cast_rules, name)(source, target)
        for name in ("can_up_cast", "can_ansi_cast", "can_cast", "implicit_cast")
    }


def test_every_pair_of_fixed_types_answers_as_the_jvm(spark: SparkSession) -> None:
    # Given: every pair of the atomic types without parameters, and interval types of each field range
    jvm = _JvmRules(spark)
    types = (
        _FIXED + _DAY_TIME + _YEAR_MONTH + [T.DecimalType(10, 0), T.DecimalType(38, 18), T.DecimalType(5, 2)]
    )
    # When / Then: the port gives the JVM's answer for each rule
    wrong = [
        (s.simpleString(), t.simpleString(), name, want)
        for s in types
        for t in types
        if s != T.NullType() or t != T.NullType()
        for name, want in jvm.answers(s, t).items()
        if _python(s, t)[name] != want
    ]
    assert wrong == []


@settings(max_examples=300, deadline=None)
@given(source=atomic_types, target=atomic_types)
def test_generated_pairs_answer_as_the_jvm(
    spark: SparkSession, source: T.DataType, target: T.DataType
) -> None:
    assert _python(source, target) == _JvmRules(spark).answers(source, target)
