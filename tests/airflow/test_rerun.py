"""A task that finds its run's merge in the log: an automatic retry returns it, a Clear merges again.

The log is a real Delta table holding a commit as our engine records it; what Airflow records of the task
instance (try number, max tries, the DAG run's clear number) is given as Airflow gives it after each event:
only the Spark submission is replaced.
"""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_provider_deltamerge.metrics import merge_result, readable
from airflow_provider_deltamerge.operators.assets import target_asset
from airflow_provider_deltamerge.operators.delta_merge import DeltaMergeOperator
from airflow_provider_deltamerge.spec import insert_all
from airflow_provider_deltamerge.spec.json_form import spec_hash
from tests.airflow.conftest import make_table, merge_commit
from tests.airflow.test_template_injection import run_task

METRICS = {"numTargetRowsInserted": 7}
# (try number, max tries, clear number) of a task with retries=1, as Airflow records them.
FIRST_TRY, AUTOMATIC_RETRY = (1, 1, 0), (2, 1, 0)
# A Clear after try 1 succeeded: max_tries = try_number + retries, and the DAG run's clear number goes up.
AFTER_CLEAR = (2, 2, 1)


def committed_table(tmp_path, **merge) -> str:
    """A table whose log holds the merge ``merge`` made by try 1 of run ``r``, before any Clear."""
    table = make_table(tmp_path / "orders")
    provenance = {"dagId": "injection", "taskId": "merge", "runId": "r", "mapIndex": -1, "tryNumber": 1}
    merge_commit(
        table, metrics=METRICS, provenance={**provenance, "clearNumber": 0, "specHash": merge_hash(merge)}
    )
    return table


def merge_hash(merge: dict[str, object]) -> str:
    return spec_hash(DeltaMergeOperator(task_id="merge", **merge).build_spec())  # type: ignore[arg-type]


def orders_merge(table: str, **fields: object) -> dict[str, object]:
    # retries=1, as the tries below assume
    source = "/lake/staging/orders.parquet"
    return {"target": table, "source": source, "condition": "t.id = s.id", "retries": 1, **fields}


@pytest.fixture
def merge(tmp_path) -> dict[str, object]:
    table = str(tmp_path / "orders")
    arguments = orders_merge(table, clauses=[insert_all()])
    committed_table(tmp_path, **arguments)
    return arguments


def event_extra(run) -> object:
    asset = target_asset(run.operator.target)
    return run.context["outlet_events"][asset].extra if asset in run.operator.outlets else "no event"


def test_an_automatic_retry_returns_the_commit_and_announces_it(mocker, merge):
    run = run_task(mocker, {}, tries=AUTOMATIC_RETRY, **{**merge, "rerun": "auto"})

    run.submit.assert_not_called()
    # The try that committed failed, so no event announced the commit yet: this one does.
    extra = event_extra(run)
    # The commit's metrics in the shape of a fresh merge's: every metric, MERGE INTO's result row, and
    # counted as one run (the commit predates the record of attempts); a commit of no files touches no
    # partition.
    committed = merge_result(METRICS, version=1, executor=None, spec_hash=merge_hash(merge))
    assert extra == {**readable(committed), "partitions": []}
    inserted = (extra["numTargetRowsInserted"], extra["num_inserted_rows"], extra["num_affected_rows"])
    assert inserted == (7, 7, 7)
    assert (extra["tableVersion"], extra["attempts"], extra["allAttemptsTimeMs"]) == (1, 1, 0)


def test_a_cleared_task_merges_again_and_announces_the_new_commit(mocker, merge):
    run = run_task(mocker, {}, tries=AFTER_CLEAR, **{**merge, "rerun": "auto"})

    run.submit.assert_called_once()
    assert run.submit.call_args.kwargs["rerun"] == "merge"  # the job must not skip it either
    provenance = run.submit.call_args.kwargs["provenance"]
    assert (provenance["clearNumber"], provenance["logicalDate"]) == (1, "2024-01-02T00:00:00+00:00")
    assert event_extra(run) == {**readable({"tableVersion": 1}), "partitions": []}


def test_a_reprocessing_backfill_merges_again(mocker, merge):
    # A backfill that reprocesses completed runs clears them: new tries, same DAG run clear number rule.
    run = run_task(mocker, {}, tries=(3, 3, 2), **{**merge, "rerun": "auto"})

    run.submit.assert_called_once()


def test_skip_after_a_clear_returns_the_commit_without_a_second_event(mocker, merge):
    run = run_task(mocker, {}, tries=AFTER_CLEAR, **{**merge, "rerun": "skip"})

    run.submit.assert_not_called()
    assert event_extra(run) == "no event"  # the try that made the commit announced it


def test_a_first_try_without_a_commit_lets_the_job_check_the_log_again(mocker, tmp_path):
    table = make_table(tmp_path / "orders")
    run = run_task(mocker, {}, tries=FIRST_TRY, **orders_merge(table, clauses=[insert_all()], rerun="auto"))

    assert run.submit.call_args.kwargs["rerun"] == "skip"


@pytest.mark.parametrize(("chosen", "merges"), [("merge", True), ("skip", False), ("auto", True)])
def test_run_conf_chooses_the_policy(mocker, merge, chosen, merges):
    run = run_task(mocker, {"rerun": chosen}, tries=AFTER_CLEAR, **{**merge, "rerun": "{{ params.rerun }}"})

    assert run.submit.called is merges


def test_run_conf_can_only_choose_a_policy(mocker, merge):
    with pytest.raises(AirflowFailException, match=r"DELTAMERGE_INVALID_RERUN.*'drop it'.*Give 'auto'"):
        run_task(mocker, {"rerun": "drop it"}, tries=AFTER_CLEAR, **{**merge, "rerun": "{{ params.rerun }}"})


def test_the_old_policy_names_still_work_with_a_deprecation_warning(tmp_path):
    with pytest.warns(DeprecationWarning, match="rerun='always' is deprecated; use rerun='merge'"):
        operator = DeltaMergeOperator(
            task_id="merge", rerun="always", **orders_merge("/lake/t", clauses=[insert_all()])
        )
    assert operator.rerun == "merge"


@pytest.mark.parametrize("asked", [True, "True", "{{ params.dry_run }}"], ids=["argument", "text", "param"])
def test_a_dry_run_asks_the_job_for_one_merges_even_when_committed_and_announces_nothing(
    mocker, merge, asked
):
    # A UI user can ask for a dry run through a param; the committed run in the log does not stop it.
    run = run_task(
        mocker, {"dry_run": True}, tries=AUTOMATIC_RETRY, **{**merge, "rerun": "auto", "dry_run": asked}
    )

    run.submit.assert_called_once()
    assert run.submit.call_args.kwargs["dry_run"] is True
    assert event_extra(run) == "no event"


def test_bounds_travel_to_the_job_as_declared(mocker, merge):
    bounds = {"numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.01}}
    run = run_task(mocker, {}, tries=FIRST_TRY, **{**merge, "rerun": "merge", "bounds": bounds})

    assert run.submit.call_args.kwargs["bounds"] == bounds
    assert run.submit.call_args.kwargs["dry_run"] is False
