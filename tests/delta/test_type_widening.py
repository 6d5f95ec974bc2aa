"""Our merges into tables with type widening (table feature ``typeWidening``, issue 39 item 3).

Delta made each table with ``delta.enableTypeWidening=true``, wrote rows, widened columns with ``ALTER TABLE
... CHANGE COLUMN ... TYPE`` (a top-level int, a decimal, a struct field, an array element, a map value) and
wrote more rows, so old files hold the narrower types. Our merge (one statement per executor, with and
without schema evolution, the evolution widening further columns) and Delta's own MERGE of the same statement
on an identical copy give the same rows, the same schema in the log (``delta.typeChanges`` included), the same
protocol and counts; Delta reads our table back and merges into it next. Where Delta refuses, we refuse with
its error class and leave the table as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.commit import transaction as commit_module
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.engine.resolve.type_widening import AUTOMATIC_CONF
from airflow_provider_deltamerge.exceptions import DeltaMergeError
from airflow_provider_deltamerge.session_kind import session_confs_set
from tests import run_profile
from tests.delta.helpers import (
    STATEMENTS,
    assert_merges_agree,
    assert_next_merges_agree,
    copy_of,
    craft_table,
    delta_merge,
    delta_rows,
    log_actions,
    ours,
)
from tests.engine.conftest import ENGINE_SETTINGS
from tests.engine.delta_outcomes import delta_error_classes, first_sentence, jvm_errors
from tests.run_profile import pairing_of_the_day

WIDENING = "'delta.enableTypeWidening' = 'true', 'delta.feature.timestampNtz' = 'supported'"
COLUMNS = (
    "id INT, qty SMALLINT, price DECIMAL(6,2), day DATE, s STRUCT<a: TINYINT, b: FLOAT>, arr ARRAY<INT>, "
    "m MAP<STRING, INT>, region STRING"
)
# Delta's widenings before our merge: each its own commit (versions 2-5).
ALTERS = ("id TYPE BIGINT", "price TYPE DECIMAL(10,4)", "s.a TYPE INT", "arr.element TYPE BIGINT")


def row(i: int) -> str:
    """Row ``i`` as a SQL tuple of the table's columns (literals cast by the INSERT to the columns' types)."""
    return (
        f"({i}, {i * 10}, {i}.25, DATE'2024-01-{i:02d}', named_struct('a', {i}, 'b', {i}.5), "
        f"array({i}, {i + 1}), map('k{i}', {i}), '{'eu' if i % 2 else 'us'}')"
    )


def widened_table(spark: SparkSession, path: Path) -> str:
    """Rows 1-6 written at version 1 with the narrow types, the ``ALTERS`` at versions 2-5, rows 7-9 at
    version 6 with the wide ones."""
    table = f"delta.`{path}`"
    spark.sql(f"CREATE TABLE {table} ({COLUMNS}) USING delta TBLPROPERTIES ({WIDENING})").collect()
    spark.sql(f"INSERT INTO {table} VALUES {', '.join(row(i) for i in range(1, 7))}").collect()
    for change in ALTERS:
        spark.sql(f"ALTER TABLE {table} CHANGE COLUMN {change}").collect()
    spark.sql(f"INSERT INTO {table} VALUES {', '.join(row(i) for i in range(7, 10))}").collect()
    return str(path)


def small_table(spark: SparkSession, target: str, columns: str, rows: str, *, enabled: bool = True) -> None:
    """Delta creates ``target`` with ``columns`` and ``delta.enableTypeWidening`` = ``enabled``, then inserts
    ``rows`` (the text after ``INSERT INTO t``)."""
    spark.sql(
        f"CREATE TABLE delta.`{target}` ({columns}) USING delta "
        f"TBLPROPERTIES ('delta.enableTypeWidening' = '{str(enabled).lower()}')"
    ).collect()
    spark.sql(f"INSERT INTO delta.`{target}` {rows}").collect()


def wide_source(spark: SparkSession, tmp_path: Path, columns: str) -> str:
    """A parquet source: deletes 2 (qty < 0), updates 3 and 8, inserts 10 and 11; ``columns`` the SELECT
    list over ``id`` and ``sign`` that gives its columns their types."""
    path = str(tmp_path / "source")
    spark.sql(
        f"SELECT {columns} FROM VALUES (2, -1), (3, 1), (8, 1), (10, 1), (11, 1) AS v(id, sign)"
    ).coalesce(1).write.parquet(path)
    return path


# The source's columns at the table's current types (no widening) and wider ones: qty SMALLINT -> INT,
# price DECIMAL(10,4) -> DECIMAL(12,4), day DATE -> TIMESTAMP_NTZ, s.a INT -> BIGINT, s.b FLOAT -> DOUBLE,
# m's value INT -> BIGINT; arr narrower than the table's (BIGINT stays).
SAME_TYPES = (
    "CAST(id AS BIGINT) AS id, CAST(id * 100 * sign AS SMALLINT) AS qty, CAST(id AS DECIMAL(10,4)) AS price, "
    "DATE'2025-01-01' AS day, named_struct('a', CAST(id AS INT), 'b', CAST(id AS FLOAT)) AS s, "
    "array(CAST(id AS BIGINT)) AS arr, map('n', CAST(id AS INT)) AS m, 'eu' AS region"
)
WIDER_TYPES = (
    "CAST(id AS BIGINT) AS id, CAST(id * 100000 * sign AS INT) AS qty, "
    "CAST(id + 0.1234 AS DECIMAL(12,4)) AS price, TIMESTAMP_NTZ'2025-01-01 10:30:00' AS day, "
    "named_struct('a', CAST(id AS BIGINT) * 3000000000, 'b', CAST(id AS DOUBLE) / 3) AS s, "
    "array(CAST(id AS INT)) AS arr, map('n', CAST(id AS BIGINT) * 3000000000) AS m, 'eu' AS region"
)


def latest(table: str, kind: str) -> dict[str, Any]:
    """The newest action of ``kind`` (``metaData``, ``protocol``) in the table's log."""
    for version in range(LogReader(table).latest_version(), -1, -1):
        found = log_actions(table, version, kind)
        if found:
            return found[-1]
    raise AssertionError(f"no {kind} action in {table}")


