"""Every path of a merge on each object store (an S3 server, Azure's and a GCS emulator), against the same
merge of the same tables on a local disk: tables Delta's runtime made and filled there, our engine merging
into them as users write the path (``s3://``, ``abfs://``, ``gs://``), Delta's runtime reading back what we
wrote.

The local merge is the reference (the differential suite holds it to Delta's own MERGE); on a store the rows,
every metric but the timings, the change data feed and the table's log must come out the same.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from deltalake.fs import DeltaStorageHandler

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.commit import log_cleanup
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.spec import (
    MatchedDelete,
    MergeSpec,
    PathSource,
    QuerySource,
    insert_all,
    update_all,
)
from tests.oracle import sorted_rows
from tests.run_profile import covering, of_the_day

# Spark jobs against the stores' servers: run early in a worker's share, with the other slow tests.
pytestmark = pytest.mark.slow

# (table properties, the merge's clauses, schema evolution, the source: a parquet extract or a Delta table
# read by a catalog-less query)
CASES: dict[str, tuple[str, tuple[Any, ...], bool, str]] = {
    "upsert": ("", (update_all(), insert_all()), False, "parquet"),
    "insert_only": ("", (insert_all(),), False, "parquet"),
    "deletion_vectors": (
        "'delta.enableDeletionVectors' = 'true'",
        (MatchedDelete(condition="s.qty < 0"), update_all(), insert_all()),
        False,
        "parquet",
    ),
    "change_data_feed": (
        "'delta.enableChangeDataFeed' = 'true'",
        (update_all(), insert_all()),
        False,
        "parquet",
    ),
    "schema_evolution": ("", (update_all(), insert_all()), True, "parquet"),
    "delta_query_source": ("", (update_all(), insert_all()), False, "delta"),
}
SOURCE_ROWS = [(1, -1, "us"), (2, 21, "eu"), (7, 70, "us"), (42, 8, "eu"), (43, 9, "us")]


def create_orders(spark, location: str, properties: str) -> None:
    """The orders table made and filled by Delta's runtime at ``location``: two commits, two files."""
    spark.sql(
        f"CREATE TABLE delta.`{location}` (id BIGINT, qty INT, region STRING) USING delta "
        + (f"TBLPROPERTIES ({properties})" if properties else "")
    )
    for rows in ("(0, 0, 'eu'), (1, 10, 'us'), (2, 20, 'eu')", "(5, 50, 'us'), (7, 70, 'us'), (9, 90, 'eu')"):
        spark.sql(f"INSERT INTO delta.`{location}` VALUES {rows}")


def write_source(spark, root: str, kind: str, *, evolve: bool) -> str:
    """The day's source under ``root`` (a folder or a store's URI): a parquet extract written with pyarrow,
    or a Delta table written by Delta's runtime; what the spec names."""
    ids, qtys, regions = zip(*SOURCE_ROWS, strict=True)
    columns = {
        "id": pa.array(ids, pa.int64()),
        "qty": pa.array(qtys, pa.int32()),
        "region": pa.array(regions),
    }
    if evolve:
        columns["channel"] = pa.array(["web", "shop", "web", "app", "app"])
    table = pa.table(columns)
    if kind == "delta":
        location = _spark_uri(f"{root}/staging/day")
        spark.createDataFrame(table.to_pandas()).write.format("delta").save(location)
        return location
    extract = f"{root}/staging/day.parquet"
    if "://" in root:
        # Through deltalake's client, with the store's keys from the environment, as a user's extract job
        # would write it.
        pq.write_table(table, "staging/day.parquet", filesystem=pafs.PyFileSystem(DeltaStorageHandler(root)))
    else:
        Path(extract).parent.mkdir(exist_ok=True)
        pq.write_table(table, extract)
    return extract


def merge_spec(target: str, source: str, kind: str, clauses: tuple[Any, ...], evolve: bool) -> MergeSpec:
    return MergeSpec(
        target=target,
        source=QuerySource(f"SELECT * FROM delta.`{source}`") if kind == "delta" else PathSource(source),
        condition="t.id = s.id",
        clauses=clauses,
        schema_evolution=evolve,
    )


@pytest.fixture
def store_lake(request: pytest.FixtureRequest) -> tuple[Any, str]:
    """The session's SparkSession reaching a store, and a new bucket or container there."""
    store = request.param
    return request.getfixturevalue(f"spark_on_{store}"), request.getfixturevalue(f"{store}_lake")


