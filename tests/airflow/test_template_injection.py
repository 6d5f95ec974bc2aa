"""A user who may only trigger the DAG sets params and run conf: each templated field must keep them data.

The operator renders its fields with Airflow's own templating (the DAG's Jinja environment, as a task run
does) and builds the spec; only the Spark submission is replaced, since these tests are about what would be
submitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlglot
from airflow.models.taskinstancekey import TaskInstanceKey
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from airflow.sdk import DAG
from airflow.sdk.execution_time.context import OutletEventAccessors
from sqlglot import exp

from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.operators.delta_merge import ANY_PATH, DeltaMergeOperator
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    QuerySource,
    TableSource,
    delete,
    insert,
    insert_all,
    parse_merge_sql,
    update,
    update_all,
)

EXAMPLES = Path(__file__).parents[2] / "dags_examples"
# The attack seen: a lake path that closes the backquoted target and brings its own source and clauses.
BACKTICK_ATTACK = (
    "/lake/orders` AS t USING (SELECT order_id, -1 AS amount FROM delta.`/lake/orders`) AS s "
    "ON t.order_id = s.order_id WHEN MATCHED THEN DELETE -- "
)
WIDENING = "eu' OR '1'='1"
LOGICAL_DATE = datetime(2024, 1, 2, tzinfo=UTC)


@dataclass(frozen=True)
class TaskRun:
    """One run of the operator's ``execute``: the operator after it, its context, the mocked submission."""

    operator: DeltaMergeOperator
    context: dict[str, Any]
    submit: Any


def run_task(
    mocker,
    params: dict[str, Any],
    *,
    failure: Exception | None = None,
    tries: tuple[int, int, int] = (1, 0, 0),
    **arguments: Any,
) -> TaskRun:
    """Render ``arguments`` as a task run does with ``params`` (run conf overrides them) and execute them.

    ``tries`` is what Airflow records of the task instance: its try number, its max tries and the DAG run's
    clear number.
    """
    arguments = {"preflight": False, "rerun": "merge", **arguments}
    with DAG("injection", params=params, template_searchpath=str(EXAMPLES), schedule=None):
        operator = DeltaMergeOperator(task_id="merge", **arguments)
    operator.resolve_template_files()
    try_number, max_tries, clear_number = tries
    context: dict[str, Any] = {
        "params": params,
        "ds": "2024-01-02",
        "ti": SimpleNamespace(
            dag_id="injection",
            task_id="merge",
            run_id="r",
            map_index=-1,
            try_number=try_number,
            max_tries=max_tries,
            task=operator,
        ),
        "dag_run": SimpleNamespace(clear_number=clear_number, logical_date=LOGICAL_DATE),
        "outlet_events": OutletEventAccessors(),
    }
    submit = mocker.patch.object(
        DeltaMergeHook, "run_merge", return_value={"tableVersion": 1}, side_effect=failure
    )
    operator.render_template_fields(context)
    operator.execute(context)
    return TaskRun(operator, context, submit)


def submitted_spec(
    mocker, params: dict[str, Any], *, failure: Exception | None = None, **arguments: Any
) -> MergeSpec:
    """The spec that ``run_task`` submitted."""
    return run_task(mocker, params, failure=failure, **arguments).submit.call_args.args[0]


def python_merge(**fields: Any) -> dict[str, Any]:
    return {
        "target": "/lake/orders",
        "source": "/lake/staging/orders.parquet",
        "condition": "t.order_id = s.order_id",
        "clauses": [insert_all()],
        **fields,
    }


def test_the_shipped_sql_example_keeps_a_backtick_in_the_lake_path_a_path(mocker):
    with pytest.raises(AirflowFailException, match=r"DELTAMERGE_UNSAFE_PATH.*holds '`'"):
        submitted_spec(mocker, {"lake": BACKTICK_ATTACK}, merge_sql="sql/merge_orders.sql")


def test_the_shipped_sql_example_still_merges_a_plain_lake(mocker):
    # As dags_examples/merge_sql.py runs it: the lake is a param, its roots are allowed_paths.
    arguments = {"merge_sql": "sql/merge_orders.sql", "allowed_paths": ["/data/my lake"]}
    spec = submitted_spec(mocker, {"lake": "/data/my lake"}, **arguments)
    assert spec.target == "/data/my lake/orders"
    assert spec.source == PathSource("/data/my lake/staging/orders/2024-01-02.parquet")


