"""Generated MERGE INTO statements, each run by Delta Lake's own runtime and by our engine on identical copies
of one table, in the tests' session, and every observable outcome compared.

A case is a table (columns drawn from integer, decimal, float, double, boolean, string, binary, date,
timestamp, TIMESTAMP_NTZ, struct (nested two deep), array and map types, with NULLs; partitioned or not;
with or without deletion vectors and the change data feed; some created by Delta itself with column
mapping, a generated column, a column default, row tracking, liquid clustering, type widening (columns
widened after the first rows were written), a VARIANT column, a CHECK constraint or NOT NULL columns; some
of many versions, a row per commit; some with log files hours or days old and a short log retention), a
parquet source (the target's key, unique in four draws of five, NULL in one row of eight; some of the
target's columns, perhaps a column the target lacks), named by its file or by a query over it (filtered,
aggregated per key, non-deterministic), and a statement of one to seven WHEN clauses of every kind, with
conditions, ``*`` (our ``* EXCEPT`` too, where Delta runs its equivalent) and explicit assignments, nested
ones included, non-deterministic expressions now and then, into the target's path or a catalog table over
it, matching keys by an equi-join, a null-safe equality, an OR, an expression or a range, run under
session confs Delta honours (schema evolution by the conf or by ``WITH SCHEMA EVOLUTION``, store
assignment, ANSI off, case sensitivity with columns named in upper case, empty commits recorded). Delta
runs the statement text; our engine runs it as a user's task does: the text parsed into a spec, the
pre-flight checks against the log, then the merge. ``dimensions`` labels what each case draws, and the
test counts the labels as Hypothesis events (the run's coverage table).

What is compared (``Outcome``): the error's class and the version the failed merge left, or else whether a
version was committed, the rows (under row tracking with their row ids and commit versions), the schema, the
table as its log states it (protocol, properties, partition columns, domain metadata, newest checkpoint, and
the history a cleanup left: ``log_state``), the commit's operation, the shape of its parameters, its flags and
the names of its metrics, every row count and every file metric the table's layout decides (files, bytes and
deletion vectors removed or added to), whether files were written, and the change data feed's rows of the
merge as Delta's reader reads them. ``DIFFERENCES`` (tests/engine/delta_differences.py) lists what may differ,
each with its reason; tests/engine/test_differential_comparisons.py shows each comparison catch a planted
difference.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import re
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from hypothesis import currently_in_test_context, event
from hypothesis import strategies as st
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import VariantType

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.log_schema import read_path_schema, read_table_schema
from airflow_provider_deltamerge.delta.log.newest_actions import newest_action
from airflow_provider_deltamerge.delta.log.row_tracking import high_water_mark
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.execute import one_query
from airflow_provider_deltamerge.exceptions import DeltaMergeError
from airflow_provider_deltamerge.session_kind import session_confs_set
from airflow_provider_deltamerge.spec import parse_merge_sql
from airflow_provider_deltamerge.spec.preflight import run_preflight
from airflow_provider_deltamerge.spec.sql_parse import is_path_like
from tests.delta.helpers import age_log
from tests.engine.delta_outcomes import (
    ROW_COUNTS,
    catalogued_sentence,
    delta_error_classes,
    first_sentence,
    jvm_errors,
)
from tests.engine.log_state import LogState, log_state
from tests.oracle import sorted_rows

AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
STORE_ASSIGNMENT = "spark.sql.storeAssignmentPolicy"
CASE_SENSITIVE = "spark.sql.caseSensitive"
ANSI = "spark.sql.ansi.enabled"
SKIP_EMPTY_COMMITS = "spark.databricks.delta.skipRecordingEmptyCommits"
OPTIMIZE_INSERT_ONLY = "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled"
CASTING_FOLLOWS_ANSI = "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag"
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"
TIME_ZONE = "spark.sql.session.timeZone"


@dataclass(frozen=True)
class Feature:
    """A table feature Delta itself creates the table with (CREATE TABLE, then INSERT of the drawn rows):
    its table properties, a column the statements never name (Delta and the engine fill it themselves), the
    columns Delta widens after the insert (name: new type; those the case lacks or partitions by are left),
    the statements Delta runs on the table after the insert (``{table}`` the table, ``{bounded}`` a check
    that the drawn rows meet and a merge may break), and whether the columns the drawn rows hold no NULL
    in are declared NOT NULL."""

    properties: Mapping[str, str] = field(default_factory=dict)
    column: str | None = None
    widened: Mapping[str, str] = field(default_factory=dict)
    after_insert: tuple[str, ...] = ()
    not_null: bool = False


# Type widening: Delta widens the drawn INT and DECIMAL columns after the insert, so the old files hold the
# narrower types; VARIANT: a column of documents Delta fills after the insert, which merges copy and keep.
FEATURES: dict[str, Feature] = {
    "columnMapping": Feature({"delta.columnMapping.mode": "name"}),
    "generated": Feature(column="g BIGINT GENERATED ALWAYS AS (id * 2)"),
    "default": Feature({"delta.feature.allowColumnDefaults": "supported"}, "d STRING DEFAULT 'dflt'"),
    "rowTracking": Feature({"delta.enableRowTracking": "true"}),
    "clustering": Feature(),  # CLUSTER BY the partition column drawn, or the key: see create_with_delta
    "typeWidening": Feature(
        {"delta.enableTypeWidening": "true"}, widened={"v": "BIGINT", "amount": "DECIMAL(12,2)"}
    ),
    "variant": Feature(
        column="doc VARIANT",
        after_insert=(
            "UPDATE {table} SET doc = parse_json(to_json(named_struct('id', id, 'tags', array('x', 'y'))))",
        ),
    ),
    "checkConstraint": Feature(
        after_insert=("ALTER TABLE {table} ADD CONSTRAINT bounded CHECK ({bounded})",),
    ),
    "notNull": Feature(not_null=True),
    # Values of an identity column are Delta's to choose within the protocol's rules: see fresh_identities
    "identity": Feature(column="ident BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 10 INCREMENT BY 3)"),
    # Delta checkpoints such a table in UUID-named V2 checkpoints with sidecars; the engine in classic-named
    "v2Checkpoint": Feature({"delta.feature.v2Checkpoint": "supported", "delta.checkpointPolicy": "v2"}),
}
# The CHECK constraint: on the INT column, which the drawn rows never set to 4 and updates such as
# `t.v + 1` may; on the key alone where the table lacks it (inserts keep it, updates never set it).
BOUNDED = {"v": "v IS NULL OR v <> 4", "id": "id IS NULL OR id < 6"}
# Tables with these writer features are read back with Delta's reader in the session (_spark_outcome):
# deltalake cannot read type widening's, VARIANT's or v2 checkpoints, and only Delta's reader gives row ids.
READ_BY_DELTA = frozenset(
    {
        "v2Checkpoint",
        "rowTracking",
        "clustering",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
    }
)


@dataclass(frozen=True)
class Column:
    """A column the generator may give a table: its types, its values, and expressions over it."""

    sql: str
    arrow: pa.DataType
    values: st.SearchStrategy[Any]
    # Expressions of this column's type over `t` (matched, by source) or `s` (matched, not matched); {c} is
    # the column's name.
    target_exprs: tuple[str, ...]
    source_exprs: tuple[str, ...]
    conditions: tuple[str, ...]  # over {a}.{c}, {a} an alias
    partitionable: bool = False


INT_MAX = 2_147_483_647
# Non-deterministic expressions, which Delta refuses in a condition (ON's too) and in an assigned value; each
# would keep the outcome deterministic. Drawn rarely (``one_in``): a fifth of the statements failed on them.
NON_DETERMINISTIC_CONDITION = "rand() < 2"
NON_DETERMINISTIC_VALUE = "CAST(floor(rand()) AS INT)"  # always 0
COLUMNS: dict[str, Column] = {
    "v": Column(
        "INT",
        pa.int32(),
        st.one_of(st.none(), st.integers(-3, 3), st.just(INT_MAX)),
        ("t.{c} + 1", "t.{c} * 2", "NULL"),
        ("s.{c}", "s.{c} + t.{c}", "s.{c} - 1", "coalesce(s.{c}, 0)"),
        ("{a}.{c} > 0", "{a}.{c} IS NULL", "{a}.{c} < 2"),
        partitionable=True,
    ),
    "big": Column(
        "BIGINT",
        pa.int64(),
        st.one_of(st.none(), st.integers(-5, 5), st.just(3_000_000_000)),
        ("t.{c} - 1",),
        ("s.{c}", "s.{c} * 10"),
        ("{a}.{c} >= 0",),
    ),
    "amount": Column(
        "DECIMAL(10,2)",
        pa.decimal128(10, 2),
        st.one_of(st.none(), st.decimals("-99.99", "99.99", places=2, allow_nan=False)),
        ("t.{c} * 2", "t.{c} + 0.5"),
        ("s.{c}", "s.{c} + t.{c}"),
        ("{a}.{c} > 1.5", "{a}.{c} IS NOT NULL"),
    ),
    "name": Column(
        "STRING",
        pa.string(),
        st.sampled_from(["a", "b", "c", None]),
        ("upper(t.{c})", "concat(t.{c}, '!')"),
        ("s.{c}", "lower(s.{c})", "'new'"),
        ("{a}.{c} = 'a'", "{a}.{c} IS NULL", "{a}.{c} <> 'b'"),
        partitionable=True,
    ),
    "day": Column(
        "DATE",
        pa.date32(),
        st.one_of(st.none(), st.dates(datetime.date(2026, 1, 1), datetime.date(2026, 1, 4))),
        ("date_add(t.{c}, 1)",),
        ("s.{c}", "date_add(s.{c}, 7)"),
        ("{a}.{c} > DATE'2026-01-02'",),
        partitionable=True,
    ),
    "ts": Column(
        "TIMESTAMP",
        pa.timestamp("us", tz="UTC"),
        st.one_of(
            st.none(),
            st.datetimes(
                datetime.datetime(2026, 1, 1),
                datetime.datetime(2026, 1, 3),
                timezones=st.just(datetime.UTC),
            ),
        ),
        ("t.{c} + INTERVAL 1 HOUR",),
        ("s.{c}",),
        ("{a}.{c} < TIMESTAMP'2026-01-02 00:00:00'",),
    ),
    "st": Column(
        "STRUCT<a: INT, b: STRING>",
        pa.struct([("a", pa.int32()), ("b", pa.string())]),
        st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"a": st.one_of(st.none(), st.integers(-2, 2)), "b": st.sampled_from(["x", "y", None])}
            ),
        ),
        ("named_struct('a', t.{c}.a + 1, 'b', t.{c}.b)",),
        ("s.{c}", "named_struct('a', s.{c}.a, 'b', 'z')"),
        ("{a}.{c}.a > 0", "{a}.{c} IS NULL"),
    ),
    "arr": Column(
        "ARRAY<INT>",
        pa.list_(pa.int32()),
        st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=3)),
        ("array_append(t.{c}, 9)",),
        ("s.{c}", "array(1, 2)"),
        ("size({a}.{c}) > 1",),
    ),
    "m": Column(
        "MAP<STRING, INT>",
        pa.map_(pa.string(), pa.int32()),
        st.one_of(
            st.none(),
            st.dictionaries(st.sampled_from(["k", "l"]), st.one_of(st.none(), st.integers(0, 3)), max_size=2),
        ),
        ("map_concat(t.{c}, map('z', 0))",),
        ("s.{c}", "map('k', 1)"),
        ("{a}.{c}['k'] = 1",),
    ),
    "f": Column(
        "FLOAT",
        pa.float32(),
        st.sampled_from([None, -1.5, 0.0, 2.25, 1e10]),
        ("t.{c} * 2",),
        ("s.{c}", "s.{c} + 0.5"),
        ("{a}.{c} > 0",),
    ),
    "dbl": Column(
        "DOUBLE",
        pa.float64(),
        st.sampled_from([None, -0.5, 0.0, 3.75, 1e300]),
        ("t.{c} / 2",),
        ("s.{c}", "s.{c} * 3"),
        ("{a}.{c} < 1.0",),
    ),
    "flag": Column(
        "BOOLEAN",
        pa.bool_(),
        st.sampled_from([None, True, False]),
        ("NOT t.{c}",),
        ("s.{c}", "s.{c} AND t.{c}"),
        ("{a}.{c}", "{a}.{c} IS NULL"),
        partitionable=True,
    ),
    "ntz": Column(
        "TIMESTAMP_NTZ",
        pa.timestamp("us"),
        st.one_of(st.none(), st.datetimes(datetime.datetime(2026, 1, 1), datetime.datetime(2026, 1, 3))),
        ("t.{c} + INTERVAL 1 DAY",),
        ("s.{c}",),
        ("{a}.{c} > TIMESTAMP_NTZ'2026-01-02 00:00:00'",),
    ),
    "bin": Column(
        "BINARY",
        pa.binary(),
        st.sampled_from([None, b"", b"ab", b"\x00\xff"]),
        ("concat(t.{c}, X'01')",),
        ("s.{c}", "unhex('0A')"),
        ("length({a}.{c}) > 1",),
    ),
    "nest": Column(
        "STRUCT<a: STRUCT<b: INT, c: STRING>, d: INT>",
        pa.struct([("a", pa.struct([("b", pa.int32()), ("c", pa.string())])), ("d", pa.int32())]),
        st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {
                    "a": st.one_of(
                        st.none(),
                        st.fixed_dictionaries(
                            {"b": st.one_of(st.none(), st.integers(0, 2)), "c": st.sampled_from(["p", None])}
                        ),
                    ),
                    "d": st.one_of(st.none(), st.integers(0, 2)),
                }
            ),
        ),
        ("named_struct('a', t.{c}.a, 'd', t.{c}.d + 1)",),
        ("s.{c}",),
        ("{a}.{c}.a.b > 0", "{a}.{c}.a IS NULL"),
    ),
}
# The struct columns as a user's grown extract has them: a field the target's struct lacks (between its
# fields, so that fields are matched by name). Schema evolution adds it where a clause assigns the whole
# struct or a `*` does; a clause that assigns some of the struct's fields takes only those.
WIDER = {
    "st": dataclasses.replace(
        COLUMNS["st"],
        sql="STRUCT<a: INT, c: STRING, b: STRING>",
        arrow=pa.struct([("a", pa.int32()), ("c", pa.string()), ("b", pa.string())]),
        values=st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {
                    "a": st.one_of(st.none(), st.integers(-2, 2)),
                    "c": st.sampled_from(["w", None]),
                    "b": st.sampled_from(["x", "y", None]),
                }
            ),
        ),
    ),
    "nest": dataclasses.replace(
        COLUMNS["nest"],
        sql="STRUCT<a: STRUCT<b: INT, z: INT, c: STRING>, d: INT>",
        arrow=pa.struct(
            [("a", pa.struct([("b", pa.int32()), ("z", pa.int32()), ("c", pa.string())])), ("d", pa.int32())]
        ),
        values=st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {
                    "a": st.one_of(
                        st.none(),
                        st.fixed_dictionaries(
                            {
                                "b": st.one_of(st.none(), st.integers(0, 2)),
                                "z": st.one_of(st.none(), st.integers(0, 2)),
                                "c": st.sampled_from(["p", None]),
                            }
                        ),
                    ),
                    "d": st.one_of(st.none(), st.integers(0, 2)),
                }
            ),
        ),
    ),
}
# A source column the target lacks: schema evolution adds it, or INSERT * / UPDATE SET * leave it out.
# Source columns of other types a column may be set from: store assignment casts them (and may overflow).
CASTS = {
    "v": ("s.big", "s.amount"),
    "big": ("s.v", "s.amount"),
    "amount": ("s.v", "s.big"),
    "name": ("s.v", "s.day"),
    "day": ("s.ts", "s.name"),
    "ts": ("s.day", "s.ntz"),
    "ntz": ("s.ts",),
    "f": ("s.dbl", "s.v"),
    "dbl": ("s.f", "s.amount"),
    "flag": ("s.name",),
}
EXTRA = Column("STRING", pa.string(), st.sampled_from(["e", None]), (), ("s.{c}",), ("{a}.{c} IS NULL",))
# Keys from a few values, NULL in one draw of sixteen (a NULL key matches nothing): most statements match
# rows. One in eight left 59.9 % of 2,154 statements changing rows (seeds 20261311-12), under the 60 % wanted.
KEY_VALUES = range(6)
KEY = Column(
    "BIGINT", pa.int64(), st.integers(0, 47).map(lambda n: None if n >= 45 else KEY_VALUES[n % 6]), (), (), ()
)


@dataclass(frozen=True)
class Case:
    """One generated merge: the tables' columns and rows, the statement (``{target}`` and ``{source}`` left
    for the paths), the session confs and table properties it runs with."""

    target_columns: tuple[str, ...]
    source_columns: tuple[str, ...]
    target_rows: tuple[Mapping[str, Any], ...]
    source_rows: tuple[Mapping[str, Any], ...]
    statement: str
    partition_by: str | None = None
    confs: Mapping[str, str] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)
    features: tuple[str, ...] = ()
    # The engine runs a small merge's two phases in one query where it can (engine/execute/one_query.py);
    # drawn off, it runs them as two, as it does for a larger merge.
    two_phases: bool = False
    # The statement names the target by a name in the session's catalog, each copy registered as an
    # external Delta table at its folder, rather than by ``delta.`path```.
    catalog: bool = False
    # A column every ``*`` clause of the engine's spec leaves out, ``* EXCEPT (column)``: an extension of our
    # Python clauses that Spark's grammar lacks, so Delta runs its equivalent (``delta_statement``).
    excepted: str | None = None
    # The target's history: its rows written one commit each (a table of many versions, partitions of
    # several files), and how many hours before the run each version's log files were last modified (the
    # last age for the later versions): with a short log retention a checkpoint's cleanup deletes the old.
    row_commits: bool = False
    log_ages: tuple[float, ...] = ()
    # The source's struct columns are ``WIDER`` than the target's.
    wider: bool = False
    # The engine's side runs the operator's pre-flight checks (spec/preflight.py) before the merge, as the
    # operator does; off, the merge alone, as the job runs it.
    preflight: bool = True

    @property
    def evolving(self) -> bool:
        return AUTO_MERGE in self.confs or "WITH SCHEMA EVOLUTION" in self.statement


def column(name: str, *, wider: bool = False) -> Column:
    """The column ``name``; as the source has it when its structs are ``wider``."""
    if wider and name in WIDER:
        return WIDER[name]
    return KEY if name == "id" else EXTRA if name == "extra" else COLUMNS[name]


def arrow_table(
    columns: Sequence[str], rows: Sequence[Mapping[str, Any]], *, wider: bool = False
) -> pa.Table:
    schema = pa.schema([(name, column(name, wider=wider).arrow) for name in columns])
    return pa.Table.from_pylist([dict(row) for row in rows], schema=schema)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A merge Delta's runtime and our engine both run: see the module's docstring."""
    others = draw(st.lists(st.sampled_from(sorted(COLUMNS)), min_size=1, max_size=4, unique=True))
    target_columns = ("id", *others)
    # Mostly every target column: a source that lacks one makes most statements with * fail alike
    complete = not one_in(draw, 8)
    kept = others if complete else draw(st.lists(st.sampled_from(others), max_size=len(others), unique=True))
    extra = half(draw)
    source_columns = ("id", *kept, *(("extra",) if extra else ()))
    partitionable = [c for c in others if COLUMNS[c].partitionable]
    partition_by = draw(st.sampled_from([None, *partitionable]))

    # the source's struct columns with a field the target's lack in one draw of three where it has one
    wider = any(name in WIDER for name in kept) and one_in(draw, 3)

    def rows(
        columns: Sequence[str], size: int, *, unique: bool = False, wide: bool = False
    ) -> tuple[Mapping[str, Any], ...]:
        row = st.fixed_dictionaries({name: column(name, wider=wide).values for name in columns})
        keys = (lambda r: r["id"]) if unique else None
        empty_too = one_in(draw, 8)  # an empty table or source in one draw of eight
        return tuple(draw(st.lists(row, min_size=0 if empty_too else 1, max_size=size, unique_by=keys)))

    # Source keys repeat in one draw of five (a target row matched twice fails the merge), else are unique.
    repeated_keys = one_in(draw, 5)
    target_rows = rows(target_columns, 6)
    source_rows = rows(source_columns, 5, unique=not repeated_keys, wide=wider)
    features: tuple[str, ...] = ()
    if one_in(draw, 4):
        features = tuple(draw(st.lists(st.sampled_from(sorted(FEATURES)), min_size=1, unique=True)))
    # `*` takes every target column from the source: drawn rarely where the source lacks some (a column a
    # feature adds is never in it)
    lacking = not set(target_columns) <= set(source_columns) or any(FEATURES[f].column for f in features)
    statement = draw(statements(target_columns, source_columns, star_fails=lacking, wider=wider))
    source_rows = keyed_like(
        draw, source_rows, target_rows, inserting_only=INSERTING_ONLY.match(statement) is not None
    )
    confs = {}
    if extra and half(draw):
        # schema evolution by the session's conf, or by the statement's own clause
        if half(draw):
            confs[AUTO_MERGE] = "true"
        else:
            statement = statement.replace("MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO", 1)
    if one_in(draw, 5):
        confs[STORE_ASSIGNMENT] = draw(st.sampled_from(["LEGACY", "STRICT"]))
    if one_in(draw, 6):
        confs[ANSI] = "false"
    if one_in(draw, 6):
        confs[SKIP_EMPTY_COMMITS] = "false"
    if one_in(draw, 5):
        # a column named in another case than the table's: resolved unless the session is case-sensitive (in
        # one draw of eight: then 80 % of such statements fail alike, and fewer than 60 % of all statements
        # changed rows with one draw of four)
        statement = in_upper_case(statement, draw(st.sampled_from(target_columns)))
        confs[CASE_SENSITIVE] = "true" if one_in(draw, 8) else "false"
    properties = {}
    if one_in(draw, 4):
        properties["delta.enableDeletionVectors"] = "true"
    if one_in(draw, 4):
        properties["delta.enableChangeDataFeed"] = "true"
    # A checkpoint after the merge where the interval makes it due (both write one then)
    if one_in(draw, 5):
        properties["delta.checkpointInterval"] = str(draw(st.integers(1, 3)))
    log_ages = draw(aged_log()) if one_in(draw, 5) else ()
    if log_ages:
        # its cleanup, mostly due after the merge: the retention Delta refuses below the deleted files' (7
        # days by default)
        properties["delta.checkpointInterval"] = str(draw(st.sampled_from([1, 1, 2])))
        properties["delta.deletedFileRetentionDuration"] = "interval 1 hours"
        retention = draw(
            st.sampled_from(
                ["interval 1 hours", "interval 1 hours", "1 day 12 hours", "interval 2 days", None]
            )
        )
        if retention:
            properties["delta.logRetentionDuration"] = retention
    # The other confs the engine honours, each off its default in one draw of six
    if one_in(draw, 6):
        confs[OPTIMIZE_INSERT_ONLY] = "false"
    if one_in(draw, 6):
        confs[CASTING_FOLLOWS_ANSI] = "true"
    if one_in(draw, 6):
        confs[MATERIALIZE_SOURCE] = draw(st.sampled_from(["none", "all"]))
    if one_in(draw, 6):
        confs[TIME_ZONE] = draw(st.sampled_from(["America/Los_Angeles", "Asia/Kolkata", "Pacific/Chatham"]))
    case = Case(
        target_columns,
        source_columns,
        target_rows,
        source_rows,
        statement,
        partition_by,
        confs,
        properties,
        features,
        two_phases=half(draw),
        catalog=one_in(draw, 6),
        # Delta's runtime makes a featured table with one INSERT
        row_commits=not features and one_in(draw, 5),
        log_ages=log_ages,
        wider=wider,
    )
    # ``* EXCEPT`` in one draw of four where a ``*`` clause takes every column from the source; under schema
    # evolution only of a column no other part of the statement reads from the source (see delta_statement)
    if not lacking and STAR.search(statement) and one_in(draw, 4):
        exceptable = [
            name
            for name in others
            if name in source_columns
            and not (case.evolving and re.search(rf"\bs\.{name}\b", statement, re.I))
        ]
        if exceptable:
            case = dataclasses.replace(case, excepted=draw(st.sampled_from(exceptable)))
    return case


