"""Which Assets a merge task declares when its DAG is parsed: the target as outlet (an AssetAlias when it is
known only at run time), the source as inlet when it is a path or a table."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk import DAG, Asset, AssetAlias

from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import QuerySource, TableSource, insert_all

MERGE = {"condition": "t.id = s.id", "clauses": [insert_all()]}


def merge_task(**kwargs: object) -> DeltaMergeOperator:
    with DAG("assets", schedule=None):
        return DeltaMergeOperator(task_id="merge", **kwargs)


def test_a_literal_target_is_an_outlet_asset_and_a_path_source_an_inlet():
    task = merge_task(target="s3://lake/orders", source="s3://lake/staging/orders.parquet", **MERGE)

    assert task.outlets == [Asset("s3://lake/orders")]
    assert task.inlets == [Asset("s3://lake/staging/orders.parquet")]
    assert task.asset_alias is None


def test_a_templated_target_is_an_asset_alias_named_after_the_task():
    task = merge_task(target="s3://lake/{{ params.table }}", source="s3://lake/staging/{{ ds }}", **MERGE)

    assert task.outlets == [AssetAlias("deltamerge/assets/merge")]
    assert task.inlets == []  # a templated source is known only at run time


def test_an_alias_can_be_named():
    task = merge_task(target="{{ params.lake }}/orders", source="s", asset_alias="orders-merges", **MERGE)

    assert task.outlets == [AssetAlias("orders-merges")]


@pytest.mark.parametrize(
    ("source", "inlets"),
    [(TableSource("shop.staged_orders"), [Asset("shop.staged_orders")]), (QuerySource("SELECT 1 AS id"), [])],
)
def test_a_table_source_is_an_inlet_and_a_query_none(source, inlets):
    assert merge_task(target="s3://lake/orders", source=source, **MERGE).inlets == inlets


def test_an_inline_merge_statement_declares_its_target_and_source(tmp_path):
    sql = (
        f"MERGE INTO delta.`{tmp_path}/orders` AS t USING parquet.`{tmp_path}/extract.parquet` AS s "
        "ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"
    )
    task = merge_task(merge_sql=sql)

    assert task.outlets == [Asset(Path(tmp_path, "orders").as_uri())]
    assert task.inlets == [Asset(Path(tmp_path, "extract.parquet").as_uri())]


def test_a_merge_statement_in_a_file_goes_through_an_alias():
    assert merge_task(merge_sql="sql/merge_orders.sql").outlets == [AssetAlias("deltamerge/assets/merge")]
