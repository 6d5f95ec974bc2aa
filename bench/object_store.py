"""``python -m bench store``: what a small merge costs on an object store, in requests (counted on the server,
by kind) and time, against ``deltalake``'s own merge of the same source into the same store.

The stores are the tests' (``--store s3``: s3proxy on 127.0.0.1, ``tests/stores/s3_server.py``, logging every
request it serves; ``--store azure``: Azurite behind its listing proxy, which logs them,
``tests/stores/azure_server.py``; ``--store gcs``: fake-gcs-server behind its XML API proxy, which logs them,
``tests/stores/gcs_server.py``). The merge is bench/overhead.py's 60-row upsert into a 1,000-row table, run
by the engine in a local SparkSession set up as a merge job's is for the store (the connector, the
endpoint's settings, the key; ``s3://`` through S3A), and by ``deltalake``'s ``DeltaTable.merge``. Each
contender merges its own copy of the table at several ages (versions in the log, ``delta.checkpointInterval``
10): reading the log costs the last checkpoint and the commits after it, so a merge's requests must not grow
with the table's age. The run fails (exit 1, named in the report) when the engine's requests per merge grow
by more than a few from the youngest table to the oldest, or a merge's counts are wrong.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.fs import DeltaStorageHandler
from pyspark.sql import SparkSession

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.hooks.store_setup import (
    GCS_CONNECTOR_CONF,
    abfs_credential_conf,
    abfs_endpoint_conf,
    gcs_endpoint_conf,
    local_connector_jars,
    s3a_endpoint_conf,
)
from airflow_provider_deltamerge.job.filesystems import prepare_filesystems
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, update_all
from airflow_provider_deltamerge.storage_connectors import AZURE_CONNECTOR, GCS_CONNECTOR, S3_CONNECTOR
from bench.cli import SESSION_CONF
from bench.overhead import SOURCE_IDS, TARGET_ROWS, orders
from bench.result_files import write_result
from bench.store_sales import SCALES
from tests.stores.azure_server import azure_server
from tests.stores.gcs_server import gcs_server
from tests.stores.s3_server import s3_server

CONTENDERS = ("engine", "deltalake")
STORES = {
    "s3": "s3proxy 4.1.0 on 127.0.0.1 (filesystem backend)",
    "azure": "Azurite 3.35.0 on 127.0.0.1 (its Blob service, behind the tests' listing proxy)",
    "gcs": "fake-gcs-server 1.56.1 on 127.0.0.1 (in memory, behind the tests' XML API proxy)",
}
KINDS = ("LIST", "GET", "HEAD", "PUT", "DELETE")
# Versions in the table's log before the measured merges: new, then 25 and 105, whose logs are a checkpoint
# and a tail of 4 commits alike.
AGES = (1, 25, 105)
CHECKPOINT_INTERVAL = "10"
# Requests the engine's merge may add from the younger checkpointed table to the older: none is expected
# (the same tail), a few allowed for the store's listing pages; not one per version.
GROWTH_ALLOWED = 4


@dataclass
class StoreMerge:
    """One merge: its contender, the table's age, the requests it sent by kind and place, its seconds."""

    contender: str
    age: int
    repetition: int
    requests: dict[str, int]  # "LIST log", "PUT data", ...
    seconds: float
    inserted: int
    updated: int


@dataclass
class StoreResult:
    started: str
    engine_version: str
    repetitions: int
    load_average: float
    store: str = "s3"
    merges: list[StoreMerge] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def request_kind(method: str, url: str) -> str:
    """A request as "<kind> <place>": kind LIST, GET, HEAD, PUT (a copy too) or DELETE; place ``log`` for
    the Delta log's files (or a listing of them), ``data`` for everything else."""
    parts = urlsplit(url)
    kind = {"POST": "DELETE"}.get(method, method)  # a POST to a bucket is S3's DeleteObjects
    if method == "POST" and (
        parts.path.startswith("/upload/") or "/rewriteTo/" in parts.path or "upload" in parts.query
    ):
        kind = "PUT"  # GCS: a JSON API upload or copy, or a part of an XML multipart upload
    listing = "list-type=" in parts.query or "comp=list" in parts.query or parts.path.endswith("/o")
    if method == "GET" and listing:  # S3's and GCS's XML listing, Azure's, GCS's JSON one
        kind = "LIST"
    # object_store percent-encodes a GCS object's name whole ("%5Fdelta%5Flog").
    place = "log" if "_delta_log" in unquote(parts.path) or "_delta_log" in unquote(parts.query) else "data"
    return f"{kind} {place}"