def keyed_like(
    draw: st.DrawFn,
    source_rows: Sequence[Mapping[str, Any]],
    target_rows: Sequence[Mapping[str, Any]],
    *,
    inserting_only: bool,
) -> tuple[Mapping[str, Any], ...]:
    """The source rows with non-NULL keys both of the target's and not: of the first two, one of the target's
    and one it lacks, the rest the target's in two draws of three; unique where they were. The first is
    the one the statement's clauses act on in two draws of three: one the target lacks where they only
    insert, else one of the target's.

    Drawn on their own, the keys of half the statements met none of the target's (Hypothesis favours short
    lists and small values), and fewer than 60 % changed rows; drawn so but with the first key the target's
    in two draws of three, 89 % of the statements whose source held only the target's keys changed nothing:
    most of them only inserted (Hypothesis's simplest statement)."""
    target_keys = sorted({r["id"] for r in target_rows} - {None})
    unique = len({r["id"] for r in source_rows}) == len(source_rows)
    first_fresh = one_in(draw, 3) != inserting_only
    taken: set[int] = set()
    keyed = []
    for row in source_rows:
        if row["id"] is not None:
            nth = sum(r["id"] is not None for r in keyed)
            fresh = (first_fresh != (nth == 1)) if nth < 2 else one_in(draw, 3)
            wanted = [k for k in KEY_VALUES if (k in target_keys) != fresh and k not in taken]
            key = draw(st.sampled_from(wanted or [k for k in KEY_VALUES if k not in taken]))
            if unique:
                taken.add(key)
            row = {**row, "id": key}
        keyed.append(row)
    return tuple(keyed)


