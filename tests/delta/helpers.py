"""Helpers for the storage tests: hand-made Delta logs for table features deltalake cannot create, and
the differential pattern against Delta's runtime: our merge of a statement on a Delta-made table, Delta's own
MERGE of it on an identical copy, then the two compared (``assert_merges_agree``)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import obstore
import pyarrow as pa
from delta.tables import DeltaTable as DeltaSparkTable
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.commit.log_store import object_store
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.merge import MergeResult
from airflow_provider_deltamerge.spec import parse_merge_sql
from tests.oracle import sorted_rows

UPSERT = (
    "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id "
    "WHEN MATCHED AND s.qty < 0 THEN DELETE "
    "WHEN MATCHED THEN UPDATE SET * "
    "WHEN NOT MATCHED THEN INSERT *"
)
# An upsert of every source row by key, nothing else.
PLAIN_UPSERT = (
    "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
)
# One statement per executor, each with the executor that must run it.
STATEMENTS = {
    "classic": UPSERT,
    "insert_only": (
        "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id "
        "WHEN NOT MATCHED THEN INSERT *"
    ),
    "matched_only": (
        "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET *"
    ),
}
# Delta's own next merge: updates 1 (a row our merge copied or left alone) and 7 (one it inserted).
NEXT = (
    "MERGE INTO delta.`{target}` AS t USING (SELECT * FROM VALUES (1L, 100), (7L, 700), (8L, 800) "
    "AS v(id, qty)) AS s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET t.qty = s.qty "
    "WHEN NOT MATCHED THEN INSERT (id, qty) VALUES (s.id, s.qty)"
)
CHANGES = (
    m.NUM_SOURCE_ROWS,
    m.NUM_TARGET_ROWS_INSERTED,
    m.NUM_TARGET_ROWS_UPDATED,
    m.NUM_TARGET_ROWS_DELETED,
)

FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "qty", "type": "integer", "nullable": True, "metadata": {}},
]


def craft_table(
    path: Path,
    *,
    reader: int = 1,
    writer: int = 2,
    reader_features: Sequence[str] | None = None,
    writer_features: Sequence[str] | None = None,
    configuration: Mapping[str, str] | None = None,
    fields: Sequence[Mapping[str, Any]] = FIELDS,
) -> str:
    """An empty Delta table whose first commit declares exactly the given protocol, properties and schema."""
    log = path / "_delta_log"
    log.mkdir(parents=True)
    protocol: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    if reader_features is not None:
        protocol["readerFeatures"] = list(reader_features)
    if writer_features is not None:
        protocol["writerFeatures"] = list(writer_features)
    metadata = {
        "id": "00000000-0000-0000-0000-000000000000",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": list(fields)}),
        "partitionColumns": [],
        "configuration": dict(configuration or {}),
        "createdTime": 0,
    }
    commit = [
        {"commitInfo": {"timestamp": 0, "operation": "CREATE TABLE"}},
        {"protocol": protocol},
        {"metaData": metadata},
    ]
    (log / "00000000000000000000.json").write_text("\n".join(json.dumps(a) for a in commit) + "\n")
    return str(path)


def files_on_disk_match_log(table: str) -> bool:
    """No data file in the table's folder (on a disk or a store) that the log does not reference (no litter
    of a failed merge)."""
    store = object_store(table)
    on_disk = {
        entry["path"]
        for batch in obstore.list(store)
        for entry in batch
        if entry["path"].endswith(".parquet") and not entry["path"].startswith("_delta_log/")
    }
    in_log = pa.table(DeltaTable(table).get_add_actions(flatten=True))["path"].to_pylist()
    return on_disk == {unquote(p) for p in in_log}


def version_and_files(table: str) -> tuple[int, list[str]]:
    """The table's newest version and every file under it: what a refused merge must leave as it was."""
    return LogReader(table).latest_version(), sorted(str(p) for p in Path(table).rglob("*") if p.is_file())


