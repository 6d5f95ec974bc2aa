"""Our merges into tables with VARIANT columns (table feature ``variantType``, issue 39 item 4).

Delta made each table with a VARIANT column ``v`` and one inside a struct (``st.w``), rows written with
``parse_json`` (an object, an array, a JSON null and a SQL NULL). Each statement assigns, compares
(``variant_get`` and Spark 4's path syntax ``t.v:a::int`` in ON and clause conditions) and inserts VARIANT
values; our merge and Delta's own MERGE of
the same statement on an identical copy give the same rows (VARIANT compared through ``to_json``), the same
counts, schema and protocol, and the same nullCount per column in the new files (Delta collects no
min/max for VARIANT). Our files hold VARIANT as Spark writes it, a group of ``value`` and ``metadata``
binaries, never shredded (``typed_value``) on a table that does not enable shredding, though Spark 4.2
shreds by default. Delta reads our table back and merges into it next.
"""

from __future__ import annotations

import glob
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.exceptions import DeltaMergeError
from tests.delta.test_delta_reads_our_merges import (
    CHANGES,
    copy_of,
    delta_merge,
    last_history,
    log_actions,
    ours,
)
from tests.run_profile import of_the_day

# (id, JSON text or None): an object, one with an array, a JSON null, a SQL NULL.
TARGET = [(1, '{"a":1}'), (2, '{"a":2,"b":[1,2]}'), (3, "null"), (4, None)]
# Updates 2 and 3, inserts 5 and 6 by id; by ``v:a`` it matches row 2 and inserts the rest.
SOURCE = [(2, '{"a":20}'), (3, "[1,2,3]"), (5, '{"a":5}'), (6, None)]
MERGE = "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s "
STATEMENTS = {
    "update-star": MERGE + "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    "on-variant-get": MERGE + "ON variant_get(t.v, '$.a', 'int') = s.id "
    "WHEN MATCHED THEN UPDATE SET v = s.v, st = s.st WHEN NOT MATCHED THEN INSERT *",
    "condition-and-literal": MERGE + "ON t.id = s.id "
    "WHEN MATCHED AND variant_get(t.v, '$.a', 'int') > 1 THEN DELETE "
    """WHEN MATCHED THEN UPDATE SET v = parse_json('{{"x": [true, 1.5]}}') """
    "WHEN NOT MATCHED AND is_variant_null(s.v) IS NOT TRUE THEN INSERT (id, v) VALUES (s.id, s.v)",
    "insert-only": MERGE + "ON t.id = s.id WHEN NOT MATCHED THEN INSERT *",
    "matched-only": MERGE + "ON t.id = s.id WHEN MATCHED THEN UPDATE SET st.w = s.v",
    # Spark 4's path syntax (``column:path``, ``::type``) in the ON condition, a clause condition, SET and
    # INSERT values
    "path-syntax": MERGE + "ON t.id = s.id AND t.v:a::int > 1 "
    "WHEN MATCHED THEN UPDATE SET st.a = s.v:a::int, st.w = s.v:['a'] "
    "WHEN NOT MATCHED AND s.v:a IS NOT NULL THEN INSERT *",
    "path-syntax-clauses": MERGE + "ON t.id = s.id WHEN MATCHED AND t.v:b[1]::int = 2 THEN DELETE "
    "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v, st) "
    "VALUES (s.id, s.v:a, named_struct('a', s.v:a::bigint, 'w', s.v))",
}
# Statements where VARIANT meets another type: each must end as Delta's own MERGE ends (same rows, or the
# same error class, the table unchanged).
MIXED = {
    "equality-on-variants": MERGE + "ON t.v = s.v WHEN MATCHED THEN DELETE",
    "string-into-variant": MERGE + "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = to_json(s.v)",
    "variant-into-string": MERGE + "ON t.id = s.id WHEN MATCHED THEN UPDATE SET st.a = s.v",
    "evolution-string-over-variant": "MERGE WITH SCHEMA EVOLUTION INTO delta.`{target}` AS t USING "
    "(SELECT id, to_json(v) AS v FROM parquet.`{source}`) AS s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    "evolution-new-variant-column": "MERGE WITH SCHEMA EVOLUTION INTO delta.`{target}` AS t USING "
    "(SELECT id, v AS extra FROM parquet.`{source}`) AS s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
}


