"""Spark's rules for which type casts to which, in Python, for sessions without a JVM to ask (Spark Connect).

A classic session asks its own JVM (``Cast.canUpCast``, ``Cast.canAnsiCast``, ``Cast.canCast``,
``TypeCoercion.implicitCast``); a Connect client has none, so these functions answer as those do for the
atomic types a merge casts between (``casting.py`` and ``schema_evolution.py`` walk structs, arrays and maps
themselves). Spark 4.2's rules; ``tests/engine/test_cast_rules.py`` checks them against the JVM's answers
over generated type pairs.
"""

from __future__ import annotations

from pyspark.sql.types import (
    AnsiIntervalType,
    AtomicType,
    BinaryType,
    BooleanType,
    ByteType,
    CalendarIntervalType,
    DataType,
    DatetimeType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    IntegralType,
    LongType,
    NullType,
    NumericType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
    TimeType,
    VariantType,
    YearMonthIntervalType,
)

# UpCastRule.numericPrecedence: integral and floating point types widen along this line.
_NUMERIC_PRECEDENCE: tuple[type[DataType], ...] = (
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
)
# DecimalType.forType: the decimal that holds every value of an integral type.
_DECIMAL_FOR: dict[type[DataType], tuple[int, int]] = {
    ByteType: (3, 0),
    ShortType: (5, 0),
    IntegerType: (10, 0),
    LongType: (20, 0),
}
_TIMESTAMPS = (TimestampType, TimestampNTZType)


def _is(data_type: DataType, *kinds: type[DataType]) -> bool:
    return isinstance(data_type, kinds)


def _wider(decimal: DecimalType, other: DataType) -> bool:
    """``DecimalType.isWiderThan``: every value of ``other`` (a decimal or integral type) fits ``decimal``."""
    theirs = (
        (other.precision, other.scale) if isinstance(other, DecimalType) else _DECIMAL_FOR.get(type(other))
    )
    return theirs is not None and (
        decimal.precision - decimal.scale >= theirs[0] - theirs[1] and decimal.scale >= theirs[1]
    )


def _tighter(decimal: DecimalType, other: DataType) -> bool:
    """``DecimalType.isTighterThan``: every value of ``decimal`` fits ``other``.

    An integral type takes only whole decimals with fewer digits than its own decimal form (``decimal(10,0)``
    holds 9999999999, which no INT does).
    """
    if isinstance(other, DecimalType):
        return (
            decimal.precision - decimal.scale <= other.precision - other.scale
            and decimal.scale <= other.scale
        )
    theirs = _DECIMAL_FOR.get(type(other))
    return theirs is not None and decimal.scale == 0 and decimal.precision < theirs[0]


def _precedence(data_type: DataType) -> int:
    return next((n for n, kind in enumerate(_NUMERIC_PRECEDENCE) if type(data_type) is kind), -1)


def _variant_castable(data_type: DataType) -> bool:
    """``VariantGet.checkDataType`` for an atomic type."""
    return isinstance(
        data_type, NumericType | BooleanType | StringType | BinaryType | DatetimeType | VariantType
    )


def can_up_cast(source: DataType, target: DataType) -> bool:
    """``Cast.canUpCast``: no value can be truncated, lose precision or fail."""
    if source == target:
        return True
    if isinstance(source, VariantType):
        return False
    if isinstance(target, DecimalType) and isinstance(source, NumericType) and _wider(target, source):
        return True
    if isinstance(source, DecimalType) and isinstance(target, NumericType) and _tighter(source, target):
        return True
    if 0 <= _precedence(source) < _precedence(target):
        return True
    return (
        (type(source), type(target)) in _UP_CASTS
        or (_is(source, AtomicType, CalendarIntervalType) and _is(target, StringType))
        or isinstance(source, NullType)
        or _same_interval_kind(source, target)
    )


_UP_CASTS = {
    (DateType, TimestampType),
    (DateType, TimestampNTZType),
    (TimestampNTZType, TimestampType),
    (TimestampType, TimestampNTZType),
    (TimestampType, LongType),
    (LongType, TimestampType),
}


