"""``python -m bench store``'s request kinds, its checks and its report, on hand-made merges (the merges
themselves run against the S3 server in tests/stores)."""

from __future__ import annotations

from bench.object_store import StoreMerge, StoreResult, failures, request_kind, store_markdown

ENDPOINT = "http://127.0.0.1:4711"


def test_each_request_is_counted_by_kind_and_place() -> None:
    assert (
        request_kind("GET", f"{ENDPOINT}/lake?list-type=2&prefix=t%2F_delta_log%2F&start-after=x")
        == "LIST log"
    )
    assert (
        request_kind("GET", f"{ENDPOINT}/lake?list-type=2&prefix=t%2Fdeltamerge-staging-1%2F") == "LIST data"
    )
    assert request_kind("GET", f"{ENDPOINT}/lake/t/_delta_log/00000000000000000003.json") == "GET log"
    assert request_kind("HEAD", f"{ENDPOINT}/lake/t/part-0.parquet") == "HEAD data"
    assert request_kind("PUT", f"{ENDPOINT}/lake/t/_delta_log/00000000000000000004.json") == "PUT log"
    assert request_kind("POST", f"{ENDPOINT}/lake?delete") == "DELETE data"
    assert (
        request_kind("DELETE", f"{ENDPOINT}/lake/t/_delta_log/.deltamerge-conditional-put-1") == "DELETE log"
    )


def merges(requests_by_age: dict[int, int], *, inserted: int = 10) -> StoreResult:
    result = StoreResult("2026-11-28T03:00:00Z", "0.1.0", 1, 0.5)
    for age, count in requests_by_age.items():
        for contender in ("engine", "deltalake"):
            requests = {"GET log": count - 1, "PUT log": 1}
            result.merges.append(StoreMerge(contender, age, 0, requests, 1.5, inserted, 50))
    return result


def test_the_check_fails_when_requests_grow_with_the_tables_age_or_counts_are_wrong() -> None:
    # A table with no checkpoint yet (age 1) reads less; past the first, the same tail costs the same.
    assert failures(merges({1: 40, 25: 52, 105: 53})) == []
    growing = failures(merges({1: 40, 25: 60, 105: 140}))
    assert growing == ["the engine's requests per merge grow with the table's age: {25: 60, 105: 140}"]
    wrong = failures(merges({1: 40}, inserted=9))
    assert wrong[0] == "engine at age 1: 9 inserted and 50 updated, not 10 and 50"


def test_the_report_gives_each_age_and_contender_by_kind() -> None:
    text = store_markdown(merges({1: 40, 25: 42}))
    assert "| 25 | engine | 0 | 0 | 41 | 0 | 0 | 0 | 1 | 0 | 0 | 0 | 42 | 1.50 |" in text
    assert "every merge's counts right" in text


def test_azures_requests_are_counted_alike() -> None:
    account = f"{ENDPOINT}/devstoreaccount1"
    listing = f"{account}/bench?restype=container&comp=list&prefix=t%2F_delta_log%2F&startFrom=x"
    assert request_kind("GET", listing) == "LIST log"
    assert request_kind("PUT", f"{account}/bench/t/part-0.parquet?comp=block&blockid=AA") == "PUT data"
    assert request_kind("HEAD", f"{account}/bench/t/_delta_log/00000000000000000001.json") == "HEAD log"


def test_gcss_requests_are_counted_alike() -> None:
    # The XML API deltalake and the commit use, and the JSON API of Spark's GCS connector
    assert request_kind("GET", f"{ENDPOINT}/bench?list-type=2&prefix=t%2F_delta_log%2F") == "LIST log"
    assert request_kind("GET", f"{ENDPOINT}/storage/v1/b/bench/o?prefix=t%2Fpart") == "LIST data"
    assert request_kind("GET", f"{ENDPOINT}/storage/v1/b/bench/o/t%2F_delta_log%2F0.json") == "GET log"
    assert request_kind("POST", f"{ENDPOINT}/upload/storage/v1/b/bench/o?uploadType=resumable") == "PUT data"
    assert request_kind("POST", f"{ENDPOINT}/bench/t/part-0.parquet?uploads") == "PUT data"
    assert request_kind("DELETE", f"{ENDPOINT}/storage/v1/b/bench/o/t%2Fstaging%2Fx") == "DELETE data"
    # object_store encodes the name whole
    assert (
        request_kind("GET", f"{ENDPOINT}/bench/t%2F%5Fdelta%5Flog%2F00000000000000000001.json") == "GET log"
    )