def _select(rows: list[tuple[int, str | None]]) -> str:
    values = ", ".join(f"({i}L, {'NULL' if j is None else repr(j)})" for i, j in rows)
    return (
        "SELECT /*+ REPARTITION(2) */ id, parse_json(j) AS v, "
        f"named_struct('a', id, 'w', parse_json(j)) AS st FROM VALUES {values} AS x(id, j)"
    )


def variant_table(spark: SparkSession, path: Path, properties: str = "") -> str:
    """A table Delta creates at ``path``: (id BIGINT, v VARIANT, st STRUCT<a BIGINT, w VARIANT>), rows
    ``TARGET`` in two files, version 0."""
    spark.sql(f"CREATE TABLE delta.`{path}` USING delta {properties} AS {_select(TARGET)}").collect()
    return str(path)


def variant_source(spark: SparkSession, tmp_path: Path) -> str:
    path = str(tmp_path / "source")
    spark.sql(_select(SOURCE)).write.parquet(path)
    return path


def as_json(spark: SparkSession, table: str) -> list[tuple[Any, ...]]:
    """Delta's read of the table, each VARIANT as its JSON text, sorted."""
    rows = spark.sql(
        f"SELECT id, to_json(v) AS v, st.a AS a, to_json(st.w) AS w FROM delta.`{table}`"
    ).collect()
    return sorted((tuple(r) for r in rows), key=str)


def null_counts(table: str, version: int) -> Counter[str]:
    """nullCount per column summed over the files the commit adds; and no VARIANT bounds."""
    total: Counter[str] = Counter()
    for add in log_actions(table, version, "add"):
        stats = json.loads(add["stats"])
        assert "v" not in stats.get("minValues", {}) and "w" not in stats.get("minValues", {}).get("st", {})
        nulls = stats["nullCount"]
        total.update({"id": nulls["id"], "v": nulls["v"], "st.a": nulls["st"]["a"], "st.w": nulls["st"]["w"]})
    return total


def shredded_files(table: str) -> list[str]:
    return [
        f
        for f in glob.glob(f"{table}/**/*.parquet", recursive=True)
        if "typed_value" in str(pq.read_schema(f))
    ]


def parquet_variant_group(table: str, version: int) -> list[str]:
    """The parquet leaves of ``v`` in each file the commit adds."""
    files = [f"{table}/{a['path']}" for a in log_actions(table, version, "add")]
    return sorted({c.path for f in files for c in pq.ParquetFile(f).schema if c.path.startswith("v.")})


