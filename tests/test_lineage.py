"""OpenLineage facets of DeltaMergeOperator: source in, target out, what the merge did, the statement."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import uuid
from types import SimpleNamespace

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.common.compat.openlineage.facet import InputDataset, OutputDataset

from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook, credentials_properties
from airflow_provider_deltamerge.operators.assets import target_asset
from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.operators.lineage import merge_lineage, openlineage_spark_conf
from airflow_provider_deltamerge.spec import TableSource, insert_all, update
from tests.conftest import make_table


def make_operator(**kwargs):
    return DeltaMergeOperator(
        task_id="merge",
        condition="t.id = s.id",
        **{
            "target": "s3://lake/orders",
            "source": "/data/staging/orders.parquet",
            "clauses": [insert_all()],
            **kwargs,
        },
    )


def test_lineage_names_source_and_target_and_reports_written_rows():
    operator = make_operator()
    operator._metrics = {"numOutputRows": 1100, "numTargetBytesAdded": 12098, "numTargetFilesAdded": 2}

    lineage = merge_lineage(operator.build_spec(), operator._metrics, None)

    [source] = lineage.inputs
    [target] = lineage.outputs
    assert isinstance(source, InputDataset) and isinstance(target, OutputDataset)
    assert (source.namespace, source.name) == ("file", "/data/staging/orders.parquet")
    assert (target.namespace, target.name) == ("s3://lake", "/orders")
    statistics = target.outputFacets["outputStatistics"]
    assert (statistics.rowCount, statistics.size, statistics.fileCount) == (1100, 12098, 2)


def test_a_completed_merge_names_its_version_storage_schema_statement_and_column_sources(tmp_path):
    target = make_table(tmp_path / "orders")  # id BIGINT, qty INT, region STRING
    operator = make_operator(
        target=target,
        clauses=[
            update({"qty": "s.qty + t.qty", "region": "upper(s.label)"}, condition="s.op = 'U'"),
            insert_all(),
        ],
    )
    operator._metrics = {"numOutputRows": 5, "tableVersion": 7}

    [target_dataset] = operator.get_openlineage_facets_on_complete(task_instance=None).outputs
    lineage = operator.get_openlineage_facets_on_complete(task_instance=None)

    facets = target_dataset.facets
    assert facets["version"].datasetVersion == "7"
    assert (facets["storage"].storageLayer, facets["storage"].fileFormat) == ("delta", "parquet")
    assert [(f.name, f.type) for f in facets["schema"].fields] == [
        ("id", "long"),
        ("qty", "integer"),
        ("region", "string"),
    ]
    columns = {
        column: [(i.namespace, i.name, i.field) for i in fields.inputFields]
        for column, fields in facets["columnLineage"].fields.items()
    }
    source = ("file", "/data/staging/orders.parquet")
    # UPDATE reads s.qty (t.qty is the target's own) and s.label; INSERT * takes each same-named column.
    assert columns == {
        "id": [(*source, "id")],
        "qty": [(*source, "qty")],
        "region": [(*source, "label"), (*source, "region")],
    }
    assert lineage.job_facets["sql"].query.startswith(f"MERGE INTO delta.`{target}` AS t\nUSING parquet.")


def test_a_spec_without_a_merge_into_form_has_no_sql_facet():
    lineage = make_operator(clauses=[insert_all(except_columns=["qty"])]).get_openlineage_facets_on_start()
    assert lineage.job_facets == {}


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

    [target] = operator.get_openlineage_facets_on_complete(task_instance=None).outputs  # no log to read

    assert (target.namespace, target.name) == ("spark", "shop.orders")
    assert target.outputFacets["outputStatistics"].rowCount == 3
    assert operator.outlets == [target_asset("shop.orders")]
    assert target_asset("shop.orders").uri == "shop.orders"


def test_the_openlineage_transport_reaches_the_job_privately(tmp_path):
    # The transport comes from Airflow's [openlineage] transport, read by the real OpenLineage provider in a
    # process of its own (its client is built once per process).
    transport = {
        "type": "http",
        "url": "http://127.0.0.1:5000",
        "auth": {"type": "api_key", "apiKey": "sk-1"},
    }
    code = (
        "import json; from airflow_provider_deltamerge.operators.lineage import openlineage_spark_conf; "
        "print(json.dumps(openlineage_spark_conf({'a': '1'}, None, parent_job=False, transport=True)))"
    )
    env = {**os.environ, "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    conf, private = json.loads(done.stdout.strip().splitlines()[-1])

    assert conf == {"a": "1"}
    assert private["spark.openlineage.transport.auth.apiKey"] == "Bearer sk-1"
    hook = DeltaMergeHook(conf=conf, private_conf=private)
    on_the_command_line = hook._job_conf({}, private)
    assert "sk-1" not in json.dumps(on_the_command_line)
    # Spark's UI and event log redact the key too (a Java regex: (?i) may stand inside the group).
    redacted = on_the_command_line["spark.redaction.regex"]
    assert re.escape("spark.openlineage.transport.auth.apiKey") in redacted
    properties = credentials_properties(tmp_path, {}, [], {}, private_conf=private)
    assert "spark.openlineage.transport.auth.apiKey=Bearer sk-1" in properties.read_text()
    assert properties.stat().st_mode & 0o777 == 0o600


def task_context(try_number: int = 1) -> dict[str, object]:
    """The parts of a task's context that OpenLineage's parent job macros read: its task instance and run."""
    run = SimpleNamespace(conf={}, clear_number=0, logical_date=dt.datetime(2024, 1, 2, tzinfo=dt.UTC))
    ti = SimpleNamespace(
        dag_id="orders_daily",
        task_id="merge",
        try_number=try_number,
        map_index=-1,
        dag_run=run,
        get_template_context=dict,
    )
    return {"ti": ti, "dag_run": run}


def test_the_parent_job_reaches_the_spark_conf_as_the_spark_provider_injects_it(mocker, monkeypatch):
    tuning = {"spark.sql.shuffle.partitions": "8"}
    context = task_context()

    conf, private = openlineage_spark_conf(tuning, context, parent_job=True, transport=False)

    # The Spark provider's own operator, asked for the parent job, on the same task (spark-submit stubbed).
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    submit = mocker.patch.object(SparkSubmitHook, "submit")
    spark_provider = SparkSubmitOperator(
        task_id="merge", application="job.py", conf=dict(tuning), openlineage_inject_parent_job_info=True
    )
    spark_provider.execute(context)
    submit.assert_called_once()
    assert conf == spark_provider.conf
    assert private == {}
    parent = {key: value for key, value in conf.items() if key.startswith("spark.openlineage.")}
    assert sorted(parent) == [
        "spark.openlineage.parentJobName",
        "spark.openlineage.parentJobNamespace",
        "spark.openlineage.parentRunId",
        "spark.openlineage.rootParentJobName",
        "spark.openlineage.rootParentJobNamespace",
        "spark.openlineage.rootParentRunId",
    ]
    assert (parent["spark.openlineage.parentJobName"], parent["spark.openlineage.rootParentJobName"]) == (
        "orders_daily.merge",
        "orders_daily",
    )
    assert uuid.UUID(parent["spark.openlineage.parentRunId"]) != uuid.UUID(
        parent["spark.openlineage.rootParentRunId"]
    )
    # Each try is a run of its own, as OpenLineage names task runs; the conf the task was given stays.
    retry, _ = openlineage_spark_conf(tuning, task_context(try_number=2), parent_job=True, transport=False)
    assert retry["spark.openlineage.parentRunId"] != parent["spark.openlineage.parentRunId"]
    assert tuning == {"spark.sql.shuffle.partitions": "8"} == {k: conf[k] for k in tuning}


def test_a_parent_job_the_dag_author_set_is_kept():
    mine = {"spark.openlineage.parentJobName": "upstream.job"}

    conf, _ = openlineage_spark_conf(mine, task_context(), parent_job=True, transport=False)

    assert conf == mine


def test_the_target_log_is_read_for_lineage_only_when_openlineage_sends_events(monkeypatch):
    # The real provider's rule (uncached under pytest): with no transport configured it is disabled, and
    # the operator then skips reading the target's schema after each merge; a transport turns it on.
    from airflow_provider_deltamerge.operators.lineage import lineage_is_sent

    for key in [k for k in os.environ if k.startswith(("OPENLINEAGE", "AIRFLOW__OPENLINEAGE"))]:
        monkeypatch.delenv(key)
    assert lineage_is_sent() is False
    monkeypatch.setenv("OPENLINEAGE_URL", "http://127.0.0.1:9")
    assert lineage_is_sent() is True
