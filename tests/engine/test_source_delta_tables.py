"""``delta.`path``` tables inside a source query, read through the provider's Delta reader: how references
are found and replaced in the text, and real merges whose source query reads Delta tables (the target
itself, for SCD type 2), checked against deltalake's own merge."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.source.delta_tables import (
    VIEW_PREFIX,
    delta_table_references,
    replace_references,
)
from airflow_provider_deltamerge.exceptions import SourceError
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    QuerySource,
    insert,
    parse_merge_sql,
    update,
)
from tests.conftest import make_table, table_state
from tests.oracle import merge_with_deltalake, sorted_rows


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM delta.`/lake/a`", "SELECT * FROM v0"),
        (
            "SELECT * FROM DELTA.`s3a://bucket/a b` AS x WHERE x.id > 1",
            "SELECT * FROM v0 AS x WHERE x.id > 1",
        ),
        ("SELECT * FROM `Delta`.`C:\\lake\\a` x", "SELECT * FROM v0 x"),
        (
            "SELECT CAST(a.id AS INT) FROM delta.`/lake/a` a JOIN delta.`/lake/b` USING (id), delta.`/a`",
            "SELECT CAST(a.id AS INT) FROM v0 a JOIN v1 USING (id), v2",
        ),
        # Not references: other formats, strings, comments, longer dotted names, a column of a relation
        # aliased delta.
        ("SELECT * FROM parquet.`/lake/a`", None),
        ("SELECT 'delta.`/lake/a`' AS s -- delta.`/lake/a`", None),
        ("SELECT * FROM spark_catalog.delta.`/lake/a`", None),
        ("SELECT delta.`/lake/a`.id FROM t", None),
        ("SELECT delta.`id` FROM t AS delta", None),
        ("SELECT 'unterminated", None),
    ],
)
def test_references_are_replaced_by_view_names_keeping_every_other_character(sql, expected):
    references = delta_table_references(sql)
    names = {path: f"v{n}" for n, path in enumerate(dict.fromkeys(r.path for r in references))}
    assert replace_references(sql, references, names) == (expected or sql)
    assert bool(references) == (expected is not None)


@pytest.mark.parametrize(
    "temporal", ["VERSION AS OF 1", "FOR TIMESTAMP AS OF '2024-01-01'", "for system_version as of 2"]
)
def test_time_travel_on_a_delta_path_is_refused_naming_it(temporal):
    with pytest.raises(SourceError, match=r"delta\.`/lake/a` .*Remove the AS OF clause"):
        delta_table_references(f"SELECT * FROM delta.`/lake/b` JOIN delta.`/lake/a` {temporal} a USING (id)")


CUSTOMERS = pa.table(
    {
        "customer_id": pa.array([1, 2, 3], pa.int64()),
        "address": pa.array(["1 Old St", "2 Old St", "3 Old St"]),
        "current": pa.array([True, True, True]),
        "effective_date": pa.array(["2024-01-01"] * 3),
        "end_date": pa.array([None, None, None], pa.string()),
    }
)
# Customer 1 arrives unchanged, 2 moved, 4 is new; 3 is not in the extract.
EXTRACT = pa.table(
    {
        "customer_id": pa.array([1, 2, 4], pa.int64()),
        "address": pa.array(["1 Old St", "2 New St", "4 First St"]),
        "effective_date": pa.array(["2024-02-01"] * 3),
    }
)


def scd2_spec(target: str, source: QuerySource) -> MergeSpec:
    """Delta's SCD type 2 merge: close the current row of a moved customer, insert NULL-keyed rows."""
    return MergeSpec(
        target=target,
        source=source,
        condition="t.customer_id = s.merge_key",
        clauses=(
            update(
                {"current": "false", "end_date": "s.effective_date"},
                condition="t.current = true AND t.address <> s.address",
            ),
            insert(
                {
                    "customer_id": "s.customer_id",
                    "address": "s.address",
                    "current": "true",
                    "effective_date": "s.effective_date",
                    "end_date": "NULL",
                }
            ),
        ),
    )


def test_scd2_staged_updates_join_the_target_by_path_like_the_oracle(spark, tmp_path):
    # Given: the target twice (ours, the oracle's) and the day's extract as parquet
    ours = make_table(tmp_path / "ours", CUSTOMERS)
    oracle = make_table(tmp_path / "oracle", CUSTOMERS)
    extract = tmp_path / "extract.parquet"
    pq.write_table(EXTRACT, extract)
    # Delta's recipe: every extract row keyed; NULL-keyed copies of the rows whose address changed, found by
    # joining the current rows of the target itself.
    staged = QuerySource(
        f"SELECT u.customer_id AS merge_key, u.* FROM parquet.`{extract}` u "
        f"UNION ALL "
        f"SELECT NULL AS merge_key, u.* FROM parquet.`{extract}` u "
        f"JOIN delta.`{ours}` AS c ON u.customer_id = c.customer_id "
        f"WHERE c.current = true AND u.address <> c.address"
    )
    spec = scd2_spec(ours, staged)
    # When: our engine runs the query; deltalake merges the staged rows the recipe should give
    result = run_merge(spark, spec)
    moved = EXTRACT.filter(pc.equal(EXTRACT["customer_id"], 2))
    staged_rows = pa.concat_tables(
        [
            EXTRACT.add_column(0, "merge_key", EXTRACT["customer_id"]),
            moved.add_column(0, "merge_key", pa.array([None], pa.int64())),
        ]
    )
    expected = merge_with_deltalake(oracle, spec, staged_rows)
    # Then: the same table as the oracle's; the unchanged customer still has exactly one (current) row
    assert sorted_rows(ours) == sorted_rows(oracle)
    assert result.metrics[m.NUM_SOURCE_ROWS] == expected["num_source_rows"] == 4
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == expected["num_target_rows_updated"] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == expected["num_target_rows_inserted"] == 2
    history = sorted((r["customer_id"], r["current"], r["address"]) for r in sorted_rows(ours))
    assert history == [
        (1, True, "1 Old St"),
        (2, False, "2 Old St"),
        (2, True, "2 New St"),
        (3, True, "3 Old St"),
        (4, True, "4 First St"),
    ]
    assert provider_views(spark) == []