def test_a_quoted_value_in_the_condition_stays_one_string(mocker):
    spec = submitted_spec(
        mocker,
        {"region": WIDENING},
        **python_merge(condition="t.id = s.id AND t.region = '{{ params.region }}'"),
    )
    comparison = sqlglot.parse_one(spec.condition, read="spark").find_all(exp.EQ)
    assert [c.expression.this for c in comparison if isinstance(c.expression, exp.Literal)] == [WIDENING]
    assert spec.condition == "t.id = s.id AND t.region = 'eu\\' OR \\'1\\'=\\'1'"


def test_an_unquoted_value_in_the_condition_is_refused(mocker):
    with pytest.raises(AirflowFailException, match=r"stands outside quotes.*sql_literal"):
        submitted_spec(
            mocker, {"region": WIDENING}, **python_merge(condition="t.region = {{ params.region }}")
        )


def test_sql_literal_quotes_a_value_and_a_list_where_the_template_has_no_quotes(mocker):
    spec = submitted_spec(
        mocker,
        {"regions": ["eu", WIDENING]},
        **python_merge(condition="t.id = s.id AND t.region IN {{ params.regions | sql_literal }}"),
    )
    assert spec.condition == "t.id = s.id AND t.region IN ('eu', 'eu\\' OR \\'1\\'=\\'1')"


def test_clause_conditions_and_expressions_bind_their_values(mocker):
    spec = submitted_spec(
        mocker,
        {"region": WIDENING, "note": "x'), v = ('y"},
        **python_merge(
            clauses=[
                delete(condition="t.region = '{{ params.region }}'"),
                update({"note": "'{{ params.note }}'"}),
                insert({"id": "s.id"}),
            ]
        ),
    )
    assert spec.clauses[0].condition == "t.region = 'eu\\' OR \\'1\\'=\\'1'"
    assert spec.clauses[1].set == (("note", "'x\\'), v = (\\'y'"),)


def test_a_value_that_would_be_an_expression_in_a_clause_is_refused(mocker):
    with pytest.raises(AirflowFailException, match="stands outside quotes"):
        submitted_spec(
            mocker,
            {"expr": "java_method('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY')"},
            **python_merge(clauses=[update({"note": "{{ params.expr }}"})]),
        )


def test_reflection_written_in_the_dag_is_refused_too(mocker):
    with pytest.raises(AirflowFailException, match="DELTAMERGE_REFLECTION_REFUSED"):
        submitted_spec(
            mocker,
            {},
            **python_merge(clauses=[update({"note": "reflect('java.lang.System', 'getenv', 'HOME')"})]),
        )


def test_a_source_query_binds_values_and_checks_the_files_it_reads(mocker):
    query = "SELECT * FROM parquet.`/lake/{{ params.area }}/x` WHERE day = '{{ params.day }}'"
    spec = submitted_spec(
        mocker, {"area": "staging", "day": WIDENING}, **python_merge(source=QuerySource(query))
    )
    assert spec.source == QuerySource(
        "SELECT * FROM parquet.`/lake/staging/x` WHERE day = 'eu\\' OR \\'1\\'=\\'1'"
    )
    with pytest.raises(AirflowFailException, match="DELTAMERGE_UNSAFE_PATH"):
        submitted_spec(
            mocker, {"area": BACKTICK_ATTACK, "day": "d"}, **python_merge(source=QuerySource(query))
        )


@pytest.mark.parametrize("field", ["target", "source"])
def test_a_templated_path_must_be_a_path(mocker, field):
    with pytest.raises(AirflowFailException, match=f"The {field} path .* holds"):
        submitted_spec(mocker, {"p": "/lake/x'y"}, **python_merge(**{field: "{{ params.p }}"}))


def test_the_lake_roots_keep_a_source_away_from_system_files(mocker):
    arguments = python_merge(source=PathSource("{{ params.path }}", format="csv"), allowed_paths=["/lake"])
    with pytest.raises(AirflowFailException, match=r"DELTAMERGE_PATH_NOT_ALLOWED.*'/etc/passwd'"):
        submitted_spec(mocker, {"path": "/etc/passwd"}, **arguments)
    assert submitted_spec(mocker, {"path": "/lake/in.csv"}, **arguments).source.path == "/lake/in.csv"


