"""How much of a test matrix a run covers: CI's profile (the default) or the local one
(``HYPOTHESIS_PROFILE=dev``), as the generated tests' example counts do (docs/development.md).

Some tests run one scenario over a product of dimensions (executors by table features, merge paths by object
stores), each combination a Spark job of tens of seconds. Locally every combination runs. CI runs every value
of every dimension, not every combination: the ``covering`` rows, which the day shifts, so that the pairings
CI runs change from one day to the next and each pairing is reached within a few days. A failing pairing is
named in its test id; the local profile runs it again, with all the others.

A matrix or list that compares a table feature with Delta's own merge, where the differential suite draws
that feature in every run, runs one pairing or value a day in CI (``pairing_of_the_day``, ``of_the_day``): the
suite compares the feature with Delta every day, and CI's 40 minutes do not hold both whole.
"""

from __future__ import annotations

import datetime
import itertools
import os
import random
from collections.abc import Sequence
from typing import Any

LOCAL = os.environ.get("HYPOTHESIS_PROFILE", "ci") == "dev"
# The seed of the differential suite's draws (tests/engine/test_differential_delta.py): set to replay a run.
SEED_VARIABLE = "DIFFERENTIAL_SEED"


def covering(*dimensions: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Every combination of ``dimensions``' values locally; in CI, rows that hold every value of every
    dimension at least once (as many as the longest dimension has values), shifted by the day."""
    if LOCAL:
        return list(itertools.product(*dimensions))
    day = _today()
    width = max(len(values) for values in dimensions)
    return [
        tuple(values[(row + day * shift) % len(values)] for shift, values in enumerate(dimensions))
        for row in range(width)
    ]


def of_the_day(values: Sequence[Any]) -> list[Any]:
    """Every one of ``values`` locally; in CI, one of them, another each day."""
    return list(values) if LOCAL else [values[_today() % len(values)]]


def pairing_of_the_day(*dimensions: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Every combination of ``dimensions``' values locally; in CI one of them, another each day.

    For a matrix that compares one table feature with Delta's own merge where the differential suite
    (tests/engine/test_differential_delta.py) draws that feature in every run: CI compares the feature with
    Delta every day there, and here runs the matrix's pairings one a day in turn."""
    return of_the_day(list(itertools.product(*dimensions)))


def _today() -> int:
    # UTC: both pytest-xdist workers collect the same tests whatever their machine's time zone.
    return datetime.datetime.now(datetime.UTC).date().toordinal()


def choose_draw_seed() -> int:
    """The seed of this run's generated statements, put in the environment (before pytest-xdist starts its
    workers, which inherit it) unless it is there already: in CI the day's number, so each day draws new
    statements that anyone can draw again; locally a random one. Either is printed in pytest's header."""
    default = random.randrange(1 << 32) if LOCAL else _today()
    return int(os.environ.setdefault(SEED_VARIABLE, str(default)))


def draw_seed() -> int:
    """The seed ``choose_draw_seed`` chose for this run."""
    return int(os.environ[SEED_VARIABLE])