# A statement whose clauses are all NOT MATCHED ones
INSERTING_ONLY = re.compile(r"[^\n]*(\nWHEN NOT MATCHED (?!BY SOURCE)[^\n]*)+\Z")
STAR = re.compile(r"THEN (UPDATE SET|INSERT) \*$", re.MULTILINE)


def delta_statement(case: Case) -> str:
    """The statement Delta runs for ``case``: its own, or where the engine's ``*`` clauses leave a column
    out, the equivalent in Spark's grammar. Without schema evolution that is every ``*`` written out
    without the column (``UPDATE SET *`` sets each target column from the source's namesake, ``INSERT *``
    inserts each). Under evolution an explicit assignment cannot add the source's new columns, so the
    ``*`` clauses stay and the source is read without the column: Delta's evolution then keeps a matched
    row's value and inserts NULL (or the column's default), as ``* EXCEPT`` does."""
    if case.excepted is None:
        return case.statement
    kept = [name for name in case.target_columns if name != case.excepted]
    if case.evolving:
        using = case.statement.split(" USING ", 1)[1].split(" AS s ON ", 1)[0]
        narrowed = f"(SELECT * EXCEPT ({case.excepted}) FROM {using} AS s)"
        return case.statement.replace(f" USING {using} AS s ON ", f" USING {narrowed} AS s ON ", 1)
    written = {
        "UPDATE SET": "UPDATE SET " + ", ".join(f"t.{name} = s.{name}" for name in kept),
        "INSERT": f"INSERT ({', '.join(kept)}) VALUES ({', '.join(f's.{name}' for name in kept)})",
    }
    return STAR.sub(lambda star: f"THEN {written[star[1]]}", case.statement)