# Each list here: every case locally; in CI one a day: the differential suite draws VARIANT columns in
# every run (tests/run_profile.py)
@pytest.mark.parametrize("name", of_the_day(sorted(STATEMENTS)))
def test_merge_with_variant_columns_gives_deltas_rows_stats_and_layout(spark, tmp_path, name):
    # Given: a table Delta made with VARIANT columns (top level and in a struct), and an identical copy
    target = variant_table(spark, tmp_path / "ours")
    theirs = copy_of(target, "theirs")
    src, statement = variant_source(spark, tmp_path), STATEMENTS[name]
    protocol = log_actions(target, 0, "protocol")[0]
    assert "variantType" in protocol["writerFeatures"] and "variantType" in protocol["readerFeatures"]
    # When: our engine merges, and Delta runs the same statement on the copy
    result = ours(spark, statement, target, src)
    delta_merge(spark, statement, theirs, src)
    # Then: Delta reads the same rows from both, with the same counts
    assert result.version == 1
    assert as_json(spark, target) == as_json(spark, theirs)
    delta_metrics = last_history(spark, theirs)["operationMetrics"]
    assert {k: result.metrics[k] for k in CHANGES} == {k: int(delta_metrics[k]) for k in CHANGES}
    # Neither changed the schema or the protocol
    assert log_actions(target, 1, "metaData") == log_actions(theirs, 1, "metaData") == []
    assert log_actions(target, 1, "protocol") == log_actions(theirs, 1, "protocol") == []
    # Our files' stats count the VARIANT NULLs as Delta's do, with no bounds for them
    assert null_counts(target, 1) == null_counts(theirs, 1)
    # Written as Spark writes VARIANT, unshredded as the protocol requires here (as Delta's files are)
    assert parquet_variant_group(target, 1) in ([], ["v.metadata", "v.value"])
    assert shredded_files(target) == shredded_files(theirs) == []
    if name == "update-star":
        # When/Then: Delta's own next merge into our table gives what it gives on its own
        follow = (
            MERGE + "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.st.w WHEN NOT MATCHED THEN INSERT *"
        )
        delta_merge(spark, follow, target, src)
        delta_merge(spark, follow, theirs, src)
        assert as_json(spark, target) == as_json(spark, theirs)


def outcome(run: Any) -> str | None:
    """None when ``run()`` succeeds, else the error class it fails with (ours, or Spark's/Delta's)."""
    try:
        run()
    except DeltaMergeError as err:
        return err.error_class
    except Exception as err:  # Delta's own failure: its condition, else the innermost classed cause
        condition = getattr(err, "getCondition", lambda: None)()
        causes = re.findall(r"Exception: \[([A-Z][A-Z0-9_.]+)\]", str(err))
        return str(condition or (causes[-1] if causes else type(err).__name__))
    return None


@pytest.mark.parametrize("name", of_the_day(sorted(MIXED)))
def test_variant_meeting_other_types_ends_as_deltas_merge_does(spark, tmp_path, name):
    # Given: a table Delta made with VARIANT columns, an identical copy
    target = variant_table(spark, tmp_path / "ours")
    theirs = copy_of(target, "theirs")
    src, statement = variant_source(spark, tmp_path), MIXED[name]
    # When: our engine and Delta's MERGE run the statement
    ours_outcome = outcome(lambda: ours(spark, statement, target, src))
    theirs_outcome = outcome(lambda: delta_merge(spark, statement, theirs, src))
    # Then: both fail with the same class and leave the table as it was, or both give the same rows
    assert ours_outcome == theirs_outcome
    if ours_outcome is not None:
        assert not (Path(target) / "_delta_log" / f"{1:020d}.json").exists()
    else:
        assert as_json(spark, target) == as_json(spark, theirs)