def copy_of(table: str, name: str) -> str:
    """An identical copy of ``table`` beside it, for Delta's own run of a statement."""
    copy = str(Path(table).parent / name)
    shutil.copytree(table, copy)
    return copy


def ours(spark: SparkSession, statement: str, target: str, source_path: str = "") -> MergeResult:
    """Our engine's run of ``statement`` as a user's task runs it: the text parsed into a spec, merged."""
    return run_merge(spark, parse_merge_sql(statement.format(target=target, source=source_path)))


def delta_merge(spark: SparkSession, statement: str, target: str, source_path: str = "") -> None:
    spark.sql(statement.format(target=target, source=source_path)).collect()


def delta_rows(spark: SparkSession, table: str) -> list[dict[str, Any]]:
    """The table's rows as Delta's reader reads them, in ``sorted_rows``'s order."""
    rows = [row.asDict(recursive=True) for row in spark.read.format("delta").load(table).collect()]
    return sorted(rows, key=lambda row: [(v is None, str(v)) for v in row.values()])


def last_history(spark: SparkSession, table: str) -> dict[str, Any]:
    return DeltaSparkTable.forPath(spark, table).history(1).collect()[0].asDict()


def log_actions(table: str, version: int, kind: str) -> list[dict[str, Any]]:
    text = (Path(table) / "_delta_log" / f"{version:020d}.json").read_text()
    return [a[kind] for a in map(json.loads, text.splitlines()) if kind in a]


@dataclass(frozen=True)
class Agreement:
    """What ``assert_merges_agree`` found equal: our result, Delta's copy, and the rows both hold."""

    result: MergeResult
    theirs: str
    rows: list[dict[str, Any]]


def assert_merges_agree(
    spark: SparkSession,
    target: str,
    statement: str,
    src: str = "",
    *,
    executor: str | None = None,
    version: int | None = None,
    deltalake_reads: bool = True,
) -> Agreement:
    """Our merge of ``statement`` into ``target`` and Delta's own on a copy made before: Delta (and deltalake,
    unless ``deltalake_reads`` is off: it refuses some reader features) read the same rows from both, and
    the counts are Delta's; with ``executor`` and ``version``, ours ran on that executor and committed that
    version."""
    theirs = copy_of(target, "theirs")
    result = ours(spark, statement, target, src)
    delta_merge(spark, statement, theirs, src)
    if executor is not None:
        assert result.executor == executor
    if version is not None:
        assert result.version == version
    rows = delta_rows(spark, target)
    assert rows == delta_rows(spark, theirs)
    assert not deltalake_reads or rows == sorted_rows(target)
    delta_metrics = last_history(spark, theirs)["operationMetrics"]
    assert {k: result.metrics[k] for k in CHANGES} == {k: int(delta_metrics[k]) for k in CHANGES}
    return Agreement(result, theirs, rows)


def assert_next_merges_agree(
    spark: SparkSession, target: str, theirs: str, statement: str = NEXT, *, deltalake_reads: bool = True
) -> None:
    """Delta's own next merge works on our table and gives what it gives on its own copy (and deltalake
    reads those rows, unless ``deltalake_reads`` is off)."""
    delta_merge(spark, statement, target)
    delta_merge(spark, statement, theirs)
    rows = delta_rows(spark, target)
    assert rows == delta_rows(spark, theirs)
    assert not deltalake_reads or rows == sorted_rows(target)


def age_log(table: Path, ages: Sequence[float], now: float) -> None:
    """Set each log file's modification time ``ages`` hours before ``now``: version v's the v-th age, the
    later versions' the last. A run that crosses a cutoff's midnight between Delta's merge and ours (a few
    seconds a day) could see one file on either side of it."""
    log = table / "_delta_log"
    for path in [*log.iterdir(), *log.glob("_sidecars/*")]:  # a sidecar's name starts with its version too
        if path.name[:20].isdigit():
            moment = now - ages[min(int(path.name[:20]), len(ages) - 1)] * 3600
            os.utime(path, (moment, moment))