def _same_interval_kind(source: DataType, target: DataType) -> bool:
    return (isinstance(source, DayTimeIntervalType) and isinstance(target, DayTimeIntervalType)) or (
        isinstance(source, YearMonthIntervalType) and isinstance(target, YearMonthIntervalType)
    )


def _from_string(source: DataType, target: DataType) -> bool:
    """A string casts to these in both modes (to TIME too: ``_time_cast``)."""
    return _is(source, StringType) and _is(
        target,
        BinaryType,
        BooleanType,
        *_TIMESTAMPS,
        DateType,
        CalendarIntervalType,
        AnsiIntervalType,
        NumericType,
    )


def can_ansi_cast(source: DataType, target: DataType) -> bool:
    """``Cast.canAnsiCast``: the casts ANSI SQL allows, plus numeric <=> boolean and string <=> binary."""
    if source == target or isinstance(source, NullType) or isinstance(target, StringType):
        return True
    s, t = source, target
    return (
        _from_string(s, t)
        or (_is(s, NumericType) and _is(t, BooleanType, TimestampType, NumericType))
        or (_is(s, DateType) and _is(t, *_TIMESTAMPS))
        or (_is(s, TimestampNTZType) and _is(t, TimestampType, DateType))
        or (_is(s, TimestampType) and _is(t, TimestampNTZType, DateType, NumericType))
        or (_is(s, AnsiIntervalType) and _is(t, IntegralType, DecimalType))
        or (_is(s, IntegralType, DecimalType) and _is(t, AnsiIntervalType))
        or _same_interval_kind(s, t)
        or (_is(s, BooleanType) and _is(t, NumericType))
        or _time_cast(s, t)
        or _variant_cast(s, t)
    )


def can_cast(source: DataType, target: DataType) -> bool:
    """``Cast.canCast``: the casts Spark allows with ANSI mode off."""
    if source == target or isinstance(source, NullType) or isinstance(target, StringType):
        return True
    s, t = source, target
    return (
        _from_string(s, t)
        or (_is(s, IntegralType) and _is(t, BinaryType))
        or (_is(s, DateType, TimestampType, NumericType) and _is(t, BooleanType))
        or (_is(s, BooleanType, DateType, NumericType, TimestampNTZType) and _is(t, TimestampType))
        or (_is(s, DateType, TimestampType) and _is(t, TimestampNTZType))
        or (_is(s, TimestampType, TimestampNTZType) and _is(t, DateType))
        or (_is(s, IntegralType) and _single_field_interval(t))
        or _same_interval_kind(s, t)
        or (_is(s, AnsiIntervalType) and _is(t, IntegralType, DecimalType))
        or (_is(s, IntegralType, DecimalType) and _is(t, AnsiIntervalType))
        or (_is(s, BooleanType, DateType, TimestampType, NumericType) and _is(t, NumericType))
        or _time_cast(s, t)
        or _variant_cast(s, t)
    )


def _single_field_interval(data_type: DataType) -> bool:
    return isinstance(data_type, DayTimeIntervalType | YearMonthIntervalType) and (
        data_type.startField == data_type.endField
    )


def _time_cast(source: DataType, target: DataType) -> bool:
    """TIME from strings and other TIMEs, to whole numbers and decimals (both cast modes alike)."""
    return (_is(source, StringType, TimeType) and _is(target, TimeType)) or (
        _is(source, TimeType) and _is(target, IntegralType, DecimalType)
    )


def _variant_cast(source: DataType, target: DataType) -> bool:
    if isinstance(source, VariantType):
        return _variant_castable(target)
    return isinstance(target, VariantType) and _variant_castable(source)


def implicit_cast(source: DataType, target: DataType) -> bool:
    """``TypeCoercion.implicitCast(source, target).isDefined`` (the non-ANSI rules) for an atomic target."""
    if source == target or isinstance(source, NullType):
        return True
    s, t = source, target
    return (
        (_is(s, NumericType) and _is(t, NumericType))
        or (_is(s, DatetimeType) and _is(t, DatetimeType))
        or (_is(s, StringType) and _is(t, NumericType, DatetimeType, BinaryType))
        or (_is(s, AtomicType) and not _is(s, StringType) and _is(t, StringType))
    )