@st.composite
def aged_log(draw: st.DrawFn) -> tuple[float, ...]:
    """Hours since each version's log files were last modified: mostly older for older versions; in one
    draw of four as drawn, so that a later version may look older (Delta then makes its timestamp later
    than the earlier one's, and keeps the files that adjustment leans on)."""
    ages = draw(st.lists(st.sampled_from([0.5, 3.0, 30.0, 80.0, 80.0]), min_size=1, max_size=8))
    return tuple(ages if one_in(draw, 4) else sorted(ages, reverse=True))


def dimensions(case: Case) -> list[str]:
    """What the case draws, one label per dimension value: Hypothesis counts them as events, so a run's
    statistics show each dimension's share (the coverage table)."""
    written = case.statement.lower()  # a case may name the key in upper case
    key = max((k for k in KEY_MATCHES if k.lower() in written), key=len, default="?")
    evolution = (
        "clause"
        if "WITH SCHEMA EVOLUTION" in case.statement
        else "conf"
        if AUTO_MERGE in case.confs
        else "off"
    )
    kinds = re.findall(r"^WHEN (NOT MATCHED BY SOURCE|NOT MATCHED|MATCHED)", case.statement, re.MULTILINE)
    return [
        f"ON: {key}",
        f"source: {source_form(case.statement)}",
        *(["non-deterministic expression"] if "rand()" in case.statement.split(" ON ", 1)[1] else []),
        *(["SET path: a field in another case or missing"] if OTHER_FIELD.search(case.statement) else []),
        f"schema evolution: {evolution}",
        *(f"clauses: {count} x WHEN {kind}" for kind, count in sorted(Counter(kinds).items())),
        f"source keys: {_keys_met(case)}",
        f"partitioned: {case.partition_by is not None}",
        *(f"column: {column(name).sql}" for name in case.target_columns if name != "id"),
        *(f"feature: {name}" for name in case.features),
        *(f"property: {name}" for name in sorted(case.properties)),
        *(f"conf: {name}={value}" for name, value in sorted(case.confs.items())),
        f"engine: {'two phases' if case.two_phases else 'one query where it fits'}",
        f"target: {'a catalog table' if case.catalog else 'a path'}",
        *([f"* EXCEPT, schema evolution {'on' if case.evolving else 'off'}"] if case.excepted else []),
        *(["history: a commit per target row"] if case.row_commits else []),
        *(["source: structs wider than the target's"] if case.wider else []),
        *(
            [f"SET path: a field only the source has, evolution {evolution}"]
            if NEW_FIELD.search(case.statement)
            else []
        ),
        *(f"assigns the new column: {how}" for how in _new_column_assignments(case.statement)),
        *([f"history: aged log, {_age_order(case.log_ages)}"] if case.log_ages else []),
    ]


def _new_column_assignments(statement: str) -> list[str]:
    """How the statement's explicit clauses name the source's new column, if they do."""
    named = re.findall(r"(?<![\w.])((?:t\.)?extra) = s\.extra", statement)
    for columns in re.findall(r"INSERT \(([^)]*)\)", statement):
        named += [c.strip() for c in columns.split(",") if c.strip() in NEW_COLUMN_NAMES]
    return sorted(
        {"with the target's alias" if n.startswith("t.") else "as the source names it" for n in named}
    )


def _keys_met(case: Case) -> str:
    target, source = ({r["id"] for r in rows} - {None} for rows in (case.target_rows, case.source_rows))
    met = {"the target's" if source & target else "", "new" if source - target else ""} - {""}
    return " and ".join(sorted(met, reverse=True)) or "none (no non-NULL key)"


def _age_order(ages: Sequence[float]) -> str:
    return "older for older versions" if list(ages) == sorted(ages, reverse=True) else "out of order"


def in_upper_case(statement: str, name: str) -> str:
    """``statement`` with every reference to ``name`` through an alias written in upper case."""
    return re.sub(rf"\b([ts])\.{name}\b", lambda ref: f"{ref[1]}.{name.upper()}", statement)


# How ON matches the keys: an equi-join most often; a null-safe one (NULL keys match); an OR of two
# equalities, an expression of the key and a range (no equi-join key: no pruning by the source's keys).
KEY_MATCHES = (
    "t.id = s.id",
    "t.id = s.id",
    "t.id = s.id",
    "t.id <=> s.id",
    "(t.id = s.id OR t.id = s.id + 10)",
    "t.id = s.id + 1",
    "t.id BETWEEN s.id AND s.id + 1",
)


def half(draw: st.DrawFn) -> bool:
    """True in half the draws: the middle half of a range, as ``st.booleans()`` came True in only 28 % of
    1,500 statements (the second of two phases, say)."""
    return draw(st.integers(1, 6)) in (2, 3, 4)


def one_in(draw: st.DrawFn, n: int) -> bool:
    """True in one draw of ``n``: a value from the middle of the range, as Hypothesis draws a range's ends
    more often than their share. Drawn as ``== 0`` of ``integers(0, 63)``, the non-deterministic condition
    came in 27 % of 1,500 statements, as this in 2 %; each conf drawn off its default "in one draw of six"
    came in 31 to 34 %, as this in 12 to 13 %."""
    return draw(st.integers(1, n)) == (n + 1) // 2


