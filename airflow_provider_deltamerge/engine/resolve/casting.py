"""Cast the values a merge assigns to the types of their target columns, as Delta stores them.

Delta's UPDATE and MERGE cast each assigned value to its column type under ``spark.sql.storeAssignmentPolicy``
(``UpdateExpressionsSupport.castIfNeeded``):

* ANSI (Spark's default): Spark's ANSI cast rules decide what may be assigned; a value that overflows its
  column fails the merge with DELTA_CAST_OVERFLOW_IN_TABLE_WRITE, a malformed string with CAST_INVALID_INPUT,
  never a silently wrong value. Written with ``try_cast`` and ``raise_error``, so no Python runs on executors.
* LEGACY: the non-ANSI cast: an integral overflow wraps around, other failed casts give NULL.
* STRICT: only casts that cannot lose information (Spark's up-casts); anything else is refused before any
  Spark job, naming the column and both types.
* ANSI_CAST: not a store assignment policy but Delta's ``updateAndMergeCastingFollowsAnsiEnabledFlag`` with
  ``spark.sql.ansi.enabled``: Delta then writes Spark's own ANSI ``Cast``, which fails with Spark's errors
  (CAST_OVERFLOW, NUMERIC_VALUE_OUT_OF_RANGE), not Delta's table-write overflow.

Structs are matched by field name, at any depth and inside arrays and maps. Without schema evolution both
structs must have the same fields ("All nested columns must match"); with it, a field the value lacks is
NULL, or keeps the target's value for ``UPDATE *``, as Delta's per-leaf ``UPDATE *`` does. A NULL struct
stays NULL (Delta's ``preserveNullSourceStructs``). A struct, array or map assigned to a column of another
kind is Spark's cast, as any other value: refused by most policies, a STRING column gets the value's text.

A struct whose fields do not match its column's is refused at once, while each clause's values are cast, but
a value the policy cannot cast is refused only after every clause's values are (``raise_refused_casts``):
Delta throws the first while it builds each clause's expressions, and leaves the second to a ``Cast`` or
``UpCast`` that Spark's analyzer fails once the whole command is built. A later clause's struct mismatch
therefore wins over an earlier clause's refused cast.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    NumericType,
    ShortType,
    StringType,
    StructType,
    VariantType,
)

from airflow_provider_deltamerge.engine.resolve import cast_rules
from airflow_provider_deltamerge.engine.session_confs import (
    ANSI_ENABLED,
    CASTING_FOLLOWS_ANSI,
    ansi_enabled,
    casting_follows_ansi,
)
from airflow_provider_deltamerge.exceptions import ClauseResolutionError, MergeExecutionError
from airflow_provider_deltamerge.session_kind import is_connect

Policy = Literal["ANSI", "LEGACY", "STRICT", "ANSI_CAST"]
POLICY_KEY = "spark.sql.storeAssignmentPolicy"
_POLICIES: tuple[Policy, ...] = ("ANSI", "LEGACY", "STRICT")  # the values POLICY_KEY accepts

# Delta's and Spark's texts (delta-error-classes.json, Spark's error-conditions.json).
_OVERFLOW = (
    'Failed to write a value of "{source}" type into the "{target}" type column `{column}` due to an '
    "overflow. Use `try_cast` on the input value to tolerate overflow and return NULL instead. If "
    'necessary, set spark.sql.storeAssignmentPolicy to "LEGACY" to bypass this error or set '
    "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag to true to revert to the old "
    "behaviour and follow spark.sql.ansi.enabled in UPDATE and MERGE."
)
_MALFORMED = (
    'The value {value} of the type "{source}" cannot be cast to "{target}" because it is malformed. Correct '
    "the value as per the syntax, or change its target type. Use `try_cast` to tolerate malformed input "
    "and return NULL instead. (column `{column}`)"
)
_NESTED_MISMATCH = "Cannot cast {source} to {target}. All nested columns must match."
# Marks a cast failure raised inside Spark, so the merge can report it apart from other task failures.
_MARK = "DELTAMERGE_CAST_FAILURE"
_MARKED = re.compile(_MARK + r"\[(\w+)\](.*?)" + _MARK + "_END", re.S)
_INTEGRAL_BITS: dict[type[DataType], int] = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}


def store_assignment_policy(spark: SparkSession) -> Policy:
    """The session's ``spark.sql.storeAssignmentPolicy`` (ANSI unless set); with Delta's
    ``updateAndMergeCastingFollowsAnsiEnabledFlag``, ANSI_CAST or LEGACY as ``spark.sql.ansi.enabled`` says
    (Delta then casts as Spark's ``Cast`` does: an overflow fails with Spark's error under ANSI and wraps
    without it; ``UpdateExpressionsSupport.cast``)."""
    if casting_follows_ansi(spark):
        return "ANSI_CAST" if ansi_enabled(spark) else "LEGACY"
    value = (spark.conf.get(POLICY_KEY) or "ANSI").upper()
    if value not in _POLICIES:
        raise ClauseResolutionError(
            f"{POLICY_KEY} is {value!r}; Spark accepts ANSI, LEGACY or STRICT.",
            error_class="INVALID_CONF_VALUE",
        )
    return value


def sql_type(data_type: DataType) -> str:
    """A type as Spark's error messages print it (``INT``, ``STRUCT<a: INT>``): Spark's ``DataType.sql``."""
    if isinstance(data_type, StructType):
        fields = (f"{_quoted_if_needed(f.name)}: {sql_type(f.dataType)}" for f in data_type.fields)
        return f"STRUCT<{', '.join(fields)}>"
    if isinstance(data_type, ArrayType):
        return f"ARRAY<{sql_type(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"MAP<{sql_type(data_type.keyType)}, {sql_type(data_type.valueType)}>"
    return data_type.simpleString().upper()


def _unqualified(value: str, aliases: frozenset[str]) -> str:
    """``value`` as Spark's pretty SQL prints it where it is a column of an alias: without the alias."""
    alias, dot, rest = value.partition(".")
    return rest if dot and alias.lower() in aliases and re.fullmatch(r"[\w.]+", rest) else value


