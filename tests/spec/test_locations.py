"""Rendered paths and names: a path is a path, a name a name, and both stay under the allowed lake roots."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, QuerySource, TableSource, insert_all
from airflow_provider_deltamerge.spec.locations import (
    VALUE_MARK,
    WrittenPlaces,
    check_path,
    check_spec_locations,
    file_paths_in_query,
)

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
    check_spec_locations(spec(), allowed_paths=ROOTS)
    check_spec_locations(spec(target="shop.orders", source=TableSource("`my db`.t")), allowed_paths=ROOTS)
    with pytest.raises(MergeSpecError, match="DELTAMERGE_PATH_NOT_ALLOWED"):
        check_spec_locations(spec(source=PathSource("/etc/passwd", format="csv")), allowed_paths=ROOTS)
    with pytest.raises(MergeSpecError, match="DELTAMERGE_INVALID_TABLE_NAME"):
        check_spec_locations(spec(target="orders; DROP TABLE x"))
    with pytest.raises(MergeSpecError, match="DELTAMERGE_INVALID_TABLE_NAME"):
        check_spec_locations(spec(source=TableSource("a.b.c.d")))


def test_a_source_query_may_read_files_only_under_the_roots():
    query = "SELECT * FROM parquet.`/lake/x` JOIN csv.`/etc/passwd` USING (id) JOIN shop.t USING (id)"
    assert list(file_paths_in_query(query)) == ["/lake/x", "/etc/passwd"]
    with pytest.raises(MergeSpecError, match="'/etc/passwd' lies outside"):
        check_spec_locations(spec(source=QuerySource(query)), allowed_paths=ROOTS)
    check_spec_locations(spec(source=QuerySource("SELECT * FROM delta.`/lake/x`")), allowed_paths=ROOTS)
    # A query Spark reads, VARIANT paths and all, has its files found too (it used not to parse here)
    query = (
        "SELECT v:a::int AS a FROM parquet.`/lake/x` WHERE v:b.c[0] IS NOT NULL "
        "UNION SELECT 1 FROM csv.`/etc/x`"
    )
    assert list(file_paths_in_query(query)) == ["/lake/x", "/etc/x"]


@pytest.mark.parametrize(
    ("written", "roots"),
    [
        (f"/lake/{VALUE_MARK}/orders", ("/lake/",)),
        (f"/lake/staging/{VALUE_MARK}.parquet", ("/lake/staging/",)),
        (f"/lake/orders_{VALUE_MARK}", ("/lake/",)),
        (f"s3://bucket/{VALUE_MARK}", ("s3://bucket/",)),
        ("/lake/orders", ("/lake/orders",)),
        (f"{VALUE_MARK}/orders", ()),
        (f"/{VALUE_MARK}/orders", ()),
        (f"/lake/../{VALUE_MARK}", ()),
        (f"s3://{VALUE_MARK}/lake", ()),
        (f"file:///{VALUE_MARK}", ()),
    ],
)
def test_the_roots_a_dag_writes_are_the_folders_before_its_first_value(written, roots):
    assert WrittenPlaces.of(written, None).roots == roots


def test_table_namespaces_are_the_name_parts_before_the_first_value():
    places = WrittenPlaces.of(f"Shop.{VALUE_MARK}", TableSource(f"`{VALUE_MARK}`.t"))
    assert places.namespaces == (("shop",),)
    query = QuerySource(f"SELECT * FROM crm.customers JOIN {VALUE_MARK} USING (id)")
    assert WrittenPlaces.of(None, query).namespaces == (("crm", "customers"),)


def test_a_table_name_that_reads_files_is_checked_as_a_path():
    written = WrittenPlaces.of("/lake/orders", TableSource(f"shop.{VALUE_MARK}"))
    with pytest.raises(MergeSpecError, match=r"DELTAMERGE_PATH_NOT_ALLOWED.*source path '/etc/passwd'"):
        check_spec_locations(spec(source=TableSource("csv.`/etc/passwd`")), written=written)
    with pytest.raises(MergeSpecError, match="DELTAMERGE_PATH_NOT_ALLOWED"):
        check_spec_locations(spec(source=TableSource("csv.`/etc/passwd`")), allowed_paths=ROOTS)


@pytest.mark.parametrize("path", ["file:///lake/%2e%2e/etc/passwd", "file:/lake/%2E%2E/etc/passwd"])
def test_a_percent_encoded_parent_folder_is_resolved_too(path):
    with pytest.raises(MergeSpecError, match="DELTAMERGE_PATH_NOT_ALLOWED"):
        check_path(path, where="source", allowed_roots=ROOTS)