def test_the_lake_roots_come_from_airflows_configuration(mocker, monkeypatch):
    monkeypatch.setenv("AIRFLOW__DELTAMERGE__ALLOWED_PATHS", "/lake, s3://bucket/lake")
    with pytest.raises(AirflowFailException, match="DELTAMERGE_PATH_NOT_ALLOWED"):
        submitted_spec(mocker, {"t": "/elsewhere/t"}, **python_merge(target="{{ params.t }}"))
    assert (
        submitted_spec(mocker, {"t": "/lake/t"}, **python_merge(target="{{ params.t }}")).target == "/lake/t"
    )


def test_by_default_run_conf_cannot_make_a_source_of_etc_passwd(mocker):
    # The source is all template: the DAG writes no root for it, so no run conf value may choose it.
    arguments = python_merge(source=PathSource("{{ params.path }}", format="csv"))
    with pytest.raises(AirflowFailException, match=r"DELTAMERGE_PATH_NOT_ALLOWED.*'/etc/passwd'.*ANY_PATH"):
        submitted_spec(mocker, {"path": "/etc/passwd"}, **arguments)


def test_by_default_the_shipped_sql_cannot_be_pointed_at_another_teams_lake(mocker):
    # merge_orders.sql starts both paths with {{ params.lake }}: without allowed_paths nothing holds the lake.
    with pytest.raises(AirflowFailException, match=r"DELTAMERGE_PATH_NOT_ALLOWED.*starts with a value"):
        submitted_spec(mocker, {"lake": "/lake/team-b"}, merge_sql="sql/merge_orders.sql")