def test_new_variant_column_on_a_table_without_the_feature_asks_for_it_where_delta_upgrades(spark, tmp_path):
    # Given: a table Delta made without VARIANT columns (protocol without variantType), an identical copy
    target = str(tmp_path / "ours")
    spark.sql(f"CREATE TABLE delta.`{target}` USING delta AS SELECT 2L AS id, 'x' AS note").collect()
    theirs = copy_of(target, "theirs")
    src = variant_source(spark, tmp_path)
    statement = (
        "MERGE WITH SCHEMA EVOLUTION INTO delta.`{target}` AS t "
        "USING (SELECT id, st FROM parquet.`{source}`) AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    # When: our engine merges a source whose new struct column holds a VARIANT
    with pytest.raises(DeltaMergeError) as raised:
        ours(spark, statement, target, src)
    # Then: refused, naming the field and the feature to enable, the table unchanged
    assert raised.value.error_class == "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT"
    assert "st.w of type VARIANT" in str(raised.value) and "'delta.feature.variantType'" in str(raised.value)
    assert not (Path(target) / "_delta_log" / f"{1:020d}.json").exists()
    # Delta's own MERGE instead adds variantType to the protocol in the same commit (the documented gap)
    delta_merge(spark, statement, theirs, src)
    (protocol,) = log_actions(theirs, 1, "protocol")
    assert "variantType" in protocol["writerFeatures"]


def test_a_shredding_enabled_table_merges_as_deltas_merge_does(spark, tmp_path):
    # Given: a table Delta made with VARIANT columns and shredding enabled, and an identical copy
    target = variant_table(
        spark, tmp_path / "ours", "TBLPROPERTIES ('delta.enableVariantShredding' = 'true')"
    )
    theirs = copy_of(target, "theirs")
    # Delta 4.4 enables shredding with the preview feature
    assert "variantShredding-preview" in log_actions(target, 0, "protocol")[0]["writerFeatures"]
    src, statement = variant_source(spark, tmp_path), STATEMENTS["update-star"]
    # When: our engine merges, and Delta runs the same statement on the copy
    result = ours(spark, statement, target, src)
    delta_merge(spark, statement, theirs, src)
    # Then: Delta reads the same rows from both, with the same counts, and its next merge into ours agrees
    assert as_json(spark, target) == as_json(spark, theirs)
    delta_metrics = last_history(spark, theirs)["operationMetrics"]
    assert {k: result.metrics[k] for k in CHANGES} == {k: int(delta_metrics[k]) for k in CHANGES}
    # Delta's first files are shredded (read by ours too); the merge's new files hold VARIANT as Delta's do
    assert len(shredded_files(target)) == len(shredded_files(theirs)) > 0
    assert parquet_variant_group(target, 1) == parquet_variant_group(theirs, 1)
    follow = MERGE + "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.st.w WHEN NOT MATCHED THEN INSERT *"
    delta_merge(spark, follow, target, src)
    delta_merge(spark, follow, theirs, src)
    assert as_json(spark, target) == as_json(spark, theirs)


def nested_variants(rows: list[tuple[int, str | None]]) -> str:
    """A SELECT of (id, a ARRAY<VARIANT>, m MAP<STRING, VARIANT>) over ``rows``' JSON texts."""
    values = ", ".join(f"({i}L, {'NULL' if j is None else repr(j)})" for i, j in rows)
    return (
        "SELECT id, array(parse_json(j), parse_json('[1]')) AS a, map('k', parse_json(j)) AS m "
        f"FROM VALUES {values} AS x(id, j)"
    )


@pytest.mark.parametrize("name", of_the_day(["update-star", "matched-only-into-map"]))
def test_variants_in_arrays_and_maps_merge_as_deltas_merge_does(spark, tmp_path, name):
    # Given: a table Delta made with VARIANT in an array and in a map, an identical copy, a source alike
    target = str(tmp_path / "ours")
    spark.sql(f"CREATE TABLE delta.`{target}` USING delta AS {nested_variants(TARGET)}").collect()
    theirs = copy_of(target, "theirs")
    src = str(tmp_path / "source")
    spark.sql(nested_variants(SOURCE)).write.parquet(src)
    statement = {
        "update-star": STATEMENTS["update-star"],
        "matched-only-into-map": MERGE + "ON t.id = s.id WHEN MATCHED THEN UPDATE SET m = map('n', s.a[0])",
    }[name]
    # When: our engine merges, and Delta runs the same statement on the copy
    result = ours(spark, statement, target, src)
    delta_merge(spark, statement, theirs, src)

    # Then: Delta reads the same rows (each VARIANT as its JSON) and the same counts from both
    def read(table: str) -> list[tuple[Any, ...]]:
        rows = spark.sql(
            f"SELECT id, transform(a, x -> to_json(x)) AS a, transform_values(m, (k, v) -> to_json(v)) AS m "
            f"FROM delta.`{table}`"
        ).collect()
        return sorted((tuple(r) for r in rows), key=str)

    assert read(target) == read(theirs)
    delta_metrics = last_history(spark, theirs)["operationMetrics"]
    assert {k: result.metrics[k] for k in CHANGES} == {k: int(delta_metrics[k]) for k in CHANGES}