def logged_schema(table: str) -> dict[str, Any]:
    """The table's schema as its log records it (the raw ``schemaString``: Delta's reader hides
    ``delta.typeChanges``)."""
    return dict(json.loads(latest(table, "metaData")["schemaString"]))


def type_changes(schema: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every ``delta.typeChanges`` entry of ``schema``, by the dotted name of the field carrying it."""
    found: dict[str, list[dict[str, Any]]] = {}

    def walk(data_type: Any, path: str) -> None:
        if not isinstance(data_type, dict):
            return
        for field in data_type.get("fields", []):
            name = f"{path}{field['name']}"
            if "delta.typeChanges" in field.get("metadata", {}):
                found[name] = field["metadata"]["delta.typeChanges"]
            walk(field["type"], name + ".")
        for key in ("elementType", "keyType", "valueType"):
            walk(data_type.get(key), path)

    walk(schema, "")
    return found


def merge_statement(executor: str, evolve: bool) -> str:
    statement = STATEMENTS[executor]
    return statement.replace("MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO") if evolve else statement


# Every executor with and without evolution locally; in CI one pairing a day: the differential suite draws
# widened tables in every run (tests/run_profile.py)
@pytest.mark.parametrize(
    ("executor", "evolve"),
    pairing_of_the_day(sorted(STATEMENTS), [False, True]),
    ids=lambda value: {False: "same-types", True: "evolution-widens"}.get(value, value),
)
def test_merge_into_widened_table_gives_deltas_rows_schema_and_protocol(spark, tmp_path, executor, evolve):
    # Given: a table Delta widened between two writes (old files hold INT, DECIMAL(6,2), TINYINT and INT
    # where the schema now says BIGINT, DECIMAL(10,4), INT and BIGINT)
    target = widened_table(spark, tmp_path / "ours")
    before = type_changes(logged_schema(target))
    assert before == {
        "id": [{"fromType": "integer", "toType": "long"}],
        "price": [{"fromType": "decimal(6,2)", "toType": "decimal(10,4)"}],
        "s.a": [{"fromType": "byte", "toType": "integer"}],
        "arr": [{"fromType": "integer", "toType": "long", "fieldPath": "element"}],
    }
    src = wide_source(spark, tmp_path, WIDER_TYPES if evolve else SAME_TYPES)
    statement = merge_statement(executor, evolve)
    # When/Then: our merge and Delta's on a copy give the same rows and counts, ours on the statement's
    # executor, at version 7
    # (deltalake 1.6 does not read typeWidening tables: Delta is the only reader compared)
    agreed = assert_merges_agree(
        spark, target, statement, src, executor=executor, version=7, deltalake_reads=False
    )
    # The same schema in the log, type changes included, and the same protocol
    assert logged_schema(target) == logged_schema(agreed.theirs)
    assert latest(target, "protocol") == latest(agreed.theirs, "protocol")
    if evolve:
        after = type_changes(logged_schema(target))
        assert after["qty"] == [{"fromType": "short", "toType": "integer"}]
        assert after["day"] == [{"fromType": "date", "toType": "timestamp_ntz"}]
        assert after["s.a"] == [*before["s.a"], {"fromType": "integer", "toType": "long"}]
        assert after["m"] == [{"fromType": "integer", "toType": "long", "fieldPath": "value"}]
        assert after["arr"] == before["arr"]
    else:
        assert log_actions(target, 7, "metaData") == []
    # When/Then: Delta's own next merge works on our table and gives what it gives on its copy
    assert_next_merges_agree(spark, target, agreed.theirs, deltalake_reads=False)


@pytest.mark.parametrize("key", ["id", "day"])
def test_old_files_stats_prune_at_the_widened_type(spark, tmp_path, key):
    # Given: the widened table with ``day`` widened from DATE to TIMESTAMP_NTZ too: its four files' stats
    # hold INT ids and DATE days in the two old files
    target = widened_table(spark, tmp_path / "ours")
    spark.sql(f"ALTER TABLE delta.`{target}` CHANGE COLUMN day TYPE TIMESTAMP_NTZ").collect()
    src = wide_source(
        spark,
        tmp_path,
        SAME_TYPES.replace("DATE'2025-01-01'", "CAST(DATE_ADD(DATE'2023-12-31', id) AS TIMESTAMP_NTZ)"),
    )
    statement = (
        "MERGE INTO delta.`{target}` AS t "
        "USING (SELECT * FROM parquet.`{source}` WHERE id IN (3, 8)) AS s "
        f"ON t.{key} = s.{key} WHEN MATCHED THEN UPDATE SET t.qty = s.qty"
    )
    # When/Then: our merge updates rows 3 (an old file) and 8 (a new one) as Delta's does
    agreed = assert_merges_agree(
        spark, target, statement, src, executor="matched_only", version=8, deltalake_reads=False
    )
    assert {r["id"]: r["qty"] for r in agreed.rows if r["id"] in (3, 8)} == {3: 300, 8: 800}
    # And it read only the two files whose stats, read at the widened type, can hold the keys
    assert agreed.result.metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING] == 4
    assert agreed.result.metrics[m.NUM_TARGET_FILES_AFTER_SKIPPING] == 2


# --- generated: one column widened (or not) by a merge with schema evolution ------------------------------

TYPES = (
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL(5,2)",
    "DECIMAL(9,2)",
    "DECIMAL(10,0)",
    "DECIMAL(12,4)",
    "DECIMAL(20,0)",
    "DATE",
    "TIMESTAMP_NTZ",
)
# Each example creates a table with Delta and merges twice (about 15 s on the CI machine): CI draws 6 pairs
# (the same each run), the local profile 42 new ones.
PAIR_SETTINGS = settings(
    ENGINE_SETTINGS, max_examples=ENGINE_SETTINGS.max_examples // 7, derandomize=not run_profile.LOCAL
)
PAIR_STATEMENTS = {
    "classic": (
        "MERGE WITH SCHEMA EVOLUTION INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    ),
    "insert_only": STATEMENTS["insert_only"].replace("MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO"),
}


def value(sql_type: str, k: int) -> str:
    """A value of ``sql_type`` small enough for every type here (``k`` from 1 to 9), with a fraction where
    the type keeps one."""
    if sql_type in ("DATE", "TIMESTAMP_NTZ"):
        return f"CAST(DATE_ADD(DATE'2024-01-01', {k}) AS {sql_type})"
    fraction = sql_type in ("FLOAT", "DOUBLE") or ("," in sql_type and not sql_type.endswith(",0)"))
    return f"CAST({k}{'.5' if fraction else ''} AS {sql_type})"


def outcome(spark: SparkSession, run: Callable[[], Any], target: str) -> dict[str, Any]:
    """What a merge made of ``target``: the error class, or the rows as Delta reads them and the schema and
    protocol in the log."""
    try:
        run()
    except DeltaMergeError as err:
        return {"error": err.error_class}
    except (PySparkException, Py4JJavaError) as err:
        return {"error": next(iter(delta_error_classes(jvm_errors(err))), type(err).__name__)}
    return {
        "rows": delta_rows(spark, target),
        "schema": logged_schema(target),
        "protocol": latest(target, "protocol"),
    }


@settings(PAIR_SETTINGS)
@given(
    current=st.sampled_from(TYPES),
    update=st.sampled_from(TYPES),
    executor=st.sampled_from(sorted(PAIR_STATEMENTS)),
    enabled=st.sampled_from([True, True, True, False]),
    automatic=st.sampled_from([None, None, None, "same_family_type", "never"]),
)
def test_a_merge_widens_a_column_exactly_when_delta_does(
    spark, tmp_path_factory, current, update, executor, enabled, automatic
):
    # Given: a table Delta made with a column of type ``current`` (type widening on or off), a source whose
    # column of the same name is of type ``update``, and the session's allowAutomaticWidening (Delta's
    # default: always)
    folder = tmp_path_factory.mktemp("pair")
    target = str(folder / "ours")
    small_table(
        spark,
        target,
        f"id BIGINT, v {current}",
        f"VALUES (1, {value(current, 1)}), (2, {value(current, 2)})",
        enabled=enabled,
    )
    theirs = copy_of(target, "theirs")
    src = str(folder / "source")
    spark.sql(
        f"SELECT CAST(id AS BIGINT) AS id, {value(update, 3)} AS v FROM VALUES (2), (3) AS s(id)"
    ).write.parquet(src)
    statement = PAIR_STATEMENTS[executor]
    confs = {AUTOMATIC_CONF: automatic} if automatic else {}
    # When: our engine and Delta's runtime run the same merge, each on its copy
    with session_confs_set(spark, confs):
        ours_outcome = outcome(spark, lambda: ours(spark, statement, target, src), target)
        theirs_outcome = outcome(spark, lambda: delta_merge(spark, statement, theirs, src), theirs)
    # Then: the same error class, or the same rows, schema (type changes included) and protocol
    assert ours_outcome == theirs_outcome
    if "error" in ours_outcome:
        assert LogReader(target).latest_version() == 1


# --- what Delta refuses -----------------------------------------------------------------------------------


def both_refuse(
    spark: SparkSession, statement: str, target: str, theirs: str, src: str
) -> tuple[str, str, DeltaMergeError]:
    """Delta's error class and message for ``statement`` on ``theirs``, and our error on ``target`` (both
    must fail)."""
    with pytest.raises((PySparkException, Py4JJavaError)) as delta_raised:
        delta_merge(spark, statement, theirs, src)
    errors = jvm_errors(delta_raised.value)
    delta_class = delta_error_classes(errors)[0]
    delta_message = next(e["message"] for e in errors if e["errorClass"] == delta_class)
    with pytest.raises(DeltaMergeError) as raised:
        ours(spark, statement, target, src)
    return delta_class, str(delta_message), raised.value


DEPENDENT = {
    "check-constraint": ("v INT", "ALTER TABLE delta.`{target}` ADD CONSTRAINT positive CHECK (v > 0)"),
    "generated-column": ("v INT, g INT GENERATED ALWAYS AS (v * 2)", None),
}


@pytest.mark.parametrize("kind", sorted(DEPENDENT))
def test_widening_a_column_an_expression_depends_on_is_refused_as_delta_does(spark, tmp_path, kind):
    # Given: a table with type widening whose INT column a CHECK constraint or a generated column refers to,
    # and a source with that column as BIGINT
    columns, alter = DEPENDENT[kind]
    target = str(tmp_path / "ours")
    small_table(spark, target, f"id BIGINT, {columns}", "(id, v) VALUES (1, 1), (2, 2)")
    if alter:
        spark.sql(alter.format(target=target)).collect()
    theirs = copy_of(target, "theirs")
    before = LogReader(target).latest_version()
    src = str(tmp_path / "source")
    spark.sql("SELECT CAST(2 AS BIGINT) AS id, CAST(3000000000 AS BIGINT) AS v").write.parquet(src)
    # When: Delta and our engine run the merge with schema evolution, each on its copy
    delta_class, delta_message, raised = both_refuse(spark, PAIR_STATEMENTS["classic"], target, theirs, src)
    # Then: ours fails with Delta's class and first sentence, and the table stays as it was
    assert raised.error_class == delta_class
    assert first_sentence(delta_message) in raised.message
    assert delta_message.split("\n")[1] in raised.message  # the expression, as Delta names it
    assert LogReader(target).latest_version() == before
    assert delta_rows(spark, target) == delta_rows(spark, theirs)


def test_a_type_change_delta_does_not_allow_in_the_log_is_refused_as_delta_does(spark, tmp_path):
    # Given: a table whose log says a writer changed a column from BIGINT to INT (no widening)
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {
            "name": "qty",
            "type": "integer",
            "nullable": True,
            "metadata": {"delta.typeChanges": [{"fromType": "long", "toType": "integer"}]},
        },
    ]
    feature = ["typeWidening"]
    target = craft_table(
        tmp_path / "ours", reader=3, writer=7, reader_features=feature, writer_features=feature, fields=fields
    )
    theirs = copy_of(target, "theirs")
    src = str(tmp_path / "source")
    spark.sql("SELECT CAST(2 AS BIGINT) AS id, 3 AS qty").write.parquet(src)
    # When: Delta and our engine merge into it, each into its copy
    delta_class, delta_message, raised = both_refuse(spark, STATEMENTS["insert_only"], target, theirs, src)
    # Then: ours refuses with Delta's class and sentence, and commits nothing
    assert raised.error_class == delta_class == "DELTA_UNSUPPORTED_TYPE_CHANGE_IN_SCHEMA"
    assert first_sentence(delta_message) in raised.message
    assert LogReader(target).latest_version() == 0


def test_date_to_timestamp_ntz_without_the_timestamp_ntz_feature_is_refused_as_delta_does(spark, tmp_path):
    # Given: a table with type widening but without the timestampNtz feature, with a DATE column, and a
    # source with that column as TIMESTAMP_NTZ
    target = str(tmp_path / "ours")
    small_table(spark, target, "id BIGINT, v DATE", "VALUES (1, DATE'2024-01-01'), (2, DATE'2024-01-02')")
    assert "timestampNtz" not in latest(target, "protocol")["writerFeatures"]
    theirs = copy_of(target, "theirs")
    src = str(tmp_path / "source")
    spark.sql("SELECT CAST(2 AS BIGINT) AS id, TIMESTAMP_NTZ'2024-02-01 10:00:00' AS v").write.parquet(src)
    statement = PAIR_STATEMENTS["classic"]
    # When: Delta runs the merge, and ours
    theirs_outcome = outcome(spark, lambda: delta_merge(spark, statement, theirs, src), theirs)
    ours_outcome = outcome(spark, lambda: ours(spark, statement, target, src), target)
    # Then: both refuse, naming the feature the widening needs, and the table stays as it was
    assert ours_outcome == theirs_outcome == {"error": "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT"}
    assert LogReader(target).latest_version() == 1


# --- the preview's commit version ------------------------------------------------------------------------


def preview_table(spark: SparkSession, target: str) -> None:
    """Delta makes ``target`` with ``typeWidening-preview`` (whose type changes carry ``tableVersion``)."""
    spark.sql(
        f"CREATE TABLE delta.`{target}` (id BIGINT, qty SMALLINT) USING delta TBLPROPERTIES "
        "('delta.feature.typeWidening-preview' = 'supported', 'delta.enableTypeWidening' = 'true')"
    ).collect()
    spark.sql(f"INSERT INTO delta.`{target}` VALUES (1, 1), (2, 2)").collect()


def test_a_preview_table_s_type_change_names_the_version_the_merge_lands_at(spark, tmp_path, monkeypatch):
    # Given: a typeWidening-preview table Delta made, a copy of it, and a source that widens qty to INT
    target = str(tmp_path / "ours")
    preview_table(spark, target)
    theirs, raced = copy_of(target, "theirs"), copy_of(target, "raced")
    src = str(tmp_path / "source")
    spark.sql("SELECT CAST(2 AS BIGINT) AS id, 100000 AS qty").write.parquet(src)
    statement = PAIR_STATEMENTS["classic"]
    # When: our merge and Delta's each commit version 2 of their copy
    ours(spark, statement, target, src)
    delta_merge(spark, statement, theirs, src)
    # Then: the same type change, recorded at version 2
    assert type_changes(logged_schema(target)) == type_changes(logged_schema(theirs))
    assert type_changes(logged_schema(target))["qty"][0]["tableVersion"] == 2
    # When: Delta inserts a row our merge never reads (version 2) just before our commit's first attempt
    real = commit_module._try_commit

    def after_a_concurrent_insert(base: Any, actions: Any, store: Any) -> bool:
        if LogReader(raced).latest_version() == 1:
            spark.sql(f"INSERT INTO delta.`{raced}` VALUES (100, 7)").collect()
        return real(base, actions, store)

    monkeypatch.setattr(commit_module, "_try_commit", after_a_concurrent_insert)
    result = ours(spark, statement, raced, src)
    # Then: rebased over it, the merge lands at version 3 and its type change says 3, as Delta's conflict
    # checker rewrites it
    assert (result.rebased_over, result.version) == ((2,), 3)
    changes = type_changes(logged_schema(raced))["qty"]
    assert changes == [{**type_changes(logged_schema(theirs))["qty"][0], "tableVersion": 3}]
    assert sorted(r["id"] for r in delta_rows(spark, raced)) == [1, 2, 100]
