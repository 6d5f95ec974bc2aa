"""Generated MERGE INTO statements run by Delta Lake's own runtime and by our engine (tests/engine/
delta_differential.py): outcomes equal, or different exactly as one deliberate difference says
(tests/engine/delta_differences.py). ``HYPOTHESIS_PROFILE=dev`` runs 2,000 statements, CI 100.
"""

from __future__ import annotations

import shutil

from hypothesis import assume, given

from tests.engine.conftest import DIFFERENTIAL_SETTINGS
from tests.engine.delta_differences import explained_by, message_explained_by
from tests.engine.delta_differential import (
    Case,
    Outcome,
    cases,
    delta_failed_internally,
    message_agrees,
    run_case,
)


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
        f"source {case.source_columns}: {case.source_rows}\ndiffers: {differing}\n"
        f"Delta's error: {delta.message}\nours: {ours.message}"
    )


@DIFFERENTIAL_SETTINGS
@given(case=cases())
def test_delta_and_the_engine_agree_on_generated_statements(spark, tmp_path_factory, case):
    folder = tmp_path_factory.mktemp("case")
    try:
        delta, ours = run_case(spark, case, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # Delta's own internal errors (an analyzer bug such as "Found the unresolved Cast") say nothing of what
    # a MERGE means: such a statement is no case
    assume(not delta_failed_internally(delta))
    assert delta.observed() == ours.observed() or explained_by(delta, ours), report(case, delta, ours)
    assert message_agrees(delta, ours) or message_explained_by(delta, ours), report(case, delta, ours)
