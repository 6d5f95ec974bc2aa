"""The pause before the engine re-runs a merge after a conflicting commit: jittered, doubling, capped."""

from __future__ import annotations

from airflow_provider_deltamerge.engine import merge as merge_module
from airflow_provider_deltamerge.engine.merge import RERUN_BACKOFF_CAP_S, rerun_pause


def test_the_pause_range_doubles_per_attempt_up_to_the_cap(mocker):
    # The draw is the top of its range, so each pause shows the range it was drawn from.
    uniform = mocker.patch.object(merge_module.random, "uniform", side_effect=lambda low, high: high)

    pauses = [rerun_pause(attempt) for attempt in range(1, 7)]

    assert pauses == [1.0, 2.0, 4.0, 8.0, RERUN_BACKOFF_CAP_S, RERUN_BACKOFF_CAP_S]
    assert {c.args[0] for c in uniform.call_args_list} == {0}  # full jitter: from no pause at all


def test_the_pause_is_drawn_anew_within_its_range():
    pauses = {rerun_pause(3) for _ in range(200)}

    assert all(0 <= pause <= 4.0 for pause in pauses)
    assert len(pauses) > 100  # jittered, not one fixed pause
