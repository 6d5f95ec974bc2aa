"""The benchmark harness at a tiny scale: it runs every contender, checks every run and reports every case.

Nothing is timed here: speed is what the benchmark itself measures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bench.cases import Counts, select_cases
from bench.checks import disagreements
from bench.contenders import CONTENDERS
from bench.report import write_results
from bench.runner import run_benchmark
from bench.store_sales import Scale
from bench.summary import BASELINES
from tests.run_profile import of_the_day

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

TINY = Scale("tiny", 20_000, 128 * 1024)
# One of Delta's cases of each kind the harness checks apart (insert-only, delete-only, upsert), and the
# upsert on the table that writes deletion vectors. CI runs the last and one of the others a day
# (tests/run_profile.py): all four, each by every contender, took 83 s of a CI run.
KINDS = (
    "single_insert_only_fileMatchedFraction_0.05_rowNotMatchedFraction_0.05",
    "delete_only_fileMatchedFraction_0.05_rowMatchedFraction_0.05",
    "upsert_fileMatchedFraction_0.05_rowMatchedFraction_0.1_rowNotMatchedFraction_0.01",
)
SMOKE_CASES = (
    *of_the_day(KINDS),
    "upsert_fileMatchedFraction_0.05_rowMatchedFraction_0.1_rowNotMatchedFraction_0.01_deletionVectors",
)


def test_harness_checks_every_run_and_reports_every_case(spark: SparkSession, tmp_path: Path) -> None:
    # Given: a 20k-row target and Delta's cases of the day (each kind locally), and the upsert on the table
    # that writes deletion vectors
    cases = select_cases(SMOKE_CASES)
    # When: every contender runs each case once
    result = run_benchmark(
        spark,
        scale=TINY,
        cases=cases,
        contenders=CONTENDERS,
        repetitions=1,
        data_dir=tmp_path / "data",
        spark_startup_seconds=0.0,
        progress=lambda line: None,
    )
    report = write_results(result, tmp_path / "results").read_text()
    # Then: every run completed and agreed with its source draw, which changed rows in each case
    assert result.disagreements == []
    assert [r.error for r in result.records] == [None] * len(cases) * len(CONTENDERS)
    assert all(result.data[c].expected.inserted + result.data[c].expected.deleted > 0 for c in SMOKE_CASES)
    # And: each case has a row of times with a ratio to each baseline, and the chart was drawn
    for name in SMOKE_CASES:
        times_row = next(line for line in report.splitlines() if line.startswith(f"| {name} | "))
        assert times_row.count("x |") == len(BASELINES)
    assert "DISAGREEMENT" not in report
    # And: every engine run counted the driver's JVM round trips, and the report judges each target
    engine_runs = [r.run for r in result.records if r.contender == "engine" and r.run is not None]
    assert len(engine_runs) == len(cases) and all(run.jvm_calls for run in engine_runs)
    # And: the Spark jobs and queries of each contender in the session, per case: a merge runs more queries
    # than the floor's one, which reads the changed files and writes them back
    work = report.split("## Spark jobs and queries", 1)[1].split("\n## ", 1)[0]
    for name in SMOKE_CASES:
        row = next(line for line in work.splitlines() if line.startswith(f"| {name} | "))
        engine_jobs, engine_queries, floor_jobs, floor_queries, delta_jobs, delta_queries, warm_jobs, _ = map(
            int, row.strip("| ").split(" | ")[1:]
        )
        assert floor_queries == 1 and engine_queries > floor_queries and delta_queries > floor_queries
        assert min(engine_jobs, floor_jobs, delta_jobs, warm_jobs) >= 1
        # Delta's warm contender found the table's snapshot built: none of its jobs built it
        assert warm_jobs < delta_jobs, row
    targets = report.split("## Targets", 1)[1]
    for target in ("1.3x floor", "1.6x deltalake-non-streamed", "within 1.5 s", "≤ 2.0x the floor", "1.2x"):
        assert target in targets
    assert list((tmp_path / "results").glob("tiny-*.png"))


def test_disagreement_is_flagged_for_each_wrong_or_failed_run() -> None:
    # Given: the counts a case's source draw implies
    expected = Counts(inserted=5, updated=3, deleted=0, rows_after=105)
    # When: one contender agrees, one reports one update too few, one failed
    found = disagreements(
        "upsert",
        expected,
        {"engine": expected, "deltalake-streamed": Counts(5, 2, 0, 105), "deltalake-non-streamed": None},
    )
    # Then: the two others are flagged, by name
    assert len(found) == 2
    assert "deltalake-streamed reports Counts(inserted=5, updated=2" in found[0]
    assert "deltalake-non-streamed reports None" in found[1]
