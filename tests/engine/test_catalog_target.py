"""A target given by its catalog name: the engine finds the table's location in the session's catalog."""

from __future__ import annotations

import dataclasses
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from py4j.protocol import Py4JError

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.resolve.target_table import table_location
from airflow_provider_deltamerge.exceptions import TargetTableError
from airflow_provider_deltamerge.spec import parse_merge_sql
from tests.conftest import make_table, table_state, upsert_from_extract
from tests.oracle import merge_with_deltalake, sorted_rows


def register_delta_table(spark, name: str, location: str) -> None:
    """Put ``name`` in the session catalog as a ``USING delta`` table at ``location``.

    As a metastore shared with Delta writers holds it. Spark cannot create such an entry without Delta's jars
    (the ``delta`` data source is theirs), so the entry is made as parquet and its provider changed in place.
    """
    spark.sql(f"CREATE TABLE {name} USING parquet LOCATION '{location}'")
    database, table = name.split(".")
    jvm = spark._jvm
    identifier = jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply(table, jvm.scala.Some(database))
    entry = spark._jsparkSession.sessionState().catalog().getTableMetadata(identifier)
    fields = []
    for n in range(1, 100):  # CatalogTable.copy's arguments, each at its default: the entry's own values
        try:
            fields.append(getattr(entry, f"copy$default${n}")())
        except Py4JError:
            break
    fields[4] = jvm.scala.Some("delta")  # provider
    spark._jsparkSession.sharedState().externalCatalog().alterTable(entry.copy(*fields))


@pytest.fixture
def shop(spark) -> Iterator[str]:
    database = f"shop_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {database}")
    yield database
    spark.sql(f"DROP DATABASE {database} CASCADE")


def test_a_catalog_name_merges_into_the_table_at_its_location(spark, tmp_path, shop):
    # Given: the same table twice, one registered in the catalog as a Delta table (with a space in its path)
    ours = make_table(tmp_path / "lake dir" / "orders")
    oracle = make_table(tmp_path / "oracle")
    register_delta_table(spark, f"{shop}.orders", ours)
    spec = upsert_from_extract(f"{shop}.orders", tmp_path / "extract.parquet", [(1, 7, "us"), (42, 8, "eu")])

    # When: the spec names the table, not its path
    result = run_merge(spark, spec)
    expected = merge_with_deltalake(oracle, spec, pq.read_table(tmp_path / "extract.parquet"))

    # Then: the table at the location is merged as the oracle merges it
    assert table_location(spark, f"{shop}.orders") == ours
    assert sorted_rows(ours) == sorted_rows(oracle)
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == expected["num_target_rows_updated"] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == expected["num_target_rows_inserted"] == 1
    assert result.version == table_state(ours)[0] == 1


def test_a_retry_by_name_finds_its_earlier_commit(spark, tmp_path, shop):
    target = make_table(tmp_path / "orders")
    register_delta_table(spark, f"{shop}.orders", target)
    spec = upsert_from_extract(f"{shop}.orders", tmp_path / "extract.parquet", [(1, 7, "us")])
    run = {"dagId": "d", "taskId": "merge", "runId": "r1", "mapIndex": -1}

    first = run_merge(spark, spec, provenance=run)
    retried = run_merge(spark, spec, provenance={**run, "tryNumber": 2})

    assert retried.already_committed and retried.version == first.version == 1
    assert table_state(target)[0] == 1


def test_merge_into_statement_with_a_table_name(spark, tmp_path, shop):
    target = make_table(tmp_path / "orders")
    register_delta_table(spark, f"{shop}.orders", target)
    extract = tmp_path / "extract.parquet"
    upsert_from_extract(target, extract, [(2, 99, "eu")])
    spec = parse_merge_sql(
        f"MERGE INTO {shop}.orders AS t USING parquet.`{extract}` AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET qty = s.qty"
    )

    result = run_merge(spark, spec)

    assert spec.target == f"{shop}.orders"
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert {"id": 2, "qty": 99, "region": "eu"} in sorted_rows(target)


@pytest.mark.parametrize("name", ["orders_nowhere", "{shop}.missing", "no_such_db.orders"])
def test_an_unknown_name_fails_naming_it_and_changes_nothing(spark, tmp_path, shop, name):
    target = make_table(tmp_path / "orders")
    spark.range(1).createOrReplaceTempView("orders_nowhere")  # a temporary view is no table
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 7, "us")])
    missing = name.format(shop=shop)
    before = table_state(target)

    with pytest.raises(TargetTableError, match=rf"{missing} cannot be found") as raised:
        run_merge(spark, dataclasses.replace(spec, target=missing))

    assert raised.value.error_class == "TABLE_OR_VIEW_NOT_FOUND"
    assert "path or URI" in str(raised.value)
    assert table_state(target) == before


def test_a_name_whose_location_holds_no_delta_table_is_refused(spark, tmp_path, shop):
    plain = tmp_path / "plain"
    shutil.copytree(Path(make_table(tmp_path / "orders")), plain)
    shutil.rmtree(plain / "_delta_log")
    spark.sql(f"CREATE TABLE {shop}.plain USING parquet LOCATION '{plain}'")
    spec = upsert_from_extract(f"{shop}.plain", tmp_path / "extract.parquet", [(1, 7, "us")])

    with pytest.raises(TargetTableError) as raised:
        run_merge(spark, spec)

    assert raised.value.error_class == "DELTA_TABLE_NOT_FOUND"
    assert not (plain / "_delta_log").exists()