def _quoted_if_needed(name: str) -> str:
    """A field name as Spark's ``QuotingUtils.quoteIfNeeded`` prints it in a message: unlike SQL text's
    quoting (``spec.names.quote_part``), a leading digit stays unquoted (``1a``), as Spark prints it."""
    if re.fullmatch(r"\w+", name, re.ASCII) and not name.isdigit():
        return name
    return "`" + name.replace("`", "``") + "`"


@dataclass(eq=False)
class StoreAssignment:
    """Casts assigned values to their column types under one policy, collecting the casts it refuses: one
    per merge's planning, not shared (hence not frozen).

    Attributes:
        spark: the session, whose own cast rules (Spark's ``Cast.canUpCast`` and kin) decide what may be cast.
        policy: ``spark.sql.storeAssignmentPolicy``, or ANSI_CAST (``store_assignment_policy``).
        evolve: schema evolution is on: a struct may lack fields of its target struct.
        aliases: the tables' aliases, which Spark's cast errors leave out of a column they name.
        refused: the casts the policy refused so far, in clause order, for ``raise_refused_casts``.
    """

    spark: SparkSession
    policy: Policy
    evolve: bool
    aliases: frozenset[str] = frozenset()
    refused: list[ClauseResolutionError] = field(default_factory=list)

    def cast(
        self,
        value: Column,
        from_type: DataType,
        to_type: DataType,
        *,
        column: str,
        where: str,
        deterministic: bool = True,
        keep: Column | None = None,
        expression: str | None = None,
    ) -> Column:
        """``value`` (of ``from_type``) as a value of column ``column`` (of ``to_type``).

        Args:
            where: the clause, for errors ("clause 2, WHEN MATCHED UPDATE").
            expression: the value's SQL as the clause writes it, which errors name as Spark's do.
            deterministic: whether ``value`` gives the same result each time it is evaluated; a value
                checked for overflow is then evaluated once.
            keep: the target's current value of the column: struct fields the value lacks keep theirs
                (``UPDATE *`` with schema evolution) instead of becoming NULL.

        Raises:
            ClauseResolutionError: a struct's fields do not match the column's. A leaf the policy cannot cast
                is not raised here but kept in ``refused``, and the value returned uncast.
        """

        def leaf(v: Column, source: DataType, target: DataType, path: str) -> Column:
            shown = expression if expression is not None and path == column else path
            return self._leaf(v, source, target, path, where=where, deterministic=deterministic, shown=shown)

        def mismatch(source: DataType, target: DataType, path: str) -> ClauseResolutionError:
            return ClauseResolutionError(
                f"{where}, column {column}: "
                + _NESTED_MISMATCH.format(source=source.simpleString(), target=target.simpleString())
                + (
                    " Make the struct's fields match the column's by name, or merge with "
                    "schema_evolution=True to add the missing fields."
                    if not self.evolve
                    else " The value has fields the column lacks."
                ),
                error_class="DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION",
            )

        return _by_name(
            value,
            from_type,
            to_type,
            column,
            leaf=leaf,
            mismatch=mismatch,
            allow_missing=self.evolve,
            keep=keep,
        )

    def raise_refused_casts(self) -> None:
        """Raise the first cast the policy refused, once every clause's values are cast.

        Raises:
            ClauseResolutionError: CANNOT_UP_CAST_DATATYPE (STRICT), else
                DATATYPE_MISMATCH.CAST_WITHOUT_SUGGESTION.
        """
        if self.refused:
            first = self.refused[0]  # built with its class by _leaf
            raise first

    def _named(self) -> str:
        """The conf that chose the policy, as errors name it."""
        if self.policy == "ANSI_CAST":
            return f"{CASTING_FOLLOWS_ANSI}=true, {ANSI_ENABLED}=true"
        return f"{POLICY_KEY}={self.policy}"

    def _leaf(
        self,
        value: Column,
        source: DataType,
        target: DataType,
        column: str,
        *,
        where: str,
        deterministic: bool,
        shown: str,
    ) -> Column:
        """``value`` cast for the column (or struct field) ``column``; ``shown`` is the value as errors quote
        it (the clause's expression for a whole column)."""
        if source == target:
            return value
        if isinstance(source, NullType):
            return F.lit(None).cast(target)
        rules = _cast_rules(self.spark)
        if self.policy == "STRICT":
            if not rules.can_up_cast(source, target):
                # Delta's MERGE casts with Spark's up-cast check under STRICT (castIfNeeded), and says so in
                # Spark's words: the value as the clause gives it, then the types.
                return self._refuse(
                    value,
                    ClauseResolutionError(
                        f'Cannot up cast {shown} from "{sql_type(source)}" to "{sql_type(target)}". '
                        f"({where}) {POLICY_KEY}=STRICT allows no narrowing: cast the value explicitly in "
                        "the clause, choose a wider type for the column, or use the ANSI policy.",
                        error_class="CANNOT_UP_CAST_DATATYPE",
                    ),
                )
            return value.cast(target)
        allowed = rules.can_cast if self.policy == "LEGACY" else rules.can_ansi_cast
        if not allowed(source, target):
            return self._refuse(
                value,
                ClauseResolutionError(
                    f'Cannot resolve "{_unqualified(shown, self.aliases)}" due to data type mismatch: '
                    f'cannot cast "{sql_type(source)}" to "{sql_type(target)}". ({where}, column `{column}`, '
                    f"{self._named()}) Assign a value of the column's type.",
                    error_class="DATATYPE_MISMATCH.CAST_WITHOUT_SUGGESTION",
                ),
            )
        if rules.can_up_cast(source, target):
            return value.cast(target)
        if self.policy == "LEGACY":
            return _legacy_cast(value, source, target)
        if self.policy == "ANSI_CAST":
            return value.cast(target)  # the session is ANSI: Spark's cast raises Spark's own errors
        failure = _checked_failure(source, target, column)
        if failure is None:
            return value.cast(target)
        if deterministic:
            return failure(value)
        # Bound once through a one-element array, so a non-deterministic value is checked and written as one.
        return F.transform(F.array(value), failure).getItem(0)

    def _refuse(self, value: Column, error: ClauseResolutionError) -> Column:
        self.refused.append(error)
        return value  # never written: raise_refused_casts fails the merge first


