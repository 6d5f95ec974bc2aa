"""``make demo``'s script, run for real: the merge's headline first, then where everything is."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.slow


def test_demo_prints_the_headline_and_where_things_are(tmp_path):
    result = subprocess.run(
        [sys.executable, "scripts/demo.py", "--dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    # The sample extract updates orders 900-999 and adds 1000-1099 in the table's one file of 1000 orders.
    headline = next(line for line in lines if line.startswith("The merge: "))
    assert headline.startswith(
        "The merge: 100 inserted, 100 updated, 0 deleted, 900 copied rows; 1 file rewritten"
    )
    metrics = lines[lines.index(next(line for line in lines if line.startswith("All metrics"))) + 1 :]
    assert metrics[0].split() == ["numTargetRowsInserted", "100"]
    assert f"table         {tmp_path / 'lake' / 'orders'}" in result.stdout
    assert f"Airflow home  {tmp_path / 'airflow'}" in result.stdout
    assert f"logs          {tmp_path / 'dags_test.log'}" in result.stdout
    assert "Merge into" in (tmp_path / "dags_test.log").read_text()