@st.composite
def statements(
    draw: st.DrawFn,
    target: Sequence[str],
    source: Sequence[str],
    *,
    star_fails: bool = False,
    wider: bool = False,
) -> str:
    """A MERGE INTO statement over ``target`` t and ``source`` s, in Spark's grammar (clause kinds in order,
    only each kind's last clause without a condition)."""
    shared = [c for c in target if c in source and c != "id"]
    key = draw(st.sampled_from(KEY_MATCHES))

    def condition(aliases: str) -> str:
        # a non-deterministic one in one draw of 64 (a statement has up to seven), which Delta refuses
        if one_in(draw, 64):
            return NON_DETERMINISTIC_CONDITION
        return draw(st.sampled_from(conditions(target, source, aliases)))

    # the keys alone in two ONs of three, else with a further condition (which most target rows fail: with
    # one in two, fewer than 60 % of statements changed rows)
    on = f"{key} AND {condition('ts')}" if one_in(draw, 3) else key

    def clause_conditions(kinds: int, aliases: str) -> list[str | None]:
        picks: list[str | None] = [condition(aliases) for _ in range(kinds)]
        # the last without a condition in two draws of three: most conditions fail on the rows they meet
        if picks and not one_in(draw, 3):
            picks[-1] = None
        return picks

    matched = [
        (cond, draw(matched_actions(target, source, shared, star_fails, wider)))
        for cond in clause_conditions(draw(st.integers(0, 2)), "ts")
    ]
    not_matched = [
        (cond, draw(insert_actions(target, source, star_fails)))
        for cond in clause_conditions(draw(st.integers(0, 2)), "s")
    ]
    by_source = [
        (cond, draw(by_source_actions(target))) for cond in clause_conditions(draw(st.integers(0, 2)), "t")
    ]
    if not (matched or not_matched or by_source):
        not_matched = [(None, "INSERT *")]
    using = source_query(draw(st.sampled_from(SOURCE_FORMS)), source, draw)
    parts = [f"MERGE INTO delta.`{{target}}` AS t USING {using} AS s ON {on}"]
    for kind, clauses in (
        ("MATCHED", matched),
        ("NOT MATCHED", not_matched),
        ("NOT MATCHED BY SOURCE", by_source),
    ):
        for cond, action in clauses:
            parts.append(f"WHEN {kind}{f' AND {cond}' if cond else ''} THEN {action}")
    return "\n".join(parts)


# How the statement names its source: the parquet file itself most often, else a query over it that users
# write: filtered, aggregated to one row per key (a subquery with aggregates), or filtered by a
# non-deterministic function that keeps every row (Delta materializes such a source before its two scans).
SOURCE_FORMS = ("file", "file", "file", "filtered", "aggregated", "non-deterministic")


def source_query(form: str, source: Sequence[str], draw: st.DrawFn) -> str:
    """The USING part of a statement over the source file's columns ``source``, by ``form``."""
    read = "parquet.`{source}`"
    if form == "filtered":
        return f"(SELECT * FROM {read} AS s WHERE {draw(st.sampled_from(conditions((), source, 's')))})"
    if form == "aggregated":
        # max of every orderable column per key; a map is not orderable: the greatest by its JSON text
        values = [
            f"min_by({name}, to_json({name})) AS {name}" if name == "m" else f"max({name}) AS {name}"
            for name in source
            if name != "id"
        ]
        return f"(SELECT {', '.join(['id', *values])} FROM {read} GROUP BY id)"
    if form == "non-deterministic":
        return f"(SELECT * FROM {read} WHERE rand() < 2)"
    return read


def source_form(statement: str) -> str:
    """The ``SOURCE_FORMS`` entry a statement's source was drawn as."""
    using = statement.split(" USING ", 1)[1].split(" ON ", 1)[0]
    marks = {"aggregated": "GROUP BY", "non-deterministic": "rand()"}
    return next(
        (form for form, mark in marks.items() if mark in using),
        "file" if using.startswith("parquet.") else "filtered",
    )


def conditions(target: Sequence[str], source: Sequence[str], aliases: str) -> list[str]:
    """Conditions over the columns the clause's aliases see (``t``, ``s`` or both)."""
    found = []
    for alias, columns in (("t", target), ("s", source)):
        if alias not in aliases:
            continue
        for name in columns:
            found += [c.format(a=alias, c=name) for c in column(name).conditions]
    if "t" in aliases and "s" in aliases:
        found.append("s.id > t.id - 1")
    return found or ["true"]


@st.composite
def matched_actions(
    draw: st.DrawFn,
    target: Sequence[str],
    source: Sequence[str],
    shared: list[str],
    star_fails: bool,
    wider: bool,
) -> str:
    star = one_in(draw, 8) if star_fails else one_in(draw, 4)
    kind = "star" if star else draw(st.sampled_from(["set", "set", "delete"]))
    if kind == "delete":
        return "DELETE"
    if kind == "star":
        return "UPDATE SET *"
    settable = [c for c in target if c != "id"]
    names = draw(st.lists(st.sampled_from(settable), min_size=1, max_size=2, unique=True))
    sets = []
    for name in names:
        col = column(name)
        options = [*col.target_exprs, *(e for e in col.source_exprs if name in source), *casts(name, source)]
        if name in NESTED_SETS and name in source:
            sets.append(draw(st.sampled_from([*NESTED_SETS[name], *(NEW_FIELD_SETS[name] if wider else ())])))
            continue
        # a non-deterministic value of the INT column in one draw of 32
        value = NON_DETERMINISTIC_VALUE if name == "v" and one_in(draw, 32) else None
        sets.append(f"t.{name} = {value or draw(st.sampled_from(options)).format(c=name)}")
    if "extra" in source and one_in(draw, 5):
        sets.append(f"{draw(st.sampled_from(NEW_COLUMN_NAMES))} = s.extra")
    return "UPDATE SET " + ", ".join(sets)


# The source's new column as an UPDATE or INSERT names it (in one clause of five where the source has it):
# Delta adds it under schema evolution when named as the source names it; with the target's alias it cannot
# resolve it (it resolves a name the target lacks on the source), which fails every such statement: drawn
# in one of four, so that most statements still change rows (in one of three, 85 of 3,395 statements drew
# it, and 84 failed).
NEW_COLUMN_NAMES = ("extra", "extra", "extra", "t.extra")


# Assignments to fields of a struct column, nested ones too; with paths that name a field in another case (it
# resolves unless the session is case-sensitive) and fields the struct lacks (Spark's FIELD_NOT_FOUND).
NESTED_SETS = {
    "st": ("t.st.a = s.st.a", "t.st.b = 'q'", "t.st.B = 'q'", "t.st.c = 'q'"),
    "nest": ("t.nest.a.b = s.nest.a.b", "t.nest.d = s.nest.d + 1", "t.nest.a = s.nest.a", "t.nest.a.z = 1"),
}
# The field a ``WIDER`` source's struct adds, named as the source names it: schema evolution adds it to the
# struct, else it is the target's FIELD_NOT_FOUND.
NEW_FIELD_SETS = {"st": ("st.c = s.st.c",), "nest": ("nest.a.z = s.nest.a.z",)}
NEW_FIELD = re.compile(
    "|".join(
        rf"(?<![\w.]){re.escape(path.split(' = ')[0])} = "
        for paths in NEW_FIELD_SETS.values()
        for path in paths
    )
)
# The paths above that name a field as the struct does not spell it (any case of the column: in_upper_case)
OTHER_FIELD = re.compile(r"\bt\.(?i:st)\.(?:B|c)\b|\bt\.(?i:nest)\.a\.z\b")


def casts(name: str, source: Sequence[str]) -> list[str]:
    """Source columns of other types ``name`` may be set from."""
    return [e for e in CASTS.get(name, ()) if e.removeprefix("s.") in source]


@st.composite
def insert_actions(draw: st.DrawFn, target: Sequence[str], source: Sequence[str], star_fails: bool) -> str:
    if one_in(draw, 8) if star_fails else half(draw):
        return "INSERT *"
    names = [
        "id",
        *draw(st.lists(st.sampled_from([c for c in target if c != "id"]), max_size=3, unique=True)),
    ]
    values = []
    for name in names:
        col = column(name)
        same = [e for e in col.source_exprs if "t." not in e and name in source]
        options = [*same, *casts(name, source)] or ["NULL"]
        values.append("s.id" if name == "id" else draw(st.sampled_from(options)).format(c=name))
    if "extra" in source and one_in(draw, 5):
        names.append(draw(st.sampled_from(NEW_COLUMN_NAMES)))
        values.append("s.extra")
    return f"INSERT ({', '.join(names)}) VALUES ({', '.join(values)})"