def provider_views(spark: SparkSession) -> list[str]:
    return [t.name for t in spark.catalog.listTables() if t.name.startswith(VIEW_PREFIX)]


UPDATES = pa.table(
    {
        "id": pa.array([2, 3, 11, 12], pa.int64()),
        "qty": pa.array([7, 0, 9, 5], pa.int32()),
        "region": pa.array(["eu", "us", "eu", "us"]),
    }
)


@pytest.mark.parametrize(
    "updates_reference",
    ["delta.`{path}` AS u", "DELTA.`{path}` u", "`delta`.`{path}`"],
    ids=["as-alias", "bare-alias", "no-alias"],
)
def test_merge_into_using_a_subquery_over_a_delta_path_like_the_oracle(spark, tmp_path, updates_reference):
    # Given: targets ids 0-9 (ours, the oracle's) and a Delta table of updates, one with qty 0
    ours, oracle = make_table(tmp_path / "ours"), make_table(tmp_path / "oracle")
    updates = make_table(tmp_path / "updates", UPDATES)
    reference = updates_reference.format(path=updates)
    spec = parse_merge_sql(
        f"MERGE INTO delta.`{ours}` AS t\n"
        f"USING (SELECT id, CAST(qty * 2 AS INT) AS qty, region FROM {reference} WHERE qty > 0) AS s\n"
        "ON t.id = s.id\n"
        "WHEN MATCHED THEN UPDATE SET *\n"
        "WHEN NOT MATCHED THEN INSERT *"
    )
    # When: our engine merges the statement; deltalake merges the rows the subquery should give
    result = run_merge(spark, spec)
    kept = UPDATES.filter(pc.greater(UPDATES["qty"], 0))
    doubled = kept.set_column(1, "qty", pc.multiply(kept["qty"], 2).cast(pa.int32()))
    expected = merge_with_deltalake(oracle, spec, doubled)
    # Then: the same rows and counts, and no view left behind
    assert sorted_rows(ours) == sorted_rows(oracle)
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == expected["num_target_rows_updated"] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == expected["num_target_rows_inserted"] == 2
    assert provider_views(spark) == []


@pytest.mark.parametrize("form", ["query", "path"])
def test_a_delta_path_that_is_no_delta_table_fails_naming_it_and_changes_nothing(spark, tmp_path, form):
    # Given: a target, a Delta table of updates and parquet files (no Delta log) read as a Delta table
    target = make_table(tmp_path / "target")
    updates = make_table(tmp_path / "updates", UPDATES)
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(UPDATES, plain / "part-0.parquet")
    query = f"SELECT * FROM delta.`{updates}` UNION ALL SELECT * FROM delta.`{plain}` WHERE qty > 0"
    source = QuerySource(query) if form == "query" else PathSource(str(plain), format="delta")
    before = table_state(target)
    spec = MergeSpec(
        target=target,
        source=source,
        condition="t.id = s.id",
        clauses=(update({"qty": "s.qty"}),),
    )
    # When / Then: the error names the path and the fix; the table, and the session's views, are unchanged
    named = re.escape(str(plain))
    with pytest.raises(SourceError, match=f"{named}.*parquet.`{named}`") as info:
        run_merge(spark, spec)
    assert info.value.error_class == "DELTA_TABLE_NOT_FOUND"
    assert table_state(target) == before
    assert provider_views(spark) == []


def test_self_join_of_a_delta_path_updates_every_row(spark, tmp_path):
    # Given: a source query self-joining a Delta table by path
    target = make_table(tmp_path / "target")
    spec = MergeSpec(
        target=target,
        source=QuerySource(
            f"SELECT a.id, b.qty + 1 AS qty FROM delta.`{target}` a JOIN delta.`{target}` b ON a.id = b.id"
        ),
        condition="t.id = s.id",
        clauses=(update({"qty": "s.qty"}),),
    )
    # When: it updates every row of the table it reads
    result = run_merge(spark, spec)
    # Then: each target row matched exactly one source row
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 10
    assert [r["qty"] for r in sorted_rows(target)] == [i * 10 + 1 for i in range(10)]
