"""Choose the target files a merge must read, from the log's partition values and min/max stats.

Three sources of pruning, as in Delta and delta-rs (DESIGN.md "Pruning before joining"):

(a) target-only conjuncts of the ON condition that compare a target column with a constant;
(b) the distinct values the source has for partition columns that the condition equates with a source column;
(c) the source's distinct values of every equi-join key (``t.k = s.k``): a file is read only when one of
    them lies within its [min, max], and with several keys all parts of one source key tuple lie within
    the file's bounds. Above ``MAX_SOURCE_KEYS`` distinct keys (or when the two sides' types differ beyond
    integer widths), the source's global [min, max] of the key stands in;
(d) with MATCHED clauses only, their conditions' conjuncts that name the target alone, where they name
    partition columns alone (``_matched_clauses_test``).

Tests (a), (b) and the (c) fallback run in Spark over a small table of per-file stats, so comparisons coerce
types exactly as the ON condition does; (c) bisects the sorted keys on the driver per file (numpy arrays:
integer keys as int64, others as Python objects), on values put in one exactly comparable form on both
sides (see ``_comparable``). A file is skipped only when its stats
prove that none of its rows can match; unknown stats keep the file. With a WHEN NOT MATCHED BY SOURCE
clause every file is read (unmatched target rows act).

The resulting ``FileFilter`` is also the merge's read predicate: the conflict check asks it whether a file
another writer added could have held rows this merge should have read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegralType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from sqlglot import exp

from airflow_provider_deltamerge.delta.files.sql_text import sql_type
from airflow_provider_deltamerge.delta.log.snapshot import DataFile, Snapshot
from airflow_provider_deltamerge.engine.plan.planning import (
    MergePlan,
    has_not_matched_by_source,
    is_matched_only,
)
from airflow_provider_deltamerge.spec.references import conjuncts

# Above this many distinct source values of a partition column, (b) falls back to the values' range.
MAX_PARTITION_VALUES = 10_000
# Above this many distinct source values of an equi-join key, (c) falls back to the keys' global range: the
# driver holds the sorted keys (8 bytes an integer key: 16 MB for two keys at the limit) and tests each file
# in O(log keys). A source of a few hundred thousand rows (a day's extract) stays under it.
MAX_SOURCE_KEYS = 1_000_000
# How many of the source's key tuples are compared with one file's bounds (vectorized) before the file is
# simply kept.
MAX_TUPLES_SCANNED = 1_000_000
# Delta keeps this many characters of a string bound; a longer (truncated) max is no bound at all here.
STRING_PREFIX_LENGTH = 32
_ORDINAL = "__ordinal"
_ROWS = "__rows"
_COMPARISONS = {exp.EQ: "=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
# Up to this many values an IN list is tested value by value; a longer one by its range.
_MAX_IN_TESTS = 32
# Up to this many source values of a partition column are tested as literals on the driver; more, in a join.
_MAX_LITERAL_VALUES = 1_000
_FLIPPED = {"=": "=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}
# Nodes a constant side may be made of: literals and casts of literals, nothing evaluated at run time.
_CONSTANT_NODES = (exp.Literal, exp.Cast, exp.DataType, exp.Neg, exp.Paren, exp.DataTypeParam, exp.Var)


# (the key columns' indexes, the tuples' parts as aligned arrays sorted by the first part, then the next...)
KeyTuples = tuple[tuple[int, ...], tuple[np.ndarray, ...]]


@dataclass(frozen=True)
class FileFilter:
    """Which files, judged by their log entry alone, could hold target rows the merge needs."""

    target_schema: StructType
    partition_columns: tuple[str, ...]
    read_all: bool = False
    constant_tests: tuple[str, ...] = ()  # SQL over the stats table
    range_tests: tuple[tuple[int, str], ...] = ()  # (column index, bound-pair name) against source bounds
    source_bounds: tuple[Row, StructType] | None = None
    value_sets: tuple[tuple[int, list[Row], StructType], ...] = field(default=())
    # (column index, the source's distinct keys in ``_comparable`` form, sorted: see ``_bisectable``)
    key_sets: tuple[tuple[int, np.ndarray], ...] = field(default=(), repr=False)
    # With several equi-join keys: the source's distinct key tuples with no NULL (``KeyTuples``), so a file
    # must hold all parts of one tuple, not parts of several.
    key_tuples: KeyTuples | None = field(default=None, repr=False)

    def select(
        self, spark: SparkSession, snapshot: Snapshot, files: Sequence[DataFile]
    ) -> tuple[DataFile, ...]:
        """The files among ``files`` (entries of ``snapshot``) that may hold rows the merge needs."""
        if self.read_all or not files:
            return tuple(files)
        if not (self.constant_tests or self.range_tests or self.value_sets or self.key_sets):
            return tuple(files)
        bounds_on_driver = self._integer_key_bounds(snapshot, files)
        if bounds_on_driver is not None:
            return tuple(f for n, f in enumerate(files) if self._holds_source_keys(bounds_on_driver[n]))
        stats = _stats_table(spark, self, snapshot, files)
        for test in self.constant_tests:
            stats = stats.filter(F.coalesce(F.expr(test), F.lit(True)))
        if self.range_tests and self.source_bounds is not None:
            row, schema = self.source_bounds
            bound = typed_literals(row, schema)
            if bound is None:
                stats = stats.crossJoin(F.broadcast(spark.createDataFrame([row], schema)))
                bound = {name: F.col(name) for name in schema.names}
            for index, name in self.range_tests:
                low, high = bound[f"low_{name}"], bound[f"high_{name}"]
                overlaps = (F.col(f"max_{index}") >= low) & (F.col(f"min_{index}") <= high)
                # No non-NULL source key: nothing can match (NULL never equals).
                stats = stats.filter(low.isNotNull() & F.coalesce(overlaps, F.lit(True)))
        for index, rows, schema in self.value_sets:
            value_type = schema["value"].dataType
            if exact_in_python(value_type) and len(rows) <= _MAX_LITERAL_VALUES:
                literals = [F.lit(r["value"]).cast(value_type) for r in rows]
                stats = stats.filter(F.col(f"min_{index}").isin(*literals))
                continue
            values = F.broadcast(spark.createDataFrame(rows, schema))
            stats = stats.join(values, F.col(f"min_{index}") == values["value"], "left_semi")
        bounds = [
            _comparable(F.col(f"{side}_{index}"), self.target_schema.fields[index].dataType).alias(
                f"{side}_{index}"
            )
            for index, _ in self.key_sets
            for side in ("min", "max")
        ]
        kept = {
            row[_ORDINAL] for row in stats.select(_ORDINAL, *bounds).collect() if self._holds_source_keys(row)
        }
        return tuple(f for n, f in enumerate(files) if n in kept)

    def _holds_source_keys(self, bounds: Row | Mapping[str, Any]) -> bool:
        """Whether a file with ``bounds`` (``min_i``, ``max_i`` of key column i) may hold one of the source's
        keys (each key set), and all parts of one of its key tuples."""
        return all(
            _holds_a_key(keys, bounds[f"min_{i}"], bounds[f"max_{i}"]) for i, keys in self.key_sets
        ) and (self.key_tuples is None or _holds_a_tuple(*self.key_tuples, bounds))

    def _integer_key_bounds(
        self, snapshot: Snapshot, files: Sequence[DataFile]
    ) -> list[dict[str, int | None]] | None:
        """Each file's ``min_i``, ``max_i`` of the key columns, from the log's stats as ``deltalake`` types
        them, when the key sets are the only tests and every key is an integer data column (whose stats are
        exact, and compared as longs, ``_comparable``): a Spark query over the stats table costs more than
        the rest of a small merge's pruning. None when a test needs Spark (``select`` then runs one)."""
        adds = snapshot.add_actions
        fields = self.target_schema.fields
        names = {index: fields[index].name for index, _ in self.key_sets}
        if (
            adds is None
            or self.constant_tests
            or self.range_tests
            or self.value_sets
            or not _integer_data_columns(fields, names, self.partition_columns)
        ):
            return None
        position = {f.log_path: n for n, f in enumerate(snapshot.files)}
        subset = adds.take(pa.array([position[f.log_path] for f in files], pa.int64()))
        columns = {
            f"{side}_{index}": (
                subset[f"{side}.{name}"].cast(pa.int64()).to_pylist()
                if f"{side}.{name}" in subset.column_names
                else [None] * subset.num_rows  # no stats: every file may hold it
            )
            for index, name in names.items()
            for side in ("min", "max")
        }
        return [{key: values[n] for key, values in columns.items()} for n in range(subset.num_rows)]