@st.composite
def by_source_actions(draw: st.DrawFn, target: Sequence[str]) -> str:
    settable = [c for c in target if c != "id" and column(c).target_exprs]
    if not settable or half(draw):
        return "DELETE"
    name = draw(st.sampled_from(settable))
    return f"UPDATE SET t.{name} = {draw(st.sampled_from(column(name).target_exprs)).format(c=name)}"


# --- running a case ---------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one runner made of a case."""

    error_class: str | None = None
    message: str | None = None
    version: int | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    schema: str = ""
    counts: dict[str, int] = field(default_factory=dict)  # the commit's row counts
    table: dict[str, Any] = field(default_factory=dict)  # table_facts
    files: dict[str, Any] = field(default_factory=dict)  # file_facts
    changes: list[dict[str, Any]] | str | None = None  # the change data feed's rows of the commit
    commit_info: dict[str, Any] = field(default_factory=dict)  # the merge commit's, as written (not compared)
    confs: Mapping[str, str] = field(default_factory=dict)  # the session's, as the case set them
    statement: str = ""  # the case's statement
    # No row of the target before the merge satisfies the ON condition's conjuncts that name the target alone
    # (``on_admits_no_target_row``): a fact of the case, not compared.
    on_admits_no_target_row: bool = False

    @property
    def commit(self) -> dict[str, Any]:
        """The merge commit's ``commit_facts``; empty when the merge made no commit."""
        return commit_facts(self.commit_info) if self.commit_info else {}

    def observed(self) -> dict[str, Any]:
        if self.error_class is not None:
            # a failed merge leaves the table at the version it found
            return {"error": self.error_class, "version": self.version}
        return {
            "version": self.version,
            "rows": self.rows,
            "schema": self.schema,
            "counts": self.counts,
            "table": self.table,
            "commit": self.commit,
            "files": self.files,
            "changes": self.changes,
        }


def write_case(spark: SparkSession, case: Case, folder: Path) -> tuple[str, str, str]:
    """The case's target, twice (Delta's copy and ours), and its source; their paths."""
    target, copy, source = folder / "delta", folder / "engine", folder / "source.parquet"
    rows = arrow_table(case.target_columns, case.target_rows)
    if case.features:
        create_with_delta(spark, case, rows, target, folder / "target-rows.parquet")
    else:
        # a table per row (deltalake 1.6 panics on a slice of a map column)
        commits = (
            [arrow_table(case.target_columns, [r]) for r in case.target_rows] if case.row_commits else [rows]
        )
        write_deltalake(
            str(target),
            commits[0] if commits else rows,
            partition_by=[case.partition_by] if case.partition_by else None,
            configuration=dict(case.properties) or None,
        )
        for commit in commits[1:]:
            write_deltalake(str(target), commit, mode="append")
    shutil.copytree(target, copy)
    if case.log_ages:
        now = time.time()
        for table in (target, copy):
            age_log(table, case.log_ages, now)
    pq.write_table(arrow_table(case.source_columns, case.source_rows, wider=case.wider), source)
    return str(target), str(copy), str(source)


def create_with_delta(spark: SparkSession, case: Case, rows: pa.Table, target: Path, staged: Path) -> None:
    """The case's target as Delta's runtime creates it with the case's features, then its rows inserted by
    Delta (which computes the generated column and fills the default), then what each feature does after."""
    properties = dict(case.properties)
    features = [FEATURES[name] for name in case.features]
    not_null = {
        name
        for name in case.target_columns
        if any(f.not_null for f in features) and all(row[name] is not None for row in case.target_rows)
    }
    columns = [f"`{n}` {column(n).sql}{' NOT NULL' * (n in not_null)}" for n in case.target_columns]
    for feature in features:
        properties.update(feature.properties)
        columns += [feature.column] if feature.column else []
    listed = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())
    table = f"delta.`{target}`"
    # A clustered table has no partitions: it is clustered by the column the case would partition by, if
    # Delta keeps its stats (not a boolean's), else by the key.
    clustered_by = (
        case.partition_by if case.partition_by and column(case.partition_by).sql != "BOOLEAN" else "id"
    )
    layout = (
        f" CLUSTER BY (`{clustered_by}`)"
        if "clustering" in case.features
        else f" PARTITIONED BY (`{case.partition_by}`)"
        if case.partition_by
        else ""
    )
    spark.sql(
        f"CREATE TABLE {table} ({', '.join(columns)}) USING delta{layout}"
        + (f" TBLPROPERTIES ({listed})" if listed else "")
    )
    if rows.num_rows:
        pq.write_table(rows, staged)
        names = ", ".join(f"`{name}`" for name in case.target_columns)
        spark.sql(f"INSERT INTO {table} ({names}) SELECT {names} FROM parquet.`{staged}`")
    for feature in features:
        for narrow, wider in feature.widened.items():
            if narrow in case.target_columns and narrow != case.partition_by:
                spark.sql(f"ALTER TABLE {table} CHANGE COLUMN {narrow} TYPE {wider}")
    # then the constraints: Delta widens no column a CHECK constraint reads
    bounded = BOUNDED["v" if "v" in case.target_columns else "id"]
    for feature in features:
        for statement in feature.after_insert:
            spark.sql(statement.format(table=table, bounded=bounded))


def run_case(spark: SparkSession, case: Case, folder: Path) -> tuple[Outcome, Outcome]:
    """Delta's and our engine's outcome of ``case``, each on its own copy of the target."""
    delta_target, engine_target, source = write_case(spark, case, folder)
    targets = (delta_target, engine_target)
    named = catalog_names(spark, *targets) if case.catalog else nullcontext(targets)

    def written(statement: str, target: str) -> str:
        # a catalog target is named as it is, not as a path
        as_named = statement.replace("delta.`{target}`", "{target}") if case.catalog else statement
        return as_named.format(target=target, source=source)

    before = before_merge(delta_target)  # the copies are alike
    with named as (delta_name, engine_name), session_confs_set(spark, dict(case.confs)):
        delta_written = written(delta_statement(case), delta_name)
        admits_none = on_admits_no_target_row(spark, delta_written, delta_target)
        delta = _delta_outcome(spark, delta_written, delta_target, before)
        statement = written(case.statement, engine_name)
        with (
            mock.patch.object(one_query, "MAX_BYTES", 0) if case.two_phases else nullcontext(),
            _one_query_seen() as seen,
        ):
            ours = _engine_outcome(
                spark, statement, engine_target, before, case.confs, case.excepted, preflight=case.preflight
            )
        if currently_in_test_context():
            event(f"engine ran: {'one query' if seen else 'no one query'}")
    ran = {"confs": case.confs, "statement": case.statement, "on_admits_no_target_row": admits_none}
    return dataclasses.replace(delta, **ran), dataclasses.replace(ours, **ran)


def on_admits_no_target_row(spark: SparkSession, statement: str, target: str) -> bool:
    """Whether the ON condition of ``statement`` has conjuncts that name the target alone and no row of the
    table at ``target`` satisfies them all, as Spark evaluates them in the session (False where Spark cannot
    parse or evaluate them)."""
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(statement)
        alias = plan.targetTable().alias()
        on_target = [
            c.sql() for c in _conjuncts(plan.mergeCondition()) if _aliases_named(c) == {alias.lower()}
        ]
        if not on_target:
            return False
        passing = spark.sql(
            f"SELECT count(*) FROM delta.`{target}` AS {alias} WHERE {' AND '.join(on_target)}"
        ).first()
    except (PySparkException, Py4JJavaError):
        return False
    return passing is not None and passing[0] == 0


def _conjuncts(expression: Any) -> list[Any]:
    """The conjuncts of a parsed (JVM) expression."""
    if expression.getClass().getSimpleName() == "And":
        return _conjuncts(expression.left()) + _conjuncts(expression.right())
    return [expression]


def _aliases_named(expression: Any) -> set[str]:
    """The first name part, lower-cased, of every column a parsed (JVM) expression names."""
    if expression.getClass().getSimpleName() == "UnresolvedAttribute":
        return {expression.nameParts().head().lower()}
    children = expression.children()
    return set().union(*(_aliases_named(children.apply(n)) for n in range(children.size())))


@contextmanager
def catalog_names(spark: SparkSession, *folders: str) -> Iterator[tuple[str, ...]]:
    """A name in the session's catalog for each Delta table folder (external tables of a database of their
    own, dropped afterwards: the folders stay)."""
    database = f"differential_{uuid.uuid4().hex[:12]}"
    spark.sql(f"CREATE DATABASE {database}")
    try:
        names = tuple(f"{database}.target_{n}" for n in range(len(folders)))
        for name, folder in zip(names, folders, strict=True):
            spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{folder}'")
        yield names
    finally:
        spark.sql(f"DROP DATABASE {database} CASCADE")