def conform(value: Column, from_type: DataType, to_type: DataType) -> Column:
    """A target column's current value in its evolved type: struct fields that evolution added are NULL,
    widened values cast to their new type.

    Evolution only adds fields and widens types (type widening, engine/resolve/type_widening.py), and
    Spark's cast is exact for every widening Delta allows, so this never fails (and never changes a value).
    """

    def widened(v: Column, source: DataType, target: DataType, path: str) -> Column:
        return v if source == target else v.cast(target)

    def added_only(source: DataType, target: DataType, path: str) -> AssertionError:
        return AssertionError(f"schema evolution dropped fields of {path}: {source} -> {target}")

    return _by_name(value, from_type, to_type, "", leaf=widened, mismatch=added_only, allow_missing=True)


Leaf = Callable[[Column, DataType, DataType, str], Column]


def _by_name(
    value: Column,
    source: DataType,
    target: DataType,
    path: str,
    *,
    leaf: Leaf,
    mismatch: Callable[[DataType, DataType, str], Exception],
    allow_missing: bool,
    keep: Column | None = None,
) -> Column:
    """Walk both types together: structs by field name, arrays element-wise, maps key- and value-wise."""

    def inner(v: Column, s: DataType, t: DataType, p: str, k: Column | None = None) -> Column:
        return _by_name(v, s, t, p, leaf=leaf, mismatch=mismatch, allow_missing=allow_missing, keep=k)

    if _same_ignoring_nullability(source, target):
        return value
    if isinstance(source, StructType) and isinstance(target, StructType):
        given = {f.name.lower(): f for f in source.fields}
        wanted = {f.name.lower() for f in target.fields}
        if any(name not in wanted for name in given) or (not allow_missing and len(given) != len(wanted)):
            raise mismatch(source, target, path)
        fields = []
        for field in target.fields:
            child = f"{path}.{field.name}" if path else field.name
            kept = keep.getField(field.name) if keep is not None else None
            found = given.get(field.name.lower())
            if found is None:
                fields.append(
                    (kept if kept is not None else F.lit(None).cast(field.dataType)).alias(field.name)
                )
            else:
                fields.append(
                    inner(value.getField(found.name), found.dataType, field.dataType, child, kept).alias(
                        field.name
                    )
                )
        # The target's struct is kept through a NULL source struct only for the fields the source lacks: where
        # the source has them all, a NULL source struct is written NULL (as Delta writes it).
        lacks = any(f.name.lower() not in given for f in target.fields)
        absent = value.isNull() & keep.isNull() if keep is not None and lacks else value.isNull()
        return F.when(absent, F.lit(None)).otherwise(F.struct(*fields))
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        return F.transform(
            value, lambda e: inner(e, source.elementType, target.elementType, f"{path}.element")
        )
    if isinstance(source, MapType) and isinstance(target, MapType):
        keyed = F.transform_keys(value, lambda k, _: inner(k, source.keyType, target.keyType, f"{path}.key"))
        return F.transform_values(
            keyed, lambda _, v: inner(v, source.valueType, target.valueType, f"{path}.value")
        )
    # Any other pair, a struct and a STRING say, is Spark's cast to make or refuse, as Delta leaves it.
    return leaf(value, source, target, path)


