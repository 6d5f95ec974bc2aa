"""Write the demo's sample lake: an ``orders`` Delta table and one staged parquet extract for a date."""

from __future__ import annotations

import argparse
import datetime
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake

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


def prepare(lake: Path, day: datetime.date) -> None:
    """A fresh target with orders 0..999 and an extract updating 900..999 and adding 1000..1099."""
    shutil.rmtree(lake, ignore_errors=True)
    write_deltalake(str(lake / "orders"), orders(range(NUM_ORDERS), day - datetime.timedelta(days=1), 1.0))
    staging = lake / "staging" / "orders"
    staging.mkdir(parents=True)
    pq.write_table(orders(range(NUM_ORDERS - 100, NUM_ORDERS + 100), day, 1.5), staging / f"{day}.parquet")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("lake", type=Path)
    parser.add_argument("date", type=datetime.date.fromisoformat)
    args = parser.parse_args()
    prepare(args.lake, args.date)
    print(f"Sample lake ready at {args.lake} (orders table and staging/orders/{args.date}.parquet)")