def _integer_data_columns(
    fields: Sequence[StructField], indexes: Iterable[int], partition_columns: Sequence[str]
) -> bool:
    """Whether the columns at ``indexes`` are integer data columns whose stats ``deltalake`` types exactly
    (``Snapshot.add_actions``), under their own names."""
    return all(
        isinstance(fields[i].dataType, IntegralType)
        and fields[i].name not in partition_columns
        and "." not in fields[i].name  # flattened stats name a nested field so
        for i in indexes
    )


def exact_in_python(data_type: DataType) -> bool:
    """Whether a value of ``data_type`` comes back from Python as a literal of the same value: integers,
    decimals, strings and dates (not floats, whose NaN orders apart, nor timestamps, collected as local
    wall-clock times)."""
    return isinstance(data_type, IntegralType | DecimalType | StringType | DateType)


def typed_literals(row: Row, schema: StructType) -> dict[str, Column] | None:
    """The values of ``row`` (in the order of ``schema``) as literals of their ``schema`` types, or None
    when a type has no exact literal. Literals keep a filter over the stats table on the driver (Spark
    evaluates a filter of a local table there); a joined table of the values would cost Spark jobs."""
    if not all(exact_in_python(f.dataType) for f in schema.fields):
        return None
    return {f.name: F.lit(value).cast(f.dataType) for f, value in zip(schema.fields, row, strict=True)}


