"""Statements the differential suite (tests/engine/test_differential_delta.py) once failed on, kept as
explicit examples: every run, in every profile, judges them first, whatever its seed draws.

When a run fails, Hypothesis prints the falsifying ``Case`` whole; add it here as it is printed (with the
imports its values need), with a line on what it found, in the same change as the fix or the deliberate
difference that explains it.
"""

from __future__ import annotations

from tests.engine.delta_differential import Case

FAILED_BEFORE: tuple[Case, ...] = ()
