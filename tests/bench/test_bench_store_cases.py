"""``python -m bench store --cases delta``'s checks and report, on hand-made runs (the runs themselves need a
scale's tables and a store's server: bench/store_cases.py)."""

from __future__ import annotations

from bench.cases import Counts
from bench.store_cases import CaseRun, StoreCasesResult, failures, store_cases_markdown

EXPECTED = Counts(inserted=10, updated=5, deleted=0, rows_after=1_010)


def result(*runs: CaseRun) -> StoreCasesResult:
    return StoreCasesResult("2026-11-28T12:00:00Z", "0.1.0", "s3", "S", 1, 0.5, ("upsert_a",), list(runs))


def run(
    contender: str, seconds: float | None, requests: dict[str, int], counts: Counts | None = EXPECTED
) -> CaseRun:
    error = None if seconds else f"upsert_a: {contender} failed: OSError: down"
    return CaseRun("upsert_a", contender, 1, requests, seconds, counts if seconds else None, error)


def test_a_failed_run_or_counts_unlike_the_draw_fail_the_run() -> None:
    wrong = Counts(inserted=9, updated=5, deleted=0, rows_after=1_009)
    found = failures(
        result(
            run("engine", 2.0, {"GET log": 3}),
            run("deltalake-non-streamed", 1.0, {"GET log": 2}, wrong),
            run("deltalake-streamed", None, {}),
        ),
        {"upsert_a": EXPECTED},
    )
    assert found == [
        "upsert_a: deltalake-streamed failed: OSError: down",
        f"upsert_a (repetition 1): deltalake-non-streamed reports {wrong}, "
        f"but the source draw implies {EXPECTED}",
    ]
    assert failures(result(run("engine", 2.0, {"GET log": 3})), {"upsert_a": EXPECTED}) == []


def test_the_report_gives_requests_by_kind_the_logs_share_and_the_engines_ratio() -> None:
    text = store_cases_markdown(
        result(
            run("engine", 3.0, {"LIST log": 2, "GET log": 10, "GET data": 4, "PUT data": 2, "PUT log": 1}),
            run("deltalake-non-streamed", 1.5, {"GET log": 5, "GET data": 1, "PUT log": 1}),
            run("deltalake-streamed", 2.0, {"GET log": 5, "GET data": 20, "PUT log": 1}),
        )
    )
    assert "| upsert_a | engine | 2 | 14 | 0 | 3 | 0 | 19 | 13 | 3.00 |  |" in text
    assert "| upsert_a | deltalake-non-streamed | 0 | 6 | 0 | 1 | 0 | 7 | 6 | 1.50 | 2.00x |" in text
    assert "| deltalake-streamed | 26 | 2.0 | 1.50x |" in text
    assert "as the draw implies" in text