def _holds_a_key(keys: np.ndarray, low: Any, high: Any) -> bool:
    """Whether a file with bounds [low, high] may hold one of the sorted ``keys``; an unknown bound (NULL:
    no stats, or a truncated string max) bounds nothing on its side."""
    at = 0 if low is None else int(np.searchsorted(keys, low, "left"))
    return at < len(keys) and (high is None or bool(keys[at] <= high))


def _holds_a_tuple(
    indexes: tuple[int, ...], parts: tuple[np.ndarray, ...], row: Row | Mapping[str, Any]
) -> bool:
    """Whether a file with the bounds in ``row`` may hold every part of one of the sorted tuples ``parts``.

    The tuples whose first part is within the file's first bounds are compared with the other bounds at
    once; past ``MAX_TUPLES_SCANNED`` of them the file is kept (a bound on the driver's work, never a wrong
    skip).
    """
    lows = [row[f"min_{i}"] for i in indexes]
    highs = [row[f"max_{i}"] for i in indexes]
    first = parts[0]
    start = 0 if lows[0] is None else int(np.searchsorted(first, lows[0], "left"))
    end = len(first) if highs[0] is None else int(np.searchsorted(first, highs[0], "right"))
    if end - start > MAX_TUPLES_SCANNED:
        return True
    inside = np.ones(max(end - start, 0), dtype=bool)
    for part, low, high in zip(parts[1:], lows[1:], highs[1:], strict=True):
        window = part[start:end]
        if low is not None:
            inside &= (window >= low).astype(bool)
        if high is not None:
            inside &= (window <= high).astype(bool)
    return bool(inside.any())


@dataclass(frozen=True)
class Pruning:
    """The candidate files and the predicate that chose them.

    ``source_keys_unique``: no two source rows have equal values of the equi-join keys that (c) compared
    exactly on the driver (NULLs alike). Each such key's equality is then an exact one on the same values,
    so two source rows matching one target row would share their key tuple: no target row matches more
    than one source row, whatever the condition's other conjuncts. False when unknown.
    """

    files: tuple[DataFile, ...]
    file_filter: FileFilter
    source_keys_unique: bool = False


def prune_files(
    spark: SparkSession, plan: MergePlan, source: DataFrame, *, held: pa.Table | None = None
) -> Pruning:
    """The target files the merge must read, and why (the read predicate).

    Costs one aggregation over the source when the condition has equi-join keys, plus one distinct scan per
    partition column the condition equates with the source; none where the source is ``held`` on the driver
    (``source/held.py``) and its keys are its columns.
    """
    snapshot = plan.snapshot
    base = FileFilter(plan.target_schema, snapshot.partition_columns)
    if has_not_matched_by_source(plan.clauses):
        return Pruning(
            snapshot.files, FileFilter(plan.target_schema, snapshot.partition_columns, read_all=True)
        )
    clauses_test = _matched_clauses_test(plan)
    analysis = _analyse(spark, plan, source)
    if analysis is None:
        if clauses_test is None:
            return Pruning(snapshot.files, base)
        by_clauses = dataclasses.replace(base, constant_tests=(clauses_test,))
        return Pruning(by_clauses.select(spark, snapshot, snapshot.files), by_clauses)
    constant_tests, equalities = analysis
    if clauses_test is not None:
        constant_tests.append(clauses_test)
    aliased = source.alias(plan.spec.source_alias)
    ranged: list[SourceKey] = []
    value_sets: list[tuple[int, list[Row], StructType]] = []
    for key in equalities:
        if plan.target_schema.fields[key.index].name in snapshot.partition_columns:
            rows, schema = _partition_values(aliased, key, held)
            if len(rows) <= MAX_PARTITION_VALUES:
                value_sets.append((key.index, rows, schema))
                continue
        ranged.append(key)
    range_tests, source_bounds, key_sets, key_tuples, keys_unique = _source_key_tests(
        plan, aliased, ranged, held
    )
    file_filter = FileFilter(
        plan.target_schema,
        snapshot.partition_columns,
        constant_tests=tuple(constant_tests),
        range_tests=tuple(range_tests),
        source_bounds=source_bounds,
        value_sets=tuple(value_sets),
        key_sets=tuple(key_sets),
        key_tuples=key_tuples,
    )
    return Pruning(file_filter.select(spark, snapshot, snapshot.files), file_filter, keys_unique)


def _partition_values(
    aliased: DataFrame, key: SourceKey, held: pa.Table | None
) -> tuple[list[Row], StructType]:
    """The source's distinct non-NULL values of partition key ``key`` (up to ``MAX_PARTITION_VALUES`` + 1),
    as rows of one field ``value``: on the driver from ``held`` where the key is a column of it whose values
    Python holds exactly, else from Spark."""
    column = _held_column(held, key)
    if column is not None and exact_in_python(key.data_type):
        values = pc.unique(column.drop_null()).to_pylist()
        return [Row(value=v) for v in values], StructType([StructField("value", key.data_type)])
    values = aliased.select(F.expr(key.expression).alias("value")).where("value IS NOT NULL").distinct()
    return values.limit(MAX_PARTITION_VALUES + 1).collect(), values.schema


