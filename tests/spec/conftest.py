"""Fixtures and hypothesis profiles of the spec tests.

Profiles: ``ci`` (default, quick) and ``dev`` (more examples); pick one with ``HYPOTHESIS_PROFILE=dev``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ORDERS_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("qty", pa.int64()),
        ("addr", pa.struct([("city", pa.string()), ("zip", pa.string())])),
        ("active", pa.bool_()),
    ]
)


@pytest.fixture
def make_delta_table(tmp_path: Path) -> Callable[..., str]:
    """Write a one-row Delta table with ``schema`` (orders by default) under tmp_path; returns its path."""

    def make(name: str = "orders", schema: pa.Schema = ORDERS_SCHEMA) -> str:
        path = str(tmp_path / name)
        write_deltalake(path, pa.Table.from_pylist([{}], schema=schema))
        return path

    return make