class _Lines(logging.Handler):
    """Keeps the messages of the records it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def _one_query_seen() -> Iterator[list[str]]:
    """The lines the engine's one query (engine/execute/one_query.py) logs when it settles a merge, as the
    block runs: none when the merge ran otherwise."""
    handler = _Lines()
    logger = logging.getLogger(one_query.__name__)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    settled: list[str] = []
    try:
        yield settled
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        settled += [line for line in handler.lines if line.startswith("One query:")]


def _delta_outcome(spark: SparkSession, statement: str, target: str, before: Before) -> Outcome:
    try:
        spark.sql(statement).collect()
    except (PySparkException, Py4JJavaError) as err:
        errors = jvm_errors(err)
        delta_class = next(iter(delta_error_classes(errors)), None)
        # the message of the error that has the class (under a wrapper such as TASK_WRITE_FAILED), else the
        # outermost one, which names the class where Spark lost its text
        raised = [e for e in errors if e["errorClass"] == delta_class] or errors
        return Outcome(
            error_class=delta_class or type(err).__name__,
            message=raised[0]["message"] if raised else str(err),
            **_left_behind(target, before),
        )
    return table_outcome(spark, target, before)


def _engine_outcome(
    spark: SparkSession,
    statement: str,
    target: str,
    before: Before,
    conf: Mapping[str, str],
    excepted: str | None = None,
    *,
    preflight: bool = True,
) -> Outcome:
    try:
        spec = parse_merge_sql(statement)
        if excepted is not None:
            spec = dataclasses.replace(
                spec,
                clauses=tuple(
                    dataclasses.replace(c, except_columns=(excepted,)) if getattr(c, "star", False) else c
                    for c in spec.clauses
                ),
            )
        if preflight and is_path_like(spec.target):  # as the operator: only the job finds a catalog table
            run_preflight(
                spec, read_target_schema=read_table_schema, read_source_schema=read_path_schema, conf=conf
            )
        run_merge(spark, spec)
    except DeltaMergeError as err:
        return Outcome(
            error_class=err.error_class or type(err).__name__,
            message=err.message,
            **_left_behind(target, before),
        )
    return table_outcome(spark, target, before)


@dataclass(frozen=True)
class Before:
    """What a merge's outcome is judged by from the table before it, read before the merge runs: a cleanup
    after the merge's checkpoint may delete the log's older versions (``delta/commit/log_cleanup.py``)."""

    physical_names: frozenset[str]  # the columns' physical names under column mapping
    identity: IdentityBefore | None
    row_id_mark: int | None  # the row id high-water mark under row tracking


def before_merge(target: str, version: int | None = None) -> Before:
    """``Before`` of the table at ``version`` (its newest if None)."""
    state = log_state(target)
    version = state.version if version is None else version
    tracked = "rowTracking" in state.protocol.get("writerFeatures", ())
    return Before(
        frozenset(PHYSICAL_NAME.findall(_logged_schema(target, version))),
        _identity_before(target, version),
        high_water_mark(target, version) if tracked else None,
    )


def _left_behind(target: str, before: Before) -> dict[str, Any]:
    """The version, table facts and schema (as logged) a failed merge left: those it found, or a failure to
    compare. A failure's outcome compares by its version; the schema says what its message may name."""
    state = log_state(target)
    return {
        "version": state.version,
        "table": table_facts(state),
        "schema": comparable_schema(target, before, logged=True),
    }


def table_outcome(spark: SparkSession, target: str, before: Before | None = None) -> Outcome:
    """The table after a merge as the log states it (``log_state``, a fold of the log neither runner wrote)
    and its rows as deltalake reads them, a reader independent of both runners; as Delta's reader reads
    them for the features deltalake cannot read (``READ_BY_DELTA``). ``before``: read from the log's
    version before the newest where None."""
    state = log_state(target)
    merged = state.commit.get("operation") == "MERGE"
    if before is None:
        before = before_merge(target, state.version - 1 if merged else state.version)
    if READ_BY_DELTA.intersection(state.protocol.get("writerFeatures", ())):
        rows, schema = _rows_by_delta(spark, target, state, before)
    else:
        rows, schema = sorted_rows(target), comparable_schema(target, before)
    metrics = (state.commit.get("operationMetrics") or {}) if merged else {}
    changes = _changes(spark, target, state) if merged else None
    identity = before.identity if merged else None
    if identity is not None:
        schema = fresh_high_water_mark(schema, identity, rows)
        rows = sorted(fresh_identities(rows, identity), key=_row_order)
        if isinstance(changes, list):
            changes = sorted(fresh_identities(changes, identity), key=_row_order)
    return Outcome(
        version=state.version,
        rows=rows,
        schema=schema,
        counts={k: int(metrics[k]) for k in ROW_COUNTS if k in metrics},
        table=table_facts(state),
        files=file_facts(metrics),
        changes=changes,
        commit_info=state.commit if merged else {},
    )


def _rows_by_delta(
    spark: SparkSession, target: str, state: LogState, before: Before
) -> tuple[list[dict[str, Any]], str]:
    """The rows as Delta's reader reads them: VARIANT values as their JSON, and under row tracking each
    row's ``_metadata.row_id`` and ``row_commit_version`` (see ``row_lineage``); the schema as logged."""
    frame = spark.read.format("delta").load(target)
    tracked = "rowTracking" in state.protocol.get("writerFeatures", ())
    lineage = ["_metadata.row_id", "_metadata.row_commit_version"] if tracked else []
    rows = [row.asDict(recursive=True) for row in frame.select(*_as_text(frame), *lineage).collect()]
    if tracked:
        assert before.row_id_mark is not None, "a tracked table had its mark before the merge"
        rows = row_lineage(rows, before.row_id_mark)
    return sorted(rows, key=_row_order), comparable_schema(target, before, logged=True)


def _as_text(frame: DataFrame) -> list[SparkColumn | str]:
    """``frame``'s columns with each VARIANT as its JSON: a collected variant is an object that compares by
    identity, not value."""
    return [
        F.to_json(c).alias(c) if isinstance(frame.schema[c].dataType, VariantType) else c
        for c in frame.columns
    ]


def _row_order(row: Mapping[str, Any]) -> list[tuple[bool, str]]:
    return [(v is None, str(v)) for v in row.values()]


# The metrics of Delta's MERGE command that its commit leaves out and the engine's commit records, so that
# a retry, a sensor or a bound reads every metric from the log (delta/log/operation_metrics.py): Delta's
# SQL metrics only (DeltaOperationMetrics.MERGE lists what its commit keeps).
ENGINE_ONLY_METRICS = frozenset(
    {
        m.NUM_SOURCE_ROWS_IN_SECOND_SCAN,
        m.NUM_TARGET_FILES_BEFORE_SKIPPING,
        m.NUM_TARGET_FILES_AFTER_SKIPPING,
        m.NUM_TARGET_BYTES_BEFORE_SKIPPING,
        m.NUM_TARGET_BYTES_AFTER_SKIPPING,
        m.NUM_TARGET_PARTITIONS_AFTER_SKIPPING,
        m.NUM_TARGET_PARTITIONS_REMOVED_FROM,
        m.NUM_TARGET_PARTITIONS_ADDED_TO,
        m.NUM_TARGET_CHANGE_FILE_BYTES,
    }
)
# File metrics that the table's layout before the merge and the statement decide: the touched files.
LAYOUT_METRICS = (
    m.NUM_TARGET_FILES_REMOVED,
    m.NUM_TARGET_BYTES_REMOVED,
    m.NUM_TARGET_DELETION_VECTORS_ADDED,
    m.NUM_TARGET_DELETION_VECTORS_REMOVED,
    m.NUM_TARGET_DELETION_VECTORS_UPDATED,
)
# File metrics that the writer's tasks and parquet settings decide: compared by whether any was written.
# Change files are not: a commit whose changes are all inserts may leave them to its added files (Delta's
# classic executor writes them, the engine's append path does not), and the feed's rows are compared.
WRITER_METRICS = (m.NUM_TARGET_FILES_ADDED, m.NUM_TARGET_BYTES_ADDED)