def measure_store(
    repetitions: int,
    work: Path,
    progress: Callable[[str], None],
    ages: Sequence[int] = AGES,
    store: str = "s3",
) -> StoreResult:
    """Merge the upsert ``repetitions`` times per contender and age, alternating contenders."""
    work.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = StoreResult(started, __version__, repetitions, os.getloadavg()[0], store)
    with store_server(store, work / f"{store}-{started.replace(':', '')}") as (server, lake):
        os.environ.update(server.environment())
        spark = store_session(server, store)
        try:
            staging = pafs.PyFileSystem(DeltaStorageHandler(lake))
            pq.write_table(orders(SOURCE_IDS, 2.0), "source.parquet", filesystem=staging)
            for age in ages:
                tables = {c: _aged_table(f"{lake}/{c}-{age}", age) for c in CONTENDERS}
                for repetition in range(repetitions):
                    order = CONTENDERS if repetition % 2 == 0 else CONTENDERS[::-1]
                    for contender in order:
                        merge = StoreMerge(
                            contender,
                            age,
                            repetition,
                            *_merge(spark, server, contender, tables[contender], f"{lake}/source.parquet"),
                        )
                        result.merges.append(merge)
                        progress(
                            f"{contender} at age {age}, run {repetition + 1}/{repetitions}: "
                            f"{sum(merge.requests.values())} requests, {merge.seconds:.2f} s"
                        )
        finally:
            spark.stop()
    result.failures = failures(result)
    return result


@contextmanager
def store_server(store: str, folder: Path) -> Iterator[tuple[Any, str]]:
    """The store's server, logging its requests, and the URI of a new bucket or container on it."""
    if store == "s3":
        with s3_server(folder, log_requests=True) as s3:
            yield s3, s3.create_bucket("bench")
        return
    folder.mkdir(parents=True)
    if store == "gcs":
        with gcs_server(folder, log_requests=True) as gcs:
            yield gcs, gcs.create_bucket("bench")
    else:
        with azure_server(folder, log_requests=True) as azure:
            yield azure, azure.create_container("bench")


def store_session(server: Any, store: str) -> SparkSession:
    """A local session as a merge job's on ``local[*]`` is for the store, the keys in its Hadoop
    configuration (its JVM reads no environment set after it started)."""
    environment = server.environment()
    if store == "s3":
        connector = S3_CONNECTOR
        conf = {
            **s3a_endpoint_conf(environment),
            "spark.hadoop.fs.s3a.access.key": server.key_pair[0],
            "spark.hadoop.fs.s3a.secret.key": server.key_pair[1],
        }
    elif store == "gcs":
        connector = GCS_CONNECTOR
        conf = {**GCS_CONNECTOR_CONF, **gcs_endpoint_conf(environment)}
    else:
        connector = AZURE_CONNECTOR
        account = f"abfs://bench@{server.account}.dfs.core.windows.net"
        conf = {**abfs_endpoint_conf(environment), **abfs_credential_conf([account], environment)}
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("deltamerge-bench-store")
        .config(map={**SESSION_CONF, "spark.driver.memory": "4g"})
        .config("spark.jars", ",".join(local_connector_jars(connector, announce=print)))
        .config(map=conf)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    prepare_filesystems(spark, ["s3://bench"] if store == "s3" else [])
    return spark


def _aged_table(location: str, age: int) -> str:
    """The 1,000-row table with ``age`` versions: the rows, then one-row appends of rows the merge leaves."""
    write_deltalake(
        location,
        orders(range(TARGET_ROWS), 1.0),
        configuration={"delta.checkpointInterval": CHECKPOINT_INTERVAL},
    )
    for version in range(1, age):
        write_deltalake(location, orders(range(100_000 + version, 100_001 + version), 1.0), mode="append")
    if age > int(CHECKPOINT_INTERVAL):
        # As Delta's writers leave such a table: a checkpoint at the last multiple of the interval.
        checkpointed = (age - 1) // int(CHECKPOINT_INTERVAL) * int(CHECKPOINT_INTERVAL)
        DeltaTable(location, version=checkpointed).create_checkpoint()
    return location


