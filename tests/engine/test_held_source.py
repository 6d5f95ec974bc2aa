"""A small file source held in the plan (engine/source/held.py): read once, merged as a checkpointed source
would be, and left to the checkpoint when it is larger, a query, or of a type Arrow does not carry."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.source import held as held_source
from airflow_provider_deltamerge.metrics import MetricsRecorder
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, QuerySource, insert_all, update_all
from bench.spark_work import last_execution_id
from tests.engine.conftest import executed_plans

HELD = "rows held in the plan, read once"
UTC = datetime.UTC
# Columns of every kind the held source carries, with values at their edges: a timestamp in a time zone's
# gap and one before 1900, a 38-digit decimal, nested maps of structs, NULLs inside and out.
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("tiny", pa.int8()),
        ("small", pa.int16()),
        ("f", pa.float32()),
        ("d", pa.float64()),
        ("amount", pa.decimal128(38, 2)),
        ("name", pa.string()),
        ("payload", pa.binary()),
        ("ok", pa.bool_()),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("local", pa.timestamp("us")),
        ("tags", pa.list_(pa.int32())),
        ("attrs", pa.map_(pa.string(), pa.int64())),
        ("nested", pa.struct([("a", pa.int32()), ("b", pa.struct([("c", pa.string())]))])),
        ("deep", pa.map_(pa.int32(), pa.list_(pa.struct([("q", pa.timestamp("us", tz="UTC"))])))),
    ]
)


def row(n: int) -> dict[str, object]:
    return {
        "id": n,
        "tiny": -n,
        "small": n * 100,
        "f": n + 0.5,
        "d": -1e300 * n,
        "amount": decimal.Decimal("123456789012345678901234567890123456.78") if n % 2 else None,
        "name": f"name-{n}-é",
        "payload": bytes([n, 0, 255]),
        "ok": n % 2 == 0,
        "day": datetime.date(1900 + n, 3, 8),
        "at": datetime.datetime(2026, 3, 8, 10, 30, n, tzinfo=UTC),
        "local": datetime.datetime(2026, 3, 8, 2, 30, n),
        "tags": [n, None],
        "attrs": [("k", n)],
        "nested": {"a": n, "b": {"c": None if n % 3 else "z"}},
        "deep": [(n, [{"q": datetime.datetime(1899, 12, 31, 23, 59, tzinfo=UTC)}])],
    }


def tables(tmp_path: Path, name: str, source: pa.Table) -> tuple[str, str]:
    """A target of ids 0-3 (two files) and a parquet source file; both paths."""
    target = str(tmp_path / name)
    for ids in ((0, 1), (2, 3)):
        write_deltalake(target, pa.Table.from_pylist([row(n) for n in ids], schema=SCHEMA), mode="append")
    path = tmp_path / f"{name}.parquet"
    pq.write_table(source, path)
    return target, str(path)


def merged(table: str) -> pa.Table:
    return DeltaTable(table).to_pyarrow_table().sort_by("id")


def test_a_small_file_source_is_read_once_and_merges_as_a_checkpointed_one(
    spark, tmp_path, monkeypatch, caplog
):
    # Given: an upsert of ids 1 (changed) and 4-5 (new), every column kind, into two copies of a table
    source = pa.Table.from_pylist([{**row(1), "name": "changed"}, row(4), row(5)], schema=SCHEMA)
    held_target, path = tables(tmp_path, "held", source)
    checkpointed_target = str(tmp_path / "checkpointed")
    shutil.copytree(held_target, checkpointed_target)
    spec = MergeSpec(held_target, PathSource(path), "t.id = s.id", (update_all(), insert_all()))
    # When: merged with the source held, then with it checkpointed (a limit below its rows)
    since = last_execution_id(spark)
    with caplog.at_level(logging.INFO, logger="airflow_provider_deltamerge"):
        held = run_merge(spark, spec)
    source_reads = [p for p in executed_plans(spark, since) if f"{tmp_path}/held.parquet" in p]
    monkeypatch.setattr(held_source, "HELD_ROWS", 2)
    checkpointed = run_merge(spark, dataclasses.replace(spec, target=checkpointed_target))
    # Then: the held source was read by one query; both merges leave the same table and the same counts
    assert HELD in caplog.text
    assert len(source_reads) == 1, source_reads
    assert merged(held_target).equals(merged(checkpointed_target))
    assert merged(held_target).num_rows == 6
    counts = [k for k in held.metrics if k.startswith("num")]
    assert {k: held.metrics[k] for k in counts} == {k: checkpointed.metrics[k] for k in counts}
    assert held.metrics[m.NUM_SOURCE_ROWS] == 3 and held.metrics[m.NUM_TARGET_ROWS_UPDATED] == 1


@pytest.mark.parametrize("way", ["more-rows-than-held", "more-bytes-than-held", "query", "deduplicated"])
def test_other_sources_are_checkpointed(spark, tmp_path, monkeypatch, caplog, way):
    # Given: a source of three rows the merge does not hold: too many for the limit, larger than Spark's
    # estimate may be, a query (which may shuffle before its first row), or de-duplicated by key (a shuffle)
    source = pa.Table.from_pylist([row(1), row(4), row(5)], schema=SCHEMA)
    target, path = tables(tmp_path, "t", source)
    spec = MergeSpec(target, PathSource(path), "t.id = s.id", (update_all(), insert_all()))
    if way == "more-rows-than-held":
        monkeypatch.setattr(held_source, "HELD_ROWS", 2)
    elif way == "more-bytes-than-held":
        monkeypatch.setattr(held_source, "HELD_BYTES", Path(path).stat().st_size - 1)
    elif way == "query":
        spec = dataclasses.replace(spec, source=QuerySource(f"SELECT * FROM parquet.`{path}`"))
    else:
        spec = dataclasses.replace(spec, deduplicate_source_by=("id",), deduplicate_order_by=("small",))
    # When
    with caplog.at_level(logging.INFO, logger="airflow_provider_deltamerge"):
        result = run_merge(spark, spec)
    # Then: materialized as a checkpoint (Delta's reason logged), and merged
    assert HELD not in caplog.text
    assert "Source materialized (materializeNonDeterministicSourceNonDelta)" in caplog.text
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 2


@pytest.mark.parametrize(
    "select",
    ["parse_json('{\"a\": 1}') AS v", "'x' COLLATE UTF8_LCASE AS v"],
    ids=["variant", "collated-string"],
)
def test_a_type_arrow_may_not_carry_is_not_held(spark, tmp_path, select):
    # Given: a file source's rows with a variant or a collated string
    spec = MergeSpec(
        str(tmp_path / "t"), PathSource(str(tmp_path / "s.parquet")), "t.id = s.id", (insert_all(),)
    )
    rows = spark.sql(f"SELECT 1L AS id, {select}")
    # When / Then: not held, nothing read
    since = last_execution_id(spark)
    assert held_source.hold_small_source(spark, spec, rows, MetricsRecorder(), reason="test") is None
    assert last_execution_id(spark) == since


def test_spark_estimates_a_file_source_at_its_files_size(spark, tmp_path):
    # Given: a source of two parquet files
    folder = tmp_path / "source"
    folder.mkdir()
    for n in (1, 2):
        pq.write_table(pa.Table.from_pylist([row(n)] * n, schema=SCHEMA), folder / f"part-{n}.parquet")
    # When / Then: the estimate the held source is gated on is the files' bytes
    sizes = sum(f.stat().st_size for f in folder.iterdir())
    assert held_source.estimated_bytes(spark.read.parquet(str(folder))) == sizes
