"""The correctness check of every run: what each merge reports must match what its source draw implies."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

from bench.cases import Counts


def disagreements(case: str, expected: Counts, reported: Mapping[str, Counts | None]) -> list[str]:
    """One message per run (label -> counts) whose counts differ from ``expected``; none when all agree.

    Checking each run against the draw, rather than only against each other, also catches the case where
    every contender is wrong in the same way.
    """
    return [
        f"{case}: {label} reports {counts}, but the source draw implies {expected}"
        for label, counts in reported.items()
        if counts != expected
    ]


def announce(messages: Iterable[str]) -> None:
    """Print disagreements so they cannot be missed in the progress output."""
    for message in messages:
        print(f"\n!!! DISAGREEMENT !!! {message}\n", file=sys.stderr, flush=True)