def _merge(
    spark: SparkSession, server: Any, contender: str, table: str, source: str
) -> tuple[dict[str, int], float, int, int]:
    """Merge the upsert into ``table`` once: the requests the server served meanwhile by kind and place, the
    seconds, the rows inserted and updated."""
    before = len(server.requests())
    start = time.monotonic()
    if contender == "engine":
        spec = MergeSpec(
            target=table,
            source=PathSource(source),
            condition="t.order_id = s.order_id",
            clauses=(update_all(), insert_all()),
        )
        metrics = run_merge(spark, spec).metrics
        inserted, updated = (
            int(metrics["numTargetRowsInserted"] or 0),
            int(metrics["numTargetRowsUpdated"] or 0),
        )
    else:
        outcome = (
            DeltaTable(table)
            .merge(
                read_on_store(source), predicate="t.order_id = s.order_id", source_alias="s", target_alias="t"
            )
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        inserted, updated = outcome["num_target_rows_inserted"], outcome["num_target_rows_updated"]
    seconds = time.monotonic() - start
    served = server.requests()[before:]
    return dict(Counter(request_kind(m, u) for m, u in served)), seconds, inserted, updated


def read_on_store(location: str) -> Any:
    """The parquet file at ``location`` on the store, read through ``deltalake``'s client with the
    environment's keys (pyarrow's own Azure client signs in with Azure's default credential chain)."""
    folder, name = location.rsplit("/", 1)
    return pq.read_table(name, filesystem=pafs.PyFileSystem(DeltaStorageHandler(folder)))


def failures(result: StoreResult) -> list[str]:
    """What makes the run fail: wrong counts, or the engine's requests growing with the table's age."""
    failures = [
        f"{m.contender} at age {m.age}: {m.inserted} inserted and {m.updated} updated, not 10 and 50"
        for m in result.merges
        if (m.inserted, m.updated) != (10, 50) and m.repetition == 0
    ]
    # Tables past their first checkpoint, whose logs are read as the checkpoint and a tail of the same length
    # (25 and 105: versions 21-24 and 101-104): their merges must cost the same requests, whatever the age.
    per_age = {
        age: statistics.median(
            sum(m.requests.values()) for m in result.merges if (m.contender, m.age) == ("engine", age)
        )
        for age in sorted({m.age for m in result.merges if m.age > int(CHECKPOINT_INTERVAL)})
    }
    if per_age and max(per_age.values()) - min(per_age.values()) > GROWTH_ALLOWED:
        failures.append(f"the engine's requests per merge grow with the table's age: {per_age}")
    return failures


def store_markdown(result: StoreResult) -> str:
    lines = [
        f"# Object store: a small merge's requests and time ({result.started})",
        "",
        f"Engine {result.engine_version}; {STORES[result.store]}; the 60-row upsert "
        f"into a {TARGET_ROWS:,}-row table; {result.repetitions} merges per contender and age, alternating; "
        f"`delta.checkpointInterval` {CHECKPOINT_INTERVAL}; load average at the start "
        f"{result.load_average:.2f}.",
        "Requests are counted on the server, by kind and place (`log`: the Delta log's files and listings; "
        "`data`: the rest, S3's DeleteObjects too, whose keys are in its body; PUT counts copies too, as "
        "S3A's renames are copies, and each of Azure's block and block-list puts). Medians per merge.",
        "",
        "| age (versions) | contender | "
        + " | ".join(f"{k} log | {k} data" for k in KINDS)
        + " | all | seconds |",
        "|---|---|" + "---|" * (2 * len(KINDS) + 2),
    ]
    for age in sorted({m.age for m in result.merges}):
        for contender in CONTENDERS:
            merges = [m for m in result.merges if (m.contender, m.age) == (contender, age)]
            if not merges:
                continue
            cells = [
                f"{statistics.median(m.requests.get(f'{k} {place}', 0) for m in merges):g}"
                for k in KINDS
                for place in ("log", "data")
            ]
            total = statistics.median(sum(m.requests.values()) for m in merges)
            seconds = statistics.median(m.seconds for m in merges)
            lines.append(f"| {age} | {contender} | " + " | ".join(cells) + f" | {total:g} | {seconds:.2f} |")
    lines += ["", "## Checks", ""]
    lines += [f"- FAILED: {f}" for f in result.failures] or [
        "- every merge's counts right; the engine's requests do not grow with the table's age"
    ]
    return "\n".join(lines) + "\n"


def store_main(argv: Sequence[str], *, work: Path, data_dir: Path, results_dir: Path) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench store", description=__doc__)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--ages", default=",".join(map(str, AGES)), help="comma-separated versions")
    parser.add_argument("--store", choices=sorted(STORES), default="s3")
    parser.add_argument(
        "--cases",
        choices=("upsert", "delta"),
        default="upsert",
        help="upsert: the 60-row upsert at each age; delta: Delta's 16 cases (bench/store_cases.py)",
    )
    parser.add_argument("--scale", choices=sorted(SCALES), default="S", help="of Delta's cases")
    args = parser.parse_args(argv)
    if args.cases == "delta":
        from bench.store_cases import measure_store_cases, store_cases_markdown

        cases = measure_store_cases(
            args.store,
            SCALES[args.scale],
            args.repetitions,
            work,
            data_dir,
            lambda line: print(line, flush=True),
        )
        return _finish(f"store-{args.store}-cases", cases, store_cases_markdown(cases), results_dir)
    ages = [int(a) for a in args.ages.split(",") if a]
    result = measure_store(args.repetitions, work, lambda line: print(line, flush=True), ages, args.store)
    name = "store" if args.store == "s3" else f"store-{args.store}"
    return _finish(name, result, store_markdown(result), results_dir)


def _finish(name: str, result: Any, markdown: str, results_dir: Path) -> int:
    """Write the report; exit status 1 when the run failed a check."""
    print(f"Report: {write_result(name, result, markdown, results_dir)}")
    for failure in result.failures:
        print(f"FAILED: {failure}")
    return 1 if result.failures else 0