def _held_column(held: pa.Table | None, key: SourceKey) -> pa.ChunkedArray | None:
    """Key ``key``'s values in the held source ``held``, where its source side is one of its columns."""
    if held is None or key.column is None or held.column_names.count(key.column) != 1:
        return None
    return held[key.column]


@dataclass(frozen=True)
class KeyBounds:
    """The source's [min, max] of each equi-join key of the ON condition, as aggregates over the source
    (under its alias), and the filter a value of them makes: (a) and the (c) fallback, no key sets."""

    target_schema: StructType
    partition_columns: tuple[str, ...]
    constant_tests: tuple[str, ...]
    range_tests: tuple[tuple[int, str], ...]
    keys: tuple[Column, ...]  # each key's source side
    aggregates: tuple[Column, ...]  # low_n, high_n of each key n

    def file_filter(self, bounds: Sequence[Any], schema: StructType) -> FileFilter:
        """The filter of these tests, with the source's bounds ``bounds`` (the aggregates' values, in the
        order of their ``schema``)."""
        return FileFilter(
            self.target_schema,
            self.partition_columns,
            constant_tests=self.constant_tests,
            range_tests=self.range_tests,
            source_bounds=(Row(*bounds), schema),
        )

    def reach_a_file(
        self, spark: SparkSession, snapshot: Snapshot, bounds: Sequence[Any], schema: StructType
    ) -> bool:
        """Whether some file of ``snapshot`` may hold a row within the source's bounds ``bounds``.

        Integer keys of data columns against integer source keys are tested on the driver, on the log's
        stats as ``deltalake`` types them (a Spark query over the stats table costs more than the rest of a
        small append); other keys (a decimal source key may lie beyond a long), and constant tests, in Spark
        (``FileFilter.select``).
        """
        adds = snapshot.add_actions
        fields = self.target_schema.fields
        bound_types = {f.name: f.dataType for f in schema.fields}
        on_driver = (
            adds is not None
            and not self.constant_tests
            and all(isinstance(bound_types[f"low_{name}"], IntegralType) for _, name in self.range_tests)
            and _integer_data_columns(fields, [i for i, _ in self.range_tests], self.partition_columns)
        )
        if not on_driver:
            return bool(self.file_filter(bounds, schema).select(spark, snapshot, snapshot.files))
        assert adds is not None
        values = dict(zip(schema.names, bounds, strict=True))
        reachable = pa.array(np.ones(adds.num_rows, dtype=bool))
        for index, name in self.range_tests:
            low, high = values[f"low_{name}"], values[f"high_{name}"]
            if low is None:
                return False  # no source row has a value of this key: none matches
            column = fields[index].name
            if f"min.{column}" not in adds.column_names or f"max.{column}" not in adds.column_names:
                continue  # no stats: every file may hold it
            overlaps = pc.and_(
                pc.greater_equal(adds[f"max.{column}"], pa.scalar(low, pa.int64())),
                pc.less_equal(adds[f"min.{column}"], pa.scalar(high, pa.int64())),
            )
            reachable = pc.and_(reachable, pc.fill_null(overlaps, True))
        return bool(pc.any(reachable).as_py())


def key_bounds(spark: SparkSession, plan: MergePlan, source: DataFrame) -> KeyBounds | None:
    """The bounds test of ``plan``'s equi-join keys; None when the condition has none that files' stats
    bound (or has a NOT MATCHED BY SOURCE clause: then every file is read)."""
    if has_not_matched_by_source(plan.clauses):
        return None
    analysis = _analyse(spark, plan, source)
    if analysis is None or not analysis[1]:
        return None
    constant_tests, equalities = analysis
    keys = tuple(F.expr(key.expression) for key in equalities)
    return KeyBounds(
        plan.target_schema,
        plan.snapshot.partition_columns,
        tuple(constant_tests),
        tuple((key.index, str(n)) for n, key in enumerate(equalities)),
        keys,
        tuple(a for n, key in enumerate(keys) for a in _bound_aggregates(n, key)),
    )


def _bound_aggregates(n: int, key: Column) -> list[Column]:
    """The source's [min, max] of equi-join key ``n``, named as ``FileFilter``'s range tests read them."""
    return [F.min(key).alias(f"low_{n}"), F.max(key).alias(f"high_{n}")]


