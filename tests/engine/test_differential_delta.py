"""Generated MERGE INTO statements run by Delta Lake's own runtime and by our engine (tests/engine/
delta_differential.py): outcomes equal, or different exactly as one deliberate difference says
(tests/engine/delta_differences.py); where Delta's runtime fails internally, ours as one category of
``WHEN_DELTA_FAILS_INTERNALLY`` says. ``HYPOTHESIS_PROFILE=dev`` runs 2,000 statements, CI 150, drawn from the
run's seed (tests/run_profile.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest
from hypothesis import event, example, given, seed
from pyspark.sql import SparkSession

from tests.engine.conftest import DIFFERENTIAL_SETTINGS
from tests.engine.delta_differences import (
    CHANGES as CHANGE_COUNTS,
)
from tests.engine.delta_differences import (
    IN_EVERY_COMMIT,
    Difference,
    explained_by,
    internal_failure_explained_by,
    message_explained_by,
    same_merge,
)
from tests.engine.delta_differential import (
    Case,
    Outcome,
    cases,
    delta_failed_internally,
    dimensions,
    message_agrees,
    run_case,
)
from tests.engine.differential_examples import FAILED_BEFORE
from tests.run_profile import draw_seed


def report(case: Case, delta: Outcome, ours: Outcome) -> str:
    differing = {
        key: {"delta": value, "engine": ours.observed().get(key)}
        for key, value in delta.observed().items()
        if ours.observed().get(key) != value
    }
    return (
        f"\n{case.statement}\nconfs {dict(case.confs)}, properties {dict(case.properties)}, features "
        f"{case.features}, partitioned by {case.partition_by}\n"
        f"target {case.target_columns}: {case.target_rows}\n"
        f"source {case.source_columns}: {case.source_rows}\ntwo phases {case.two_phases}, catalog "
        f"{case.catalog}, excepted {case.excepted}, a commit per row {case.row_commits}, log ages "
        f"{case.log_ages}\ndiffers: {differing}\n"
        f"Delta's error: {delta.message}\nours: {ours.message}"
    )


def with_failed_before(test: Callable[..., None]) -> Callable[..., None]:
    """``test`` with every statement the suite once failed on as an explicit example, judged first."""
    for case in FAILED_BEFORE:
        test = example(case=case)(test)
    return test


def run_in_a_folder(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, case: Case
) -> tuple[Outcome, Outcome]:
    folder = tmp_path_factory.mktemp("case")
    try:
        return run_case(spark, case, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def as_delta_runs_it(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    case: Case,
    ours: Outcome,
    difference: Difference,
) -> None:
    """Where Delta failed a statement we merged and ``difference`` says how Delta runs it, Delta's merge of
    that is ours: the version, rows, schema, change data and the counts of source and changed rows."""
    if difference.as_delta_runs_it is None:
        return
    changed = difference.as_delta_runs_it(case)
    delta, _ = run_in_a_folder(spark, tmp_path_factory, changed)
    assert same_merge(delta, ours), f"{difference.name}: Delta, as it runs it," + report(changed, delta, ours)


def as_both_run_it(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    case: Case,
    outcomes: tuple[Outcome, Outcome],
    difference: Difference,
) -> None:
    """Where both failed with another error and ``difference`` says how only one of the two can arise,
    both runners' outcomes of that are one, a failure with that error."""
    if difference.as_both_run_it is None:
        return
    changed = difference.as_both_run_it(case)
    delta, ours = run_in_a_folder(spark, tmp_path_factory, changed)
    either = {outcome.error_class for outcome in outcomes}
    assert (
        delta.observed() == ours.observed()
        and delta.error_class in either
        and (message_agrees(delta, ours) or message_explained_by(delta, ours))
    ), f"{difference.name}: as both run it," + report(changed, delta, ours)


@DIFFERENTIAL_SETTINGS
@seed(draw_seed())
@with_failed_before
@given(case=cases())
def test_delta_and_the_engine_agree_on_generated_statements(spark, tmp_path_factory, case):
    delta, ours = run_in_a_folder(spark, tmp_path_factory, case)
    for label in dimensions(case):
        event(label)
    changed = sum(delta.counts.get(k, 0) for k in CHANGE_COUNTS)
    event(
        f"Delta's outcome: {'an error' if delta.error_class else 'rows changed' if changed else 'no change'}"
    )
    if delta.error_class:
        event(f"Delta's error: {delta.error_class}")
    if (delta.table.get("history") or {}).get("first commit"):
        event("Delta's log cleanup deleted commits")
    if delta_failed_internally(delta):
        # Delta's own internal errors (an analyzer bug such as "Found the unresolved Cast") leave nothing of
        # Delta's to compare with: our outcome still gets a verdict, counted by its category in every run
        verdict = internal_failure_explained_by(delta, ours)
        event(f"Delta failed internally; the engine: {verdict.name if verdict else 'UNEXPLAINED'}")
        assert verdict is not None, report(case, delta, ours)
        as_delta_runs_it(spark, tmp_path_factory, case, ours, verdict)
        return
    event("judged against Delta's outcome")
    difference = explained_by(delta, ours)
    assert delta.observed() == ours.observed() or difference, report(case, delta, ours)
    if difference is not None:
        as_delta_runs_it(spark, tmp_path_factory, case, ours, difference)
        as_both_run_it(spark, tmp_path_factory, case, (delta, ours), difference)
    if delta.commit_info and ours.commit_info:
        broken = [d.name for d in IN_EVERY_COMMIT if not d.differs_so(delta, ours)]
        assert not broken, f"{broken} not as listed:" + report(case, delta, ours)
    # two classes are two outcomes, which the comparison above judged; one class, its first sentence here
    same_class = delta.error_class == ours.error_class
    assert not same_class or message_agrees(delta, ours) or message_explained_by(delta, ours), report(
        case, delta, ours
    )
