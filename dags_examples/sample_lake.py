"""Small sample data for the example DAGs: each example's target table and its staged extract for a day.

The examples' first task, ``sample_data_task``, writes what is missing so that a DAG run on a laptop or in
the docker compose setup has something to merge. It writes only into a local lake folder that is new or
was made by this module (marked by a ``SAMPLE_LAKE`` file), so it never touches real data: drop the task
when you adapt an example. ``make demo`` and the tests run ``prepare`` (this file as a script) to
reset the ``orders`` sample of the upsert, SQL and consumer examples.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from airflow.sdk import XComArg, task
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError

log = logging.getLogger(__name__)

MARKER = "SAMPLE_LAKE"
NUM_ORDERS = 1000


def orders(ids: range, day: datetime.date, amount_factor: float) -> pa.Table:
    return pa.table(
        {
            "order_id": pa.array(list(ids), pa.int64()),
            "customer": pa.array([f"customer-{i % 97}" for i in ids]),
            "amount": pa.array([round(i * amount_factor, 2) for i in ids], pa.float64()),
            "order_date": pa.array([day] * len(ids), pa.date32()),
        }
    )


def customer_changes(rows: list[tuple[int, str, int]], op: str | None = None) -> pa.Table:
    """Customers as ``(customer_id, name, lsn)``; a change feed also has its ``op`` (I, U or D)."""
    columns = {
        "customer_id": pa.array([r[0] for r in rows], pa.int64()),
        "name": pa.array([r[1] for r in rows]),
        "email": pa.array([f"{r[1].split()[0].lower()}{r[0]}@example.com" for r in rows]),
        "lsn": pa.array([r[2] for r in rows], pa.int64()),
    }
    if op is not None:
        columns["op"] = pa.array(list(op))
    return pa.table(columns)


def customer_history(day: datetime.date) -> pa.Table:
    """Customers 1-5, each with one current row since 30 days before ``day``."""
    ids = range(1, 6)
    return pa.table(
        {
            "customer_id": pa.array(list(ids), pa.int64()),
            "address": pa.array([f"{i} Old Street" for i in ids]),
            "is_current": pa.array([True] * len(ids)),
            "valid_from": pa.array([day - datetime.timedelta(days=30)] * len(ids), pa.date32()),
            "valid_to": pa.array([None] * len(ids), pa.date32()),
        }
    )


def address_changes(day: datetime.date) -> pa.Table:
    """Customers 2 and 3 moved on ``day``; customer 4 is listed unchanged; customer 6 is new."""
    changes = {2: "2 New Street", 3: "3 New Street", 4: "4 Old Street", 6: "6 First Street"}
    return pa.table(
        {
            "customer_id": pa.array(list(changes), pa.int64()),
            "address": pa.array(list(changes.values())),
            "effective_date": pa.array([day] * len(changes), pa.date32()),
        }
    )


def clicks(ids: list[int], page: str, delivery: int | None = None) -> pa.Table:
    """Click events; a delivered batch also says which delivery attempt brought each event."""
    columns = {
        "event_id": pa.array(ids, pa.int64()),
        "user_id": pa.array([i % 7 for i in ids], pa.int64()),
        "page": pa.array([page] * len(ids)),
    }
    if delivery is not None:
        columns["delivery"] = pa.array([delivery] * len(ids), pa.int64())
    return pa.table(columns)


def products(prices: dict[int, float]) -> pa.Table:
    return pa.table(
        {
            "product_id": pa.array(list(prices), pa.int64()),
            "name": pa.array([f"product {i}" for i in prices]),
            "price": pa.array(list(prices.values()), pa.float64()),
        }
    )


def events(day: datetime.date, ids: range, value: float) -> pa.Table:
    return pa.table(
        {
            "day": pa.array([day] * len(ids), pa.date32()),
            "event_id": pa.array(list(ids), pa.int64()),
            "value": pa.array([value] * len(ids), pa.float64()),
        }
    )


@dataclass(frozen=True)
class Sample:
    """An example's data as of a logical date: the target table before the merge, and the day's extract."""

    table: Callable[[datetime.date], pa.Table]
    extract: Callable[[datetime.date], pa.Table]
    partition_by: tuple[str, ...] = ()


SAMPLES: dict[str, Sample] = {
    # Upsert: orders 0-999 of the day before; the extract updates 900-999 and adds 1000-1099.
    "orders": Sample(
        table=lambda day: orders(range(NUM_ORDERS), day - datetime.timedelta(days=1), 1.0),
        extract=lambda day: orders(range(NUM_ORDERS - 100, NUM_ORDERS + 100), day, 1.5),
    ),
    # CDC: customers 1-10. The feed changes some keys several times; the highest lsn is the latest change:
    # 2 updated, 3 and 4 deleted, 11 and 12 inserted, 13 inserted and deleted again.
    "customers": Sample(
        table=lambda day: customer_changes([(i, f"Customer {i}", i) for i in range(1, 11)]),
        extract=lambda day: customer_changes(
            [
                (2, "Customer 2", 101),
                (2, "Renamed 2", 102),
                (3, "Customer 3", 103),
                (4, "Renamed 4", 104),
                (4, "Renamed 4", 105),
                (11, "Customer 11", 106),
                (12, "Customer 12", 107),
                (12, "Renamed 12", 108),
                (13, "Customer 13", 109),
                (13, "Customer 13", 110),
            ],
            op="UUDUDIIUID",
        ),
    ),
    # SCD type 2: customers 1-5 with one current row each; 2 and 3 move, 6 is new.
    "customer_history": Sample(table=customer_history, extract=address_changes),
    # Event dedup: events 1-100 already loaded; the batch redelivers 91-100 and brings 101-120, with 101-105
    # delivered twice.
    "clicks": Sample(
        table=lambda day: clicks(list(range(1, 101)), page="/home"),
        extract=lambda day: pa.concat_tables(
            [
                clicks(list(range(91, 121)), page="/redelivered", delivery=1),
                clicks(list(range(101, 106)), page="/redelivered", delivery=2),
            ]
        ),
    ),
    # Full sync: products 1-8; upstream now lists 1-6 (2 and 3 repriced) and a new 9; 7 and 8 are gone.
    "products": Sample(
        table=lambda day: products({i: 10.0 * i for i in range(1, 9)}),
        extract=lambda day: products({1: 10.0, 2: 25.0, 3: 35.0, 4: 40.0, 5: 50.0, 6: 60.0, 9: 90.0}),
    ),
    # Daily partitioned: events 0-49 of the day; the day's extract updates 40-49 and adds 50-59.
    "events": Sample(
        table=lambda day: events(day, range(50), 1.0),
        extract=lambda day: events(day, range(40, 60), 2.0),
        partition_by=("day",),
    ),
}


def extract_path(lake: str | Path, name: str, day: datetime.date) -> Path:
    """Where the examples read the day's extract of a table: ``<lake>/staging/<name>/<day>.parquet``."""
    return Path(lake) / "staging" / name / f"{day}.parquet"