# Every path and every store in each run; every path on every store in the local profile.
@pytest.mark.parametrize(
    ("store_lake", "case"), covering(["s3", "azure", "gcs"], list(CASES)), indirect=["store_lake"]
)
def test_a_merge_on_a_store_equals_the_same_merge_on_disk(store_lake, tmp_path, case):
    properties, clauses, evolve, source_kind = CASES[case]
    spark, lake = store_lake
    outcomes = {}
    for place, root in (("disk", str(tmp_path)), ("store", lake)):
        # Given: the table as Delta's runtime made it, and the day's source, in this place
        create_orders(spark, _spark_uri(f"{root}/orders"), properties)
        source = write_source(spark, root, source_kind, evolve=evolve)
        # When: our engine merges, the table named as users name it (s3://, abfs://)
        result = run_merge(spark, merge_spec(f"{root}/orders", source, source_kind, clauses, evolve))
        outcomes[place] = result, f"{root}/orders"

    (on_disk, disk_table), (on_store, store_table) = outcomes["disk"], outcomes["store"]
    # Then: the same rows, version, metrics (timings apart) and log actions; Delta's runtime reads it back
    assert on_store.version == on_disk.version == 3
    assert sorted_rows(store_table) == sorted_rows(disk_table)
    timings = {name for name in on_disk.metrics if name.endswith("TimeMs")}
    assert {k: v for k, v in on_store.metrics.items() if k not in timings} == {
        k: v for k, v in on_disk.metrics.items() if k not in timings
    }
    assert on_store.metrics[m.NUM_TARGET_ROWS_INSERTED] == 2
    assert _live_files(store_table) == _live_files(disk_table)
    by_delta = spark.read.format("delta").load(_spark_uri(store_table)).orderBy("id").collect()
    assert [row.asDict() for row in by_delta] == sorted(sorted_rows(disk_table), key=lambda row: row["id"])
    if "ChangeDataFeed" in properties:
        assert _changes(spark, store_table) == _changes(spark, disk_table) != []


# Every store locally; in CI one a day, the others merging every day above (tests/run_profile.py)
@pytest.mark.parametrize("store_lake", of_the_day(["s3", "azure", "gcs"]), indirect=True)
def test_the_log_cleanup_on_a_store_deletes_what_it_deletes_on_disk(store_lake, tmp_path, monkeypatch):
    spark, lake = store_lake
    # Three days on, every log file Delta's runtime wrote is past an hour's retention (files of the last day
    # are never deleted): the store's own modification times decide, as they do for a user's table.
    three_days_on = time.time() + 3 * 86_400
    monkeypatch.setattr(log_cleanup, "time", SimpleNamespace(time=lambda: three_days_on))
    properties = (
        "'delta.checkpointInterval' = '1', 'delta.logRetentionDuration' = 'interval 1 hours', "
        "'delta.deletedFileRetentionDuration' = 'interval 1 hours'"
    )
    logs = {}
    for place, root in (("disk", str(tmp_path)), ("store", lake)):
        create_orders(spark, _spark_uri(f"{root}/orders"), properties)
        source = write_source(spark, root, "parquet", evolve=False)
        spec = merge_spec(f"{root}/orders", source, "parquet", CASES["upsert"][1], False)
        assert run_merge(spark, spec).version == 3
        logs[place] = _log_names(root)
    # Versions 0-2 went with their checkpoints and checksums, the merge's own stayed
    assert logs["store"] == logs["disk"]
    assert {int(name.split(".")[0]) for name in logs["disk"]} == {3}
    assert "00000000000000000003.checkpoint.parquet" in logs["store"]
    by_delta = spark.read.format("delta").load(_spark_uri(f"{lake}/orders")).count()
    assert by_delta == len(sorted_rows(f"{tmp_path}/orders"))


def _log_names(root: str) -> set[str]:
    """The versioned files of a table's ``_delta_log`` folder: commits, checkpoints, checksums (not Hadoop's
    hidden checksums on a disk, nor the folder markers some stores list)."""
    if "://" not in root:
        names = {p.name for p in Path(root, "orders", "_delta_log").iterdir()}
    else:
        listed = pafs.PyFileSystem(DeltaStorageHandler(root)).get_file_info(
            pafs.FileSelector("orders/_delta_log")
        )
        names = {info.base_name for info in listed}
    return {name for name in names if name[0].isdigit()}


def _spark_uri(location: str) -> str:
    """How Delta's runtime is given a path here: ``s3a://`` for S3 (its S3 log store), else as it is."""
    return "s3a://" + location.removeprefix("s3://") if location.startswith("s3://") else location


def _live_files(table: str) -> list[tuple[int, bool]]:
    """Each live file's row count, and whether it has a deletion vector."""
    files = pa.table(DeltaTable(table).get_add_actions(flatten=True)).to_pylist()
    return sorted((f["num_records"], bool(f.get("deletion_vector.storage_type"))) for f in files)


def _changes(spark, table: str) -> list[tuple[Any, ...]]:
    rows = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 3)
        .load(_spark_uri(table))
        .select("id", "qty", "_change_type", "_commit_version")
        .collect()
    )
    return sorted(tuple(row) for row in rows)