def test_by_default_a_value_may_choose_only_below_the_root_the_dag_writes(mocker):
    # The lake is /lake/team-a/; a table param that climbs out of it reaches team b's table.
    merge_sql = (
        "MERGE INTO delta.`/lake/team-a/{{ params.table }}` AS t "
        "USING parquet.`/lake/team-a/staging/{{ ds }}.parquet` AS s ON t.id = s.id "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    climbing = r"DELTAMERGE_PATH_NOT_ALLOWED.*'/lake/team-a/\.\./team-b/"
    with pytest.raises(AirflowFailException, match=climbing):
        submitted_spec(mocker, {"table": "../team-b/orders"}, merge_sql=merge_sql)
    assert submitted_spec(mocker, {"table": "orders"}, merge_sql=merge_sql).target == "/lake/team-a/orders"
    python_form = python_merge(target="/lake/team-a/{{ params.table }}", source="/lake/team-a/in.parquet")
    with pytest.raises(AirflowFailException, match="DELTAMERGE_PATH_NOT_ALLOWED"):
        submitted_spec(mocker, {"table": "../team-b/orders"}, **python_form)
    assert submitted_spec(mocker, {"table": "orders"}, **python_form).target == "/lake/team-a/orders"


@pytest.mark.parametrize("value", ["../../etc/passwd", "x/../../../etc/passwd", "..", "./../other"])
def test_by_default_parent_folders_cannot_leave_the_written_root(mocker, value):
    arguments = python_merge(source=PathSource("/lake/staging/{{ params.file }}", format="csv"))
    with pytest.raises(AirflowFailException, match="DELTAMERGE_PATH_NOT_ALLOWED"):
        submitted_spec(mocker, {"file": value}, **arguments)


def test_by_default_a_link_inside_the_root_cannot_lead_out_of_it(mocker, tmp_path):
    lake, outside = tmp_path / "lake", tmp_path / "other-team"
    (lake / "staging").mkdir(parents=True)
    outside.mkdir()
    (outside / "orders.csv").write_text("id\n1\n")
    (lake / "staging" / "link").symlink_to(outside)
    (lake / "staging" / "day.csv").write_text("id\n2\n")
    templated = PathSource(f"{lake}/staging/{{{{ params.file }}}}", format="csv")
    for allowed in ({}, {"allowed_paths": [str(lake)]}):
        arguments = python_merge(target=f"{lake}/orders", source=templated, **allowed)
        with pytest.raises(AirflowFailException, match=r"DELTAMERGE_PATH_NOT_ALLOWED.*symbolic links"):
            submitted_spec(mocker, {"file": "link/orders.csv"}, **arguments)
        assert submitted_spec(mocker, {"file": "day.csv"}, **arguments).source.path.endswith("day.csv")


def test_by_default_a_merge_into_a_remote_table_reads_nothing_in_the_workers_home(
    mocker, tmp_path, monkeypatch
):
    home = tmp_path / "home" / "airflow"
    (home / ".aws").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    arguments = python_merge(target="s3://lake/orders", source=PathSource(f"{tmp_path}/{{{{ params.p }}}}"))
    with pytest.raises(AirflowFailException, match=r"DELTAMERGE_PATH_NOT_ALLOWED.*worker's .*remote table"):
        submitted_spec(mocker, {"p": "home/airflow/.aws/credentials"}, **arguments)
    assert submitted_spec(mocker, {"p": "extracts/x.parquet"}, **arguments).source.path.endswith("x.parquet")


def test_by_default_a_table_name_keeps_the_namespace_the_dag_writes(mocker):
    with pytest.raises(AirflowFailException, match=r"DELTAMERGE_TABLE_NOT_ALLOWED.*'team_b\.orders'"):
        submitted_spec(mocker, {"t": "team_b.orders"}, **python_merge(target="{{ params.t }}"))
    assert submitted_spec(mocker, {"t": "orders"}, **python_merge(target="team_a.{{ params.t }}")).target == (
        "team_a.orders"
    )
    # A name that Spark reads as files is a path, and holds to the paths' rules.
    source = TableSource("{{ params.t }}")
    with pytest.raises(AirflowFailException, match=r"DELTAMERGE_PATH_NOT_ALLOWED.*'/etc/passwd'"):
        submitted_spec(mocker, {"t": "csv.`/etc/passwd`"}, **python_merge(source=source))


def test_any_path_is_the_explicit_way_to_let_run_conf_choose(mocker, monkeypatch):
    arguments = python_merge(source=PathSource("{{ params.path }}", format="csv"), allowed_paths=ANY_PATH)
    assert submitted_spec(mocker, {"path": "/etc/passwd"}, **arguments).source.path == "/etc/passwd"
    monkeypatch.setenv("AIRFLOW__DELTAMERGE__ALLOWED_PATHS", "*")
    anywhere = python_merge(target="{{ params.t }}")
    assert submitted_spec(mocker, {"t": "team_b.orders"}, **anywhere).target == "team_b.orders"


@pytest.mark.parametrize("allowed", [[], "/lake"])
def test_an_allowed_paths_that_reads_two_ways_fails_when_the_dag_is_parsed(allowed):
    with pytest.raises(AirflowException, match=r"allowed_paths is .*ANY_PATH"):
        DeltaMergeOperator(task_id="merge", allowed_paths=allowed, **python_merge())


def test_only_harmless_spark_conf_keys_take_templated_values(mocker):
    with pytest.raises(
        AirflowFailException, match=r"DELTAMERGE_TEMPLATED_CONF_REFUSED.*spark\.driver\.extraJavaOptions"
    ):
        submitted_spec(
            mocker,
            {"opts": "-javaagent:/tmp/evil.jar"},
            **python_merge(conf={"spark.driver.extraJavaOptions": "{{ params.opts }}"}),
        )
    operator_conf = {"spark.sql.shuffle.partitions": "{{ params.n }}", "spark.jars": "/opt/fixed.jar"}
    submitted_spec(mocker, {"n": "8"}, **python_merge(conf=operator_conf))


def test_the_rendered_merge_shows_its_clauses_with_their_values_bound(mocker):
    # The Rendered Templates tab reads merge_statement: the clause condition rendered, the value quoted.
    run = run_task(
        mocker,
        {"region": "eu' OR 1=1 --"},
        **python_merge(clauses=[update_all(condition="s.region = '{{ params.region }}'"), insert_all()]),
    )
    statement = run.operator.merge_statement
    assert "WHEN MATCHED AND s.region = 'eu\\' OR 1=1 --' THEN UPDATE SET *" in statement
    assert "{{" not in statement
    assert run.submit.call_args.args[0] == parse_merge_sql(statement)  # what ran is what the tab shows


def test_the_task_links_to_its_tables_merge_history(mocker, tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example/team-a/")
    run = run_task(mocker, {}, **python_merge(target=str(tmp_path / "orders")))
    key = TaskInstanceKey(run.operator.dag_id, run.operator.task_id, "manual__1", 1, -1)
    links = {link.name: link.get_link(run.operator, ti_key=key) for link in run.operator.operator_extra_links}
    # No job ran here (the submission is replaced), so no Spark UI was reported: that link stays empty.
    assert links == {
        "Merge history": (
            f"https://airflow.example/team-a/deltamerge/history/dags/{key.dag_id}/tasks/{key.task_id}"
        ),
        "Spark application": "",
    }