def is_sample_lake(lake: Path) -> bool:
    """A local folder that is empty, missing, or marked as made by this module."""
    return not lake.exists() or (lake / MARKER).exists() or not any(lake.iterdir())


def write_sample(lake: str | Path, name: str, day: datetime.date) -> None:
    """Write the sample table ``name`` and its extract for ``day`` into ``lake``, each only if missing."""
    if "://" in str(lake) or not is_sample_lake(Path(lake)):
        log.info("%s is not a local sample lake; its data is left alone", lake)
        return
    sample, table = SAMPLES[name], Path(lake) / name
    table.mkdir(parents=True, exist_ok=True)
    (Path(lake) / MARKER).touch()
    try:
        write_deltalake(table, sample.table(day), partition_by=list(sample.partition_by), mode="ignore")
    except DeltaError:
        # Runs of several dates started together race to create the table; one creation is enough.
        if not DeltaTable.is_deltatable(str(table)):
            raise
    extract = extract_path(lake, name, day)
    if not extract.exists():
        extract.parent.mkdir(parents=True, exist_ok=True)
        partial = extract.with_suffix(f".{os.getpid()}.tmp")  # a reader never sees half a file
        pq.write_table(sample.extract(day), partial)
        partial.replace(extract)
    log.info("Sample data of %s for %s ready in %s", name, day, lake)


def sample_data_task(lake: str, name: str) -> XComArg:
    """The examples' first task: the sample ``name`` for the run's logical date, in a local sample lake."""

    @task(task_id="sample_data")
    def sample_data(day: str) -> None:
        """Write sample data into a local sample lake that lacks it (local runs; drop it in production)."""
        write_sample(lake, name, datetime.date.fromisoformat(day))

    return sample_data("{{ ds }}")


def prepare(lake: Path, day: datetime.date) -> None:
    """Reset the upsert example's data, orders 0-999 and the day's extract; the rest of the lake stays.

    Asked for by name, so the folder becomes a sample lake even if it holds other data.
    """
    shutil.rmtree(lake / "orders", ignore_errors=True)
    shutil.rmtree(extract_path(lake, "orders", day).parent, ignore_errors=True)
    lake.mkdir(parents=True, exist_ok=True)
    (lake / MARKER).touch()
    write_sample(lake, "orders", day)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("lake", type=Path)
    parser.add_argument("date", type=datetime.date.fromisoformat)
    args = parser.parse_args()
    prepare(args.lake, args.date)
    print(f"Sample lake ready at {args.lake}: orders table, {extract_path(args.lake, 'orders', args.date)}")
