"""OpenLineage facets of DeltaMergeOperator: source in, target out, with the merge's output statistics."""

from __future__ import annotations

from airflow_provider_deltamerge.operators.assets import target_asset
from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import TableSource, insert_all


def make_operator(**kwargs):
    return DeltaMergeOperator(
        task_id="merge",
        condition="t.id = s.id",
        clauses=[insert_all()],
        **{"target": "s3://lake/orders", "source": "/data/staging/orders.parquet", **kwargs},
    )


def test_lineage_names_source_and_target_and_reports_written_rows():
    operator = make_operator()
    operator._metrics = {"numOutputRows": 1100, "numTargetBytesAdded": 12098, "numTargetFilesAdded": 2}

    lineage = operator.get_openlineage_facets_on_complete(task_instance=None)

    [source] = lineage.inputs
    [target] = lineage.outputs
    assert (source.namespace, source.name) == ("file", "/data/staging/orders.parquet")
    assert (target.namespace, target.name) == ("s3://lake", "/orders")
    statistics = target.outputFacets["outputStatistics"]
    assert (statistics.rowCount, statistics.size, statistics.fileCount) == (1100, 12098, 2)


def test_lineage_on_start_has_no_statistics_and_names_catalog_tables():
    lineage = make_operator(source=TableSource("staging.orders")).get_openlineage_facets_on_start()
    assert (lineage.inputs[0].namespace, lineage.inputs[0].name) == ("spark", "staging.orders")
    assert lineage.outputs[0].outputFacets == {}


def test_target_is_the_outlet_asset(tmp_path):
    # A templated target's AssetAlias: tests/airflow/test_assets.py
    assert make_operator().outlets == [target_asset("s3://lake/orders")]
    assert target_asset(str(tmp_path / "t")).uri == (tmp_path / "t").as_uri()


def test_a_catalog_table_target_is_named_as_spark_names_it():
    operator = make_operator(target="shop.orders")
    operator._metrics = {"numOutputRows": 3}

    [target] = operator.get_openlineage_facets_on_complete(task_instance=None).outputs

    assert (target.namespace, target.name) == ("spark", "shop.orders")
    assert target.outputFacets["outputStatistics"].rowCount == 3
    assert operator.outlets == [target_asset("shop.orders")]
    assert target_asset("shop.orders").uri == "shop.orders"
