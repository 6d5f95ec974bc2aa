"""The two sides of the merge's joins, the condition joining them, and whether the source is small enough
to broadcast."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    AtomicType,
    BinaryType,
    ByteType,
    DataType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)
from sqlglot import exp

from airflow_provider_deltamerge.delta.files.reader import read_files
from airflow_provider_deltamerge.delta.log.snapshot import DataFile
from airflow_provider_deltamerge.engine.execute.clause_output import SOURCE_PRESENT, TARGET_PRESENT
from airflow_provider_deltamerge.engine.plan.planning import MergePlan
from airflow_provider_deltamerge.session_kind import heap_bytes
from airflow_provider_deltamerge.spec.names import quote_part
from airflow_provider_deltamerge.spec.references import ExpressionSyntaxError, column_references, conjuncts

# A broadcast relation is built whole on the driver and held whole by every executor: the engine broadcasts
# at most this share of the smaller heap, within the two bounds below. A 1 GiB executor broadcasts up to
# 64 MiB (a few hundred thousand rows), a 12 GiB local session up to 768 MiB.
_HEAP_SHARE = 16
MIN_BROADCAST_BYTES = 64 * 1024 * 1024
MAX_BROADCAST_BYTES = 1024 * 1024 * 1024
# What a string or binary value is guessed to take: generous, so a broadcast stays under its budget.
_VARIABLE_WIDTH_BYTES = 128
# The bytes of each integer type in a join key (Spark's defaultSize).
_INTEGER_BYTES: dict[type[DataType], int] = {ByteType: 1, ShortType: 2, IntegerType: 4, LongType: 8}
# Spark's UnsafeRow keeps a fixed-width value (or a pointer to a variable-width one) in 8 bytes; the
# hashed relation adds about this much per row for its key and links.
_FIELD_BYTES = 8
_ROW_OVERHEAD_BYTES = 32


def target_rows(spark: SparkSession, plan: MergePlan, files: Sequence[DataFile]) -> DataFrame:
    """The rows of ``files`` under the target alias, each with its file, index in it and a presence flag."""
    rows = read_files(spark, plan.snapshot, files).withColumn(TARGET_PRESENT, F.lit(True))
    return rows.alias(plan.spec.target_alias)


def source_rows(plan: MergePlan, source: DataFrame) -> DataFrame:
    """The source rows under the source alias, with a presence flag (NULL after an outer join: unmatched)."""
    return source.withColumn(SOURCE_PRESENT, F.lit(True)).alias(plan.spec.source_alias)


def join_condition(plan: MergePlan, source: StructType) -> Column:
    """The ON condition as the merge's joins use it.

    Spark packs equi-join keys that are all integers of 8 bytes together (two INT keys, say) into one long
    and hashes it by folding its halves together: for keys like (ticket number, item) most rows of a large
    source then share a few hash slots, and a hash join runs 5-30x slower. When the condition's column
    equalities would be packed so, one of them is repeated on BIGINT casts, an implied conjunct that
    changes no row's match but makes the keys too wide to pack.
    """
    condition = F.expr(plan.condition)
    pairs = _integer_key_pairs(plan, source)
    if pairs is None or len(pairs) < 2 or sum(size for _, _, size in pairs) > 8:
        return condition
    target_column, source_column, _ = pairs[0]
    widened = F.col(target_column).cast("bigint") == F.col(source_column).cast("bigint")
    return condition & widened


def _integer_key_pairs(plan: MergePlan, source: StructType) -> list[tuple[str, str, int]] | None:
    """(target column, source column, key bytes) of each ``t.a = s.b`` conjunct of the ON condition, or None
    when some equality is not between integer columns of the two sides (then Spark does not pack the keys)."""
    parts = conjuncts(plan.condition)
    if parts is None:
        return None
    target_alias, source_alias = plan.spec.target_alias.lower(), plan.spec.source_alias.lower()
    schemas = {target_alias: plan.target_schema, source_alias: source}

    def integer_column(node: exp.Expr) -> tuple[str, str, int] | None:
        """(alias, qualified name, bytes) of an integer column of either side."""
        node = node.unnest()
        if not isinstance(node, exp.Column) or node.table.lower() not in schemas:
            return None
        fields = {f.name.lower(): f for f in schemas[node.table.lower()].fields}
        found = fields.get(node.name.lower())
        size = _INTEGER_BYTES.get(type(found.dataType)) if found is not None else None
        if found is None or size is None:
            return None
        return node.table.lower(), f"{node.table}.{quote_part(found.name)}", size

    pairs = []
    for conjunct in parts:
        if not isinstance(conjunct, exp.EQ):
            continue
        sides = {side[0]: side for side in map(integer_column, (conjunct.this, conjunct.expression)) if side}
        if set(sides) != {target_alias, source_alias}:
            return None
        # Spark compares the two sides in their wider type: the key takes that many bytes.
        pairs.append(
            (
                sides[target_alias][1],
                sides[source_alias][1],
                max(sides[target_alias][2], sides[source_alias][2]),
            )
        )
    return pairs


def source_key_columns(plan: MergePlan) -> tuple[str, ...] | None:
    """The source columns whose values alone decide whether a source row matches some target row, as
    qualified references: each column the ON condition equates (``=`` or ``<=>``) with an expression of
    target columns, when every other conjunct names target columns only. None for any other condition (a
    source-only conjunct, another comparison of the two sides, a source side that is not a plain column, an
    unqualified column).

    Source rows alike in these columns (NULLs alike) then match the same target rows, so the rows that
    match none are found again by their values alone.
    """
    parts = conjuncts(plan.condition)
    if parts is None:
        return None
    target_alias, source_alias = plan.spec.target_alias.lower(), plan.spec.source_alias.lower()

    def aliases(node: exp.Expr) -> set[str] | None:
        """The aliases the columns of ``node`` name; None when one names none or another alias."""
        named = set()
        for column in node.find_all(exp.Column):
            if isinstance(column.this, exp.Star) or column.table.lower() not in (target_alias, source_alias):
                return None
            named.add(column.table.lower())
        return named

    keys: dict[str, None] = {}
    for conjunct in parts:
        named = aliases(conjunct)
        if named is None:
            return None
        if source_alias not in named:
            continue  # target columns (or constants) only: the same for every source row
        if not isinstance(conjunct, exp.EQ | exp.NullSafeEQ):
            return None
        sides = (conjunct.this.unnest(), conjunct.expression.unnest())
        column = next(
            (
                side
                for side, other in (sides, sides[::-1])
                if isinstance(side, exp.Column)
                and side.table.lower() == source_alias
                and aliases(other) == {target_alias}
            ),
            None,
        )
        if column is None:
            return None
        keys[f"{plan.spec.source_alias}.{quote_part(column.name)}"] = None
    return tuple(keys) or None


def target_key_schema(plan: MergePlan) -> StructType:
    """The target columns the ON condition names: all Spark reads of the target for a join that needs no
    other target column. The whole schema when the condition does not parse."""
    found = column_references(plan.condition)
    if isinstance(found, ExpressionSyntaxError):
        return plan.target_schema
    alias = plan.spec.target_alias.lower()
    named = {parts[1].lower() for parts in found if len(parts) >= 2 and parts[0].lower() == alias}
    return StructType([f for f in plan.target_schema.fields if f.name.lower() in named])


def broadcast_budget(spark: SparkSession) -> int:
    """The most bytes (estimated) of rows the engine broadcasts in ``spark``: a share of the driver's heap
    and, on a cluster, of an executor's (in local mode the driver's JVM is the executor)."""
    return min(MAX_BROADCAST_BYTES, max(MIN_BROADCAST_BYTES, heap_bytes(spark) // _HEAP_SHARE))


def fits_in_memory(schema: StructType, rows: int, budget: int) -> bool:
    """Whether ``rows`` rows of ``schema`` stay under ``budget`` bytes (``broadcast_budget``) by a generous
    estimate."""
    row_bytes = _estimated_row_bytes(schema)
    return row_bytes is not None and rows * row_bytes <= budget


def _estimated_row_bytes(schema: StructType) -> int | None:
    """An upper guess of a row's size in a broadcast relation; None for nested types (no useful guess)."""
    total = _ROW_OVERHEAD_BYTES
    for field in schema.fields:
        data_type = field.dataType
        if isinstance(data_type, StringType | BinaryType):
            total += _FIELD_BYTES + _VARIABLE_WIDTH_BYTES
        elif isinstance(data_type, DecimalType) and data_type.precision > 18:  # kept as bytes beside the row
            total += _FIELD_BYTES + 16
        elif isinstance(data_type, AtomicType):
            total += _FIELD_BYTES
        else:
            return None
    return total