def _source_key_tests(
    plan: MergePlan, aliased: DataFrame, keys: Sequence[SourceKey], held: pa.Table | None
) -> tuple[
    list[tuple[int, str]], tuple[Row, StructType] | None, list[tuple[int, np.ndarray]], KeyTuples | None, bool
]:
    """(range tests, the source's bounds for them, key sets, key tuples, whether no two source rows share
    their key tuple: ``Pruning.source_keys_unique``) for the equi-join keys ``keys``.

    Usually one Spark job (none for a ``held`` source keyed by its columns): the source's distinct key
    tuples, when there are few enough, give every comparable key's set. Otherwise one aggregation gives every
    key's min, max and approximate distinct count; a key with few enough distinct values is then collected on
    its own; the rest keep the global range test.
    """
    if not keys:
        return [], None, [], None, False
    comparable = [
        n
        for n, key in enumerate(keys)
        if _comparable_type(plan.target_schema.fields[key.index].dataType, key.data_type)
    ]
    key_sets, tuples, unique = _key_sets_from_tuples(aliased, keys, comparable, plan.source_rows, held)
    key_tuples = (tuple(keys[n].index for n in comparable), tuples) if tuples is not None else None
    remaining = [n for n in range(len(keys)) if n not in key_sets]
    if not remaining:
        return [], None, [(keys[n].index, key_sets[n]) for n in sorted(key_sets)], key_tuples, unique
    aggregates: list[Column] = []
    for n in remaining:
        expression = F.expr(keys[n].expression)
        aggregates += _bound_aggregates(n, expression)
        # Approximate (one pass, fixed memory), so only a guide: the collect below is bounded exactly.
        aggregates.append(F.approx_count_distinct(expression).alias(f"distinct_{n}"))
    aggregated = aliased.agg(*aggregates)
    summary = aggregated.collect()[0]
    range_tests: list[tuple[int, str]] = []
    for n in remaining:
        collected = None
        if n in comparable and summary[f"distinct_{n}"] <= MAX_SOURCE_KEYS:
            value = _comparable(F.expr(keys[n].expression), keys[n].data_type).alias("value")
            distinct = aliased.select(value).where("value IS NOT NULL").distinct()
            collected = distinct.limit(MAX_SOURCE_KEYS + 1).toArrow()["value"]
        if collected is not None and len(collected) <= MAX_SOURCE_KEYS:
            key_sets[n] = _sorted_distinct(collected)
        else:
            range_tests.append((keys[n].index, str(n)))
    sets = [(keys[n].index, key_sets[n]) for n in sorted(key_sets)]
    return range_tests, (summary, aggregated.schema), sets, key_tuples, unique


def _key_sets_from_tuples(
    aliased: DataFrame,
    keys: Sequence[SourceKey],
    comparable: list[int],
    source_rows: int | None,
    held: pa.Table | None,
) -> tuple[dict[int, np.ndarray], tuple[np.ndarray, ...] | None, bool]:
    """From one job over the source's key tuples: the sorted distinct non-NULL values of each
    ``comparable`` key by key number, with two or more such keys the sorted distinct tuples with no NULL
    part (a NULL never matches), and whether every source row has a key tuple of its own (NULLs alike).
    Nothing (and not unique) when there are more than ``MAX_SOURCE_KEYS`` tuples.

    A source of at most ``MAX_SOURCE_KEYS`` rows (``source_rows``, when counted) sends every row's keys as
    they are, in one scan: Arrow drops the repeats on the driver, and counts them. Else Spark's distinct (a
    shuffle) first, and whether keys repeat stays unknown. A ``held`` source whose keys are its columns is
    read where it is held, with no job.
    """
    if not comparable:
        return {}, None, False
    every_row = source_rows is not None and source_rows <= MAX_SOURCE_KEYS
    collected = _held_keys(held, {n: keys[n] for n in comparable}) if every_row else None
    if collected is None:
        values = [
            _comparable(F.expr(keys[n].expression), keys[n].data_type).alias(f"key_{n}") for n in comparable
        ]
        if every_row:
            collected = aliased.select(*values).toArrow()
        else:
            collected = aliased.select(*values).distinct().limit(MAX_SOURCE_KEYS + 1).toArrow()
            if collected.num_rows > MAX_SOURCE_KEYS:
                return {}, None, False
    key_sets = {n: _sorted_distinct(collected[f"key_{n}"]) for n in comparable}
    names = [f"key_{n}" for n in comparable]
    if len(comparable) < 2:
        # Its distinct values, and NULL once if any row has it.
        distinct_count = len(key_sets[comparable[0]]) + min(1, collected[names[0]].null_count)
        return key_sets, None, every_row and distinct_count == collected.num_rows
    distinct = collected.select(names).group_by(names).aggregate([])  # NULL parts group alike
    unique = every_row and distinct.num_rows == collected.num_rows
    tuples = distinct.drop_null().sort_by([(name, "ascending") for name in names])
    return key_sets, tuple(_bisectable(tuples[name]) for name in names), unique


def _held_keys(held: pa.Table | None, keys: Mapping[int, SourceKey]) -> pa.Table | None:
    """Every row's ``keys`` (by key number, ``key_n``) of the held source ``held``, in ``_comparable`` form,
    read on the driver; None unless each key is a column of it."""
    columns = {}
    for n, key in keys.items():
        column = _held_column(held, key)
        if column is None:
            return None
        columns[f"key_{n}"] = _comparable_values(column, key.data_type)
    return pa.table(columns)


def _sorted_distinct(values: pa.ChunkedArray) -> np.ndarray:
    """The distinct non-NULL ``values``, sorted (by Arrow: strings in UTF-8 byte order, as Spark compares)."""
    distinct = pc.unique(values.drop_null())
    return _bisectable(distinct.take(pc.sort_indices(distinct)))