def table_facts(state: LogState) -> dict[str, Any]:
    """The table's protocol, properties, partition columns, domain metadata, newest checkpoint and the
    history its log keeps (the first commit and the checkpoints a cleanup left)."""
    return {
        "protocol": state.comparable_protocol(),
        "properties": state.properties,
        "partition_columns": state.partition_columns,
        "domains": state.domains,
        "checkpoint": state.checkpoint,
        "history": {"first commit": state.first_commit, "checkpoints": state.checkpoints},
    }


def commit_facts(commit: Mapping[str, Any]) -> dict[str, Any]:
    """The merge commit's operation, the shape of its parameters (Delta writes each predicate as Spark's
    resolved expression, with expression ids: ``(id#42L = id#44L)``; the engine as the clause writes it,
    ``t.id = s.id``), its blind-append flag, isolation level and read version, and the names of its metrics
    (``ENGINE_ONLY_METRICS`` aside)."""
    parameters = commit.get("operationParameters") or {}
    shapes: dict[str, Any] = {}
    for name, value in parameters.items():
        parsed = json.loads(value)
        shapes[name] = [
            (clause.get("actionType"), sorted(set(clause) - {"actionType"}))
            if isinstance(clause, dict)
            else type(clause).__name__
            for clause in (parsed if isinstance(parsed, list) else [parsed])
        ]
    return {
        "operation": commit.get("operation"),
        "parameters": shapes,
        "isBlindAppend": commit.get("isBlindAppend"),
        "isolationLevel": commit.get("isolationLevel"),
        "readVersion": commit.get("readVersion"),
        "metrics": sorted(set(commit.get("operationMetrics") or {}) - ENGINE_ONLY_METRICS),
    }


def file_facts(metrics: Mapping[str, str]) -> dict[str, Any]:
    """The commit's file metrics: the layout's by value, the writer's by whether any was written."""
    return {
        **{k: int(metrics[k]) for k in LAYOUT_METRICS if k in metrics},
        **{f"{k} > 0": int(metrics[k]) > 0 for k in WRITER_METRICS if k in metrics},
    }


def _changes(spark: SparkSession, target: str, state: LogState) -> list[dict[str, Any]] | str | None:
    """The change data feed's rows of the merge's version as Delta's reader reads them (``table_changes``),
    without their commit timestamps; None when the table records no feed; the error class when Delta's
    reader cannot read it."""
    if state.properties.get("delta.enableChangeDataFeed", "").lower() != "true":
        return None
    try:
        frame = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", state.version)
            .option("endingVersion", state.version)
            .load(target)
            .drop("_commit_timestamp")
        )
        rows = [row.asDict(recursive=True) for row in frame.select(*_as_text(frame)).collect()]
    except (PySparkException, Py4JJavaError) as err:
        return next(iter(delta_error_classes(jvm_errors(err))), type(err).__name__)
    return sorted(rows, key=_row_order)


def row_lineage(rows: list[dict[str, Any]], mark: int) -> list[dict[str, Any]]:
    """Rows under row tracking as they can be compared, ``mark`` the table's row id high-water mark before
    the merge: a row that kept its id (at most ``mark``) with its id and commit version; a row the merge
    inserted with its commit version and ``row_id`` "fresh" when its id is above the mark and no other row
    has it (Delta and the engine may give the inserted rows their fresh ids in another order)."""
    ids = [row["row_id"] for row in rows]
    for row in rows:
        if row["row_id"] is not None and row["row_id"] > mark:
            row["row_id"] = "fresh" if ids.count(row["row_id"]) == 1 else "repeated"
    return rows


@dataclass(frozen=True)
class IdentityBefore:
    """The identity column's definition and high-water mark before the merge (PROTOCOL.md "Identity
    Columns"), as the field's metadata in the log states them."""

    start: int
    step: int
    high_water_mark: int | None


def _identity_before(target: str, version: int) -> IdentityBefore | None:
    """The ``ident`` column of the ``identity`` feature as the log held it at ``version``, if the table has
    it."""
    reader = LogReader(target)
    metadata = newest_action(reader, version, "metaData") or {}
    for found in json.loads(metadata.get("schemaString", '{"fields": []}'))["fields"]:
        kept = found.get("metadata", {})
        if found["name"] == "ident" and "delta.identity.start" in kept:
            mark = kept.get("delta.identity.highWaterMark")
            return IdentityBefore(
                int(kept["delta.identity.start"]), int(kept["delta.identity.step"]), mark and int(mark)
            )
    return None


def fresh_identities(rows: list[dict[str, Any]], identity: IdentityBefore) -> list[dict[str, Any]]:
    """Rows with an identity column as they can be compared: a value the merge generated (beyond the mark
    before it) as "fresh" where the protocol's rules hold (on the column's grid, ``start + k * step``, and
    no other row has it), else "invalid". Delta hands each of its tasks values of its own, so which fresh
    value a row gets depends on how the rows are split among tasks (docs/table-features.md); a value a row
    kept is compared as it is."""
    values = [row.get("ident") for row in rows]
    for row in rows:
        value = row.get("ident")
        if value is not None and _beyond(value, identity):
            valid = (value - identity.start) % identity.step == 0 and values.count(value) == 1
            row["ident"] = "fresh" if valid else "invalid"
    return rows


def _beyond(value: int, identity: IdentityBefore) -> bool:
    if identity.high_water_mark is None:
        return True
    return value > identity.high_water_mark if identity.step > 0 else value < identity.high_water_mark


HIGH_WATER_MARK = re.compile(r'"delta\.identity\.highWaterMark": (-?\d+)')


def fresh_high_water_mark(schema: str, identity: IdentityBefore, rows: list[dict[str, Any]]) -> str:
    """``schema`` with the identity column's high-water mark as "fresh" where the merge generated values and
    the mark is the furthest of them, as the protocol asks (``rows`` as read, before ``fresh_identities``);
    any other mark stays as it is."""
    generated = [
        row["ident"] for row in rows if row.get("ident") is not None and _beyond(row["ident"], identity)
    ]
    if not generated:
        return schema
    furthest = str(max(generated) if identity.step > 0 else min(generated))
    return HIGH_WATER_MARK.sub(
        lambda mark: mark[0].replace(mark[1], '"fresh"') if mark[1] == furthest else mark[0], schema
    )


PHYSICAL_NAME = re.compile(r'"delta\.columnMapping\.physicalName": "([^"]*)"')


def comparable_schema(target: str, before: Before, *, logged: bool = False) -> str:
    """The table's schema as JSON with its keys sorted (their order is no part of it), and the physical
    name of a column the merge added under column mapping as ``<new>``: Delta and the engine alike make it
    of a random UUID. Every other column must keep the physical name it had ``before``. ``logged``: the
    schema as the log's newest metaData holds it (``delta.typeChanges`` included), for tables deltalake
    cannot open."""
    if logged:
        schema = _logged_schema(target, LogReader(target).latest_version())
    else:
        schema = json.dumps(json.loads(DeltaTable(target).schema().to_json()), sort_keys=True)
    return PHYSICAL_NAME.sub(
        lambda name: name[0] if name[1] in before.physical_names else name[0].replace(name[1], "<new>"),
        schema,
    )


def _logged_schema(target: str, version: int) -> str:
    """The schema as the log's newest metaData at ``version`` holds it, as JSON with sorted keys."""
    metadata = newest_action(LogReader(target), version, "metaData")
    return json.dumps(json.loads((metadata or {})["schemaString"]), sort_keys=True)


def delta_failed_internally(delta: Outcome) -> bool:
    """Whether Delta's runtime failed with an internal error of its own (no error class of Spark's or
    Delta's for the statement), as Spark's analyzer does on some casts under Delta 4.4."""
    return delta.error_class in ("INTERNAL_ERROR", "Py4JJavaError") and "INTERNAL_ERROR" in (
        delta.message or ""
    )


def message_agrees(delta: Outcome, ours: Outcome) -> bool:
    """Whether our error says the first sentence of Delta's: its text where Delta's runtime kept it, else
    the message its error catalogue holds for the class, with the values left open."""
    if delta.error_class is None or delta.message is None or ours.error_class is None:
        return True  # no two messages: the outcomes' comparison judged the case
    if "Cannot find main error class" in delta.message:
        expected = catalogued_sentence(delta.error_class)
        return expected.search(ours.message or "") is not None
    return first_sentence(delta.message) in (ours.message or "")
