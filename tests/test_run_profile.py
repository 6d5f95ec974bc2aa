"""The seed of the differential suite's draws (tests/run_profile.py)."""

from __future__ import annotations

import datetime

from tests import run_profile


def test_ci_draws_from_the_days_number_a_set_seed_wins_and_locally_each_run_draws_its_own(monkeypatch):
    monkeypatch.delenv(run_profile.SEED_VARIABLE, raising=False)
    monkeypatch.setattr(run_profile, "LOCAL", False)
    today = datetime.datetime.now(datetime.UTC).date().toordinal()
    assert run_profile.choose_draw_seed() == run_profile.draw_seed() == today
    # A seed in the environment (a replay, or the controller's for pytest-xdist's workers) is kept
    monkeypatch.setenv(run_profile.SEED_VARIABLE, "12345")
    assert run_profile.choose_draw_seed() == run_profile.draw_seed() == 12345
    monkeypatch.setattr(run_profile, "LOCAL", True)
    seeds = set()
    for _ in range(3):
        monkeypatch.delenv(run_profile.SEED_VARIABLE)
        seeds.add(run_profile.choose_draw_seed())
    assert len(seeds) == 3