def _same_ignoring_nullability(a: DataType, b: DataType) -> bool:
    return _without_nullability(a.jsonValue()) == _without_nullability(b.jsonValue())


def _without_nullability(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_nullability(v)
            for k, v in value.items()
            if k not in ("nullable", "containsNull", "valueContainsNull", "metadata")
        }
    if isinstance(value, list):
        return [_without_nullability(v) for v in value]
    return value


def _checked_failure(source: DataType, target: DataType, column: str) -> Callable[[Column], Column] | None:
    """For a cast that may fail at run time: value -> the cast value, or a raised Delta/Spark error."""
    if isinstance(source, VariantType):
        return None  # Spark's own cast fails as Delta's does: INVALID_VARIANT_CAST, naming the value
    if isinstance(source, StringType) and not isinstance(target, StringType):
        error_class, text = "CAST_INVALID_INPUT", _MALFORMED
    elif isinstance(target, NumericType):
        error_class, text = "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE", _OVERFLOW
    else:
        return None
    before, _, after = text.format(
        source=sql_type(source), target=sql_type(target), column=column, value="\0"
    ).partition("\0")

    def checked(value: Column) -> Column:
        cast = value.try_cast(target)
        shown = [F.lit(before)] + (
            [F.concat(F.lit("'"), value.cast("string"), F.lit("'")), F.lit(after)] if after else []
        )
        message = F.concat(F.lit(f"{_MARK}[{error_class}]"), *shown, F.lit(f"{_MARK}_END"))
        return F.when(value.isNotNull() & cast.isNull(), F.raise_error(message)).otherwise(cast)

    return checked