def _bisectable(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Sorted ``values`` as an array ``np.searchsorted`` bisects and compares with the stats' bounds:
    integers (``_comparable`` makes every integer-like key a long) as int64, the rest as the Python objects
    the stats' bounds are collected as."""
    if pa.types.is_integer(values.type):
        return np.asarray(values.to_numpy(), dtype=np.int64)
    return np.array(values.to_pylist(), dtype=object)


def _comparable_type(target: DataType, source: DataType) -> bool:
    """Whether keys of ``source`` type and bounds of ``target`` type have a driver-side form that orders
    and equates exactly as the ON condition's comparison: the same type, or integers of any width (which
    Spark widens losslessly). Other pairs (say decimal against double) coerce in ways left to Spark."""
    if isinstance(target, IntegralType) and isinstance(source, IntegralType):
        return True
    return target == source and _family(target) is not None and not isinstance(target, FloatType | DoubleType)


def _comparable_values(values: pa.ChunkedArray, data_type: DataType) -> pa.ChunkedArray:
    """``values`` of ``data_type``, as Arrow holds them, in ``_comparable``'s form."""
    if isinstance(data_type, IntegralType):
        return values.cast(pa.int64())
    if isinstance(data_type, TimestampType):
        return values.cast(pa.timestamp("us", tz=values.type.tz)).cast(pa.int64())
    return values


def _comparable(value: Column, data_type: DataType) -> Column:
    """``value`` in a form Python compares as Spark does: integers as long; timestamps as microseconds since
    the epoch (collected datetimes are local wall-clock times, whose order a DST change breaks); dates,
    decimals, timestamps without zone and strings (UTF-8 byte order is code point order) as they are."""
    if isinstance(data_type, IntegralType):
        return value.cast("long")
    if isinstance(data_type, TimestampType):
        return F.unix_micros(value)
    return value


def reads_source(spark: SparkSession, plan: MergePlan, source: DataFrame) -> bool:
    """Whether ``prune_files`` reads the source (its key bounds or partition values), not only its schema."""
    if has_not_matched_by_source(plan.clauses):
        return False
    analysis = _analyse(spark, plan, source)
    return analysis is not None and bool(analysis[1])


# --- The ON condition ------------------------------------------------------------------------------------


def _analyse(
    spark: SparkSession, plan: MergePlan, source: DataFrame
) -> tuple[list[str], list[SourceKey]] | None:
    """(stats tests from target-only conjuncts, the source side of each equi-join key), or None when the
    condition cannot be parsed (then nothing is skipped)."""
    parts = conjuncts(plan.condition)
    if parts is None:
        return None
    target_index = {f.name.lower(): n for n, f in enumerate(plan.target_schema.fields)}
    source_schema = plan.source_schema
    source_names = {f.name.lower() for f in source_schema.fields}
    target_alias, source_alias = plan.spec.target_alias.lower(), plan.spec.source_alias.lower()
    aliased = source.alias(plan.spec.source_alias)

    def target_column(node: exp.Expr) -> int | None:
        node = node.unnest()
        if isinstance(node, exp.Column) and node.table.lower() == target_alias:
            return target_index.get(node.name.lower())
        return None

    def is_source_side(node: exp.Expr) -> bool:
        columns = list(node.find_all(exp.Column))
        allowed = all(
            isinstance(
                n,
                exp.Column
                | exp.Cast
                | exp.DataType
                | exp.Paren
                | exp.Identifier
                | exp.DataTypeParam
                | exp.Literal
                | exp.Var,
            )
            for n in node.walk()
        )
        return (
            bool(columns)
            and allowed
            and all(c.table.lower() == source_alias and c.name.lower() in source_names for c in columns)
        )

    def is_constant(node: exp.Expr) -> bool:
        return not any(True for _ in node.find_all(exp.Column)) and all(
            isinstance(n, _CONSTANT_NODES) for n in node.walk()
        )

    tests: list[str] = []
    equalities: list[SourceKey] = []
    for conjunct in parts:
        test = _constant_test(spark, plan, conjunct, target_column, is_constant)
        if test is not None:
            tests.append(test)
            continue
        if isinstance(conjunct, exp.EQ):
            for column_side, other in (
                (conjunct.this, conjunct.expression),
                (conjunct.expression, conjunct.this),
            ):
                index = target_column(column_side)
                if index is None or not is_source_side(other):
                    continue
                key = _source_key(aliased, source_schema, index, other)
                if _has_bounds(plan, index) and _same_family(
                    plan.target_schema.fields[index].dataType, key.data_type
                ):
                    equalities.append(key)
                break
    return tests, equalities


def _matched_clauses_test(plan: MergePlan) -> str | None:
    """For a merge of MATCHED clauses only, a test over the stats table that keeps a file only where some
    clause's conjuncts that name the target alone hold on its partition values; None where there is none.

    Delta skips files by them (``MergeIntoCommandBase.getTargetOnlyPredicates``: a clause without such a
    conjunct may act anywhere), so a target row of a skipped file is never matched, and a multiple match
    there is no error. Where those conjuncts name partition columns alone, Delta tests them exactly on
    each file's partition values, as this test does (a NULL result skips the file). Where they name a data
    column, Delta skips by that column's stats, which is not built here: every file is read, so a multiple
    match in a file Delta's stats would skip fails the merge where Delta's succeeds.
    """
    if not is_matched_only(plan.clauses):
        return None
    target_alias, source_alias = plan.spec.target_alias.lower(), plan.spec.source_alias.lower()
    partitions = {
        f.name.lower(): n
        for n, f in enumerate(plan.target_schema.fields)
        if f.name in plan.snapshot.partition_columns
    }
    alternatives = []
    for clause in plan.clauses:
        parts = conjuncts(clause.condition) if clause.condition is not None else []
        if parts is None:
            return None
        on_partitions = []
        for part in parts:
            columns = list(part.find_all(exp.Column))
            sides = {c.table.lower() if not c.args.get("db") else None for c in columns}
            if sides - {target_alias, source_alias}:
                return None  # a name without the alias (or a field's path): its side is the resolver's
            if source_alias in sides:
                continue  # not the target's alone
            if any(c.name.lower() not in partitions for c in columns):
                return None  # a data column: Delta's skipping by stats
            on_partitions.append(part.transform(_on_partition_value(partitions)).sql(dialect="spark"))
        if not on_partitions:
            return None
        alternatives.append(" AND ".join(f"({sql})" for sql in on_partitions))
    return "coalesce(" + " OR ".join(f"({sql})" for sql in alternatives) + ", false)"


def _on_partition_value(partitions: Mapping[str, int]) -> Callable[[exp.Expr], exp.Expr]:
    """A node transform: a partition column becomes its value in the stats table (min = max = the value)."""

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column):
            return exp.column(f"min_{partitions[node.name.lower()]}")
        return node

    return replace


