"""Rendered paths and names: a path is a path, a name a name, and both stay under the allowed lake roots."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, QuerySource, TableSource, insert_all
from airflow_provider_deltamerge.spec.locations import check_path, check_spec_locations, file_paths_in_query

ROOTS = ("/lake", "s3://bucket/lake")


def spec(target: str = "/lake/orders", source=None) -> MergeSpec:
    return MergeSpec(
        target=target,
        source=source or PathSource("/lake/staging/x.parquet"),
        condition="t.id = s.id",
        clauses=(insert_all(),),
    )


@pytest.mark.parametrize(
    "path",
    ["/lake/orders` AS t USING (SELECT 1)", "/lake/o'rders", '/lake/"x"', "/lake/a;b", "/lake/a\nb", ""],
)
def test_a_path_with_quotes_breaks_or_control_characters_is_refused(path):
    with pytest.raises(MergeSpecError, match="DELTAMERGE_UNSAFE_PATH"):
        check_path(path, where="target")


@pytest.mark.parametrize(
    "path",
    [
        "/lake",
        "/lake/orders",
        "/lake/a b/date=2024-01-01",
        "file:///lake/x",
        "s3://bucket/lake/t",
        "S3://BUCKET/lake/t",
    ],
)
def test_paths_under_an_allowed_root_pass(path):
    assert check_path(path, where="target", allowed_roots=ROOTS) == path


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "/lake/../etc/passwd",
        "/lakehouse/t",
        "s3://other/lake/t",
        "s3://bucket/lake2",
        "lake/t",
    ],
)
def test_paths_outside_every_allowed_root_are_refused(path):
    with pytest.raises(MergeSpecError, match=r"DELTAMERGE_PATH_NOT_ALLOWED.*outside the allowed lake roots"):
        check_path(path, where="source", allowed_roots=ROOTS)


def test_a_spec_is_checked_as_a_whole():
    check_spec_locations(spec(), allowed_roots=ROOTS)
    check_spec_locations(spec(target="shop.orders", source=TableSource("`my db`.t")), allowed_roots=ROOTS)
    with pytest.raises(MergeSpecError, match="DELTAMERGE_PATH_NOT_ALLOWED"):
        check_spec_locations(spec(source=PathSource("/etc/passwd", format="csv")), allowed_roots=ROOTS)
    with pytest.raises(MergeSpecError, match="DELTAMERGE_INVALID_TABLE_NAME"):
        check_spec_locations(spec(target="orders; DROP TABLE x"))
    with pytest.raises(MergeSpecError, match="DELTAMERGE_INVALID_TABLE_NAME"):
        check_spec_locations(spec(source=TableSource("a.b.c.d")))


def test_a_source_query_may_read_files_only_under_the_roots():
    query = "SELECT * FROM parquet.`/lake/x` JOIN csv.`/etc/passwd` USING (id) JOIN shop.t USING (id)"
    assert list(file_paths_in_query(query)) == ["/lake/x", "/etc/passwd"]
    with pytest.raises(MergeSpecError, match="'/etc/passwd' lies outside"):
        check_spec_locations(spec(source=QuerySource(query)), allowed_roots=ROOTS)
    check_spec_locations(spec(source=QuerySource("SELECT * FROM delta.`/lake/x`")), allowed_roots=ROOTS)