def _legacy_cast(value: Column, source: DataType, target: DataType) -> Column:
    """Spark's non-ANSI cast: integral narrowing keeps the low bits (wraps); other failures give NULL."""
    bits, wanted = _INTEGRAL_BITS.get(type(source)), _INTEGRAL_BITS.get(type(target))
    if bits is None or wanted is None or wanted >= bits:
        return value.try_cast(target)
    size = 1 << wanted
    low = F.pmod(value.cast("long"), F.lit(size))
    return F.when(low >= size // 2, low - size).otherwise(low).cast(target)


class _CastRules(Protocol):
    def can_up_cast(self, source: DataType, target: DataType) -> bool: ...
    def can_ansi_cast(self, source: DataType, target: DataType) -> bool: ...
    def can_cast(self, source: DataType, target: DataType) -> bool: ...


def _cast_rules(spark: SparkSession) -> _CastRules:
    """The session JVM's own rules; on Connect, which has no JVM, their Python port (``cast_rules.py``)."""
    return cast_rules if is_connect(spark) else _SparkCastRules(spark)


class _SparkCastRules:
    """Spark's own answers to "may this type be cast to that one", from its ``Cast`` object."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._cast: Any = spark._jvm.org.apache.spark.sql.catalyst.expressions.Cast  # type: ignore[union-attr]

    def _jvm_type(self, data_type: DataType) -> Any:
        return self._spark._jsparkSession.parseDataType(data_type.json())

    def can_up_cast(self, source: DataType, target: DataType) -> bool:
        return bool(self._cast.canUpCast(self._jvm_type(source), self._jvm_type(target)))

    def can_ansi_cast(self, source: DataType, target: DataType) -> bool:
        return bool(self._cast.canAnsiCast(self._jvm_type(source), self._jvm_type(target)))

    def can_cast(self, source: DataType, target: DataType) -> bool:
        return bool(self._cast.canCast(self._jvm_type(source), self._jvm_type(target)))


def cast_failure(err: PySparkException | Py4JJavaError) -> MergeExecutionError | None:
    """The merge's error for a value that failed its cast during the write, or None for other failures."""
    found = _MARKED.search(str(err))
    if found is None:
        return None
    return MergeExecutionError(
        found.group(2) + "\nThe merge wrote no commit. Fix the source value, or cast it in the clause.",
        error_class=found.group(1),
    )