@dataclass(frozen=True)
class SourceKey:
    """The source side of an equi-join key ``t.c = <expression>``: ``index`` is target column c's."""

    index: int
    expression: str  # Spark SQL over the source's alias
    data_type: DataType
    column: str | None  # the source column's name, where the expression is one


def _source_key(aliased: DataFrame, schema: StructType, index: int, node: exp.Expr) -> SourceKey:
    """The key whose source side is ``node``, over source rows ``aliased`` of ``schema``: a source column's
    type is read from the schema (an analysis is a round trip to a Connect server), any other expression's
    from Spark."""
    expression = node.sql(dialect="spark")
    node = node.unnest()
    if isinstance(node, exp.Column):
        fields = [f for f in schema.fields if f.name.lower() == node.name.lower()]
        if len(fields) == 1:  # else the names differ only by case: Spark resolves them by the conf
            return SourceKey(index, expression, fields[0].dataType, fields[0].name)
    return SourceKey(index, expression, aliased.select(F.expr(expression)).schema.fields[0].dataType, None)


def _constant_test(
    spark: SparkSession,
    plan: MergePlan,
    conjunct: exp.Expr,
    target_column: Any,
    is_constant: Any,
) -> str | None:
    """A test over the stats table that is false only for files that cannot satisfy ``conjunct``."""
    schema = plan.target_schema
    negated = isinstance(conjunct, exp.Not)
    inner = conjunct.this.unnest() if negated else conjunct
    if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
        index = target_column(inner.this)
        if index is None or not _has_bounds(plan, index):
            return None
        return f"nulls_{index} < {_ROWS}" if negated else f"nulls_{index} > 0"
    if negated:
        return None

    def constant_sql(index: int, node: exp.Expr) -> str | None:
        if not is_constant(node) or not _has_bounds(plan, index):
            return None
        sql = node.sql(dialect="spark")
        constant_type = spark.range(1).select(F.expr(sql)).schema.fields[0].dataType
        return f"({sql})" if _same_family(schema.fields[index].dataType, constant_type) else None

    op = next((sql for kind, sql in _COMPARISONS.items() if type(conjunct) is kind), None)
    if op is not None:
        for column_side, other, flipped in (
            (conjunct.this, conjunct.expression, False),
            (conjunct.expression, conjunct.this, True),
        ):
            index = target_column(column_side)
            if index is None:
                continue
            value = constant_sql(index, other)
            if value is None:
                return None
            return _range_test(index, _FLIPPED[op] if flipped else op, value)
        return None
    if (
        isinstance(conjunct, exp.In)
        and not conjunct.args.get("query")
        and len(conjunct.expressions) > _MAX_IN_TESTS
    ):
        index = target_column(conjunct.this)
        if index is None or not _has_bounds(plan, index) or not all(map(is_constant, conjunct.expressions)):
            return None
        # One test of the list's range, typed once: a test per value would cost a Spark analysis each and
        # an expression of ten thousand ORs for a long IN list.
        array = "array(" + ", ".join(v.sql(dialect="spark") for v in conjunct.expressions) + ")"
        array_type = spark.range(1).select(F.expr(array)).schema.fields[0].dataType
        if not isinstance(array_type, ArrayType) or not _same_family(
            schema.fields[index].dataType, array_type.elementType
        ):
            return None
        below, above = (
            _range_test(index, "<=", f"array_max({array})"),
            _range_test(index, ">=", f"array_min({array})"),
        )
        return f"({below} AND {above})"
    if isinstance(conjunct, exp.In) and not conjunct.args.get("query"):
        index = target_column(conjunct.this)
        values = [constant_sql(index, v) for v in conjunct.expressions] if index is not None else [None]
        if index is None or not values or any(v is None for v in values):
            return None
        return "(" + " OR ".join(_range_test(index, "=", v) for v in values if v) + ")"
    if isinstance(conjunct, exp.Between):
        index = target_column(conjunct.this)
        if index is None:
            return None
        low, high = constant_sql(index, conjunct.args["low"]), constant_sql(index, conjunct.args["high"])
        if low is None or high is None:
            return None
        return f"({_range_test(index, '>=', low)} AND {_range_test(index, '<=', high)})"
    return None


