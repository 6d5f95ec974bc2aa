"""Operator arguments that shape the merge or its job, checked where the operator turns them into both."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowException

from airflow_provider_deltamerge.operators.delta_merge import MATERIALIZE_SOURCE_CONF, DeltaMergeOperator
from airflow_provider_deltamerge.spec.json_form import spec_hash
from tests.test_lineage import make_operator


def test_schema_evolution_reaches_the_spec_and_its_hash():
    evolving = make_operator(schema_evolution=True).build_spec()
    assert evolving.schema_evolution
    assert spec_hash(evolving) != spec_hash(make_operator().build_spec())


def test_schema_evolution_evolves_a_merge_sql_statement_too():
    sql = "MERGE INTO delta.`/lake/t` t USING parquet.`/in/s` s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *"
    operator = DeltaMergeOperator(task_id="merge", merge_sql=sql, schema_evolution=True)
    assert operator.build_spec().schema_evolution
    assert not DeltaMergeOperator(task_id="merge", merge_sql=sql).build_spec().schema_evolution


def test_materialize_source_becomes_deltas_conf_of_the_job():
    operator = make_operator(materialize_source="all", conf={"spark.sql.shuffle.partitions": "4"})
    assert operator.job_conf() == {"spark.sql.shuffle.partitions": "4", MATERIALIZE_SOURCE_CONF: "all"}
    assert make_operator().job_conf() == {}


def test_unknown_materialize_mode_fails_at_parse_time():
    with pytest.raises(
        AirflowException,
        match="materialize_source must be one of auto, all, none, not 'yes'",
    ):
        make_operator(materialize_source="yes")