def _range_test(index: int, op: str, value: str) -> str:
    low, high = f"min_{index}", f"max_{index}"
    return {
        "=": f"({low} <= {value} AND {high} >= {value})",
        "<": f"{low} < {value}",
        "<=": f"{low} <= {value}",
        ">": f"{high} > {value}",
        ">=": f"{high} >= {value}",
    }[op]


def _family(data_type: DataType) -> str | None:
    """Types whose comparisons with each other follow one order that min/max stats respect."""
    if isinstance(data_type, IntegralType | DecimalType | FloatType | DoubleType):
        return "number"
    if isinstance(data_type, StringType) and data_type == StringType():  # default (binary) collation only
        return "string"
    if isinstance(data_type, DateType):
        return "date"
    if isinstance(data_type, TimestampType):
        return "timestamp"
    if isinstance(data_type, TimestampNTZType):
        return "timestamp_ntz"
    return None


def _same_family(left: DataType, right: DataType) -> bool:
    family = _family(left)
    return family is not None and family == _family(right)


def _has_bounds(plan: MergePlan, index: int) -> bool:
    """The stats table has bounds for this column: partition values always, data columns when sound."""
    target_field = plan.target_schema.fields[index]
    if target_field.name in plan.snapshot.partition_columns:
        return _family(target_field.dataType) is not None
    return _family(target_field.dataType) is not None and not isinstance(
        target_field.dataType, FloatType | DoubleType
    )


# --- The stats table -------------------------------------------------------------------------------------


def _stats_table(
    spark: SparkSession, file_filter: FileFilter, snapshot: Snapshot, files: Sequence[DataFile]
) -> DataFrame:
    """One row per file: ordinal, row count, per target column min_i, max_i, nulls_i (typed as the column).

    Partition values are exact (min = max = the value). Data-column bounds are dropped where they would not
    be sound: float columns (NaN is not in the bounds), truncated strings; a timestamp max is widened by the
    millisecond Delta truncates.
    """
    adds = snapshot.add_actions
    assert adds is not None, "read_snapshot keeps the add actions"
    position = {f.log_path: n for n, f in enumerate(snapshot.files)}
    subset = adds.take(pa.array([position[f.log_path] for f in files], pa.int64()))
    num_rows = subset.num_rows
    columns: dict[str, Any] = {
        _ORDINAL: pa.array(range(num_rows), pa.int64()),
        _ROWS: subset["num_records"]
        if "num_records" in subset.column_names
        else pa.nulls(num_rows, pa.int64()),
    }
    selected = [_ORDINAL, _ROWS]
    for index, target_field in enumerate(file_filter.target_schema.fields):
        name, data_type = target_field.name, target_field.dataType
        if name in file_filter.partition_columns:
            value = subset[f"partition.{name}"]
            low = high = value
            nulls = pc.if_else(pc.is_null(value), columns[_ROWS], pa.scalar(0, pa.int64()))
        elif _family(data_type) is None or isinstance(data_type, FloatType | DoubleType):
            continue
        else:
            low, high = (
                subset[c] if c in subset.column_names else pa.nulls(num_rows)
                for c in (f"min.{name}", f"max.{name}")
            )
            nulls = subset[f"null_count.{name}"] if f"null_count.{name}" in subset.column_names else None
        columns[f"min_{index}"], columns[f"max_{index}"] = low, high
        columns[f"nulls_{index}"] = nulls if nulls is not None else pa.nulls(num_rows, pa.int64())
        low_sql, high_sql = (f"CAST({bound}_{index} AS {sql_type(data_type)})" for bound in ("min", "max"))
        if name not in file_filter.partition_columns:
            if isinstance(data_type, TimestampType | TimestampNTZType):
                high_sql = f"{high_sql} + INTERVAL 1 MILLISECOND"
            if isinstance(data_type, StringType):
                high_sql = f"CASE WHEN length({high_sql}) < {STRING_PREFIX_LENGTH} THEN {high_sql} END"
        selected += [
            f"{low_sql} AS min_{index}",
            f"{high_sql} AS max_{index}",
            f"CAST(nulls_{index} AS BIGINT) AS nulls_{index}",
        ]
    table = pa.table(
        {k: (v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v) for k, v in columns.items()}
    )
    # SQL text: one parse on the JVM, where Columns would cost round trips per column of a wide table.
    return spark.createDataFrame(table).selectExpr(*selected)
