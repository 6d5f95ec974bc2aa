"""A synthetic TPC-DS ``store_sales`` fact table, written as Delta tables with ``deltalake`` (no Spark).

Columns and types are those of Spark's TPC-DS schema. The key (``ss_ticket_number``, ``ss_item_sk``) is
unique, ten items per ticket; ticket numbers and sale dates grow with the row number, so files written in
order hold growing ticket ranges, as in an append-only fact table. The same rows are written twice: as
the flat target of the Delta benchmark's cases, and partitioned by ``ss_sold_date_sk`` (100 days) for the
backfill case.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake

from tests.delta.dv_tables import enable_deletion_vectors

KEY_COLUMNS = ("ss_ticket_number", "ss_item_sk")
DATE_COLUMN = "ss_sold_date_sk"
ITEMS_PER_TICKET = 10
NUM_ITEMS = 18_000  # as in TPC-DS at scale factor 1
NUM_DAYS = 100
FIRST_DATE_SK = 2_451_545  # 2000-01-01 as a TPC-DS date_dim key
BATCH_ROWS = 8_192
# Parquet bytes per generated row (measured: 80.6 MB for 1M rows); sizes the flat table's files.
BYTES_PER_ROW = 80

_INT_COLUMNS = (
    "ss_sold_date_sk",
    "ss_sold_time_sk",
    "ss_item_sk",
    "ss_customer_sk",
    "ss_cdemo_sk",
    "ss_hdemo_sk",
    "ss_addr_sk",
    "ss_store_sk",
    "ss_promo_sk",
    "ss_ticket_number",
    "ss_quantity",
)
_MONEY_COLUMNS = (
    "ss_wholesale_cost",
    "ss_list_price",
    "ss_sales_price",
    "ss_ext_discount_amt",
    "ss_ext_sales_price",
    "ss_ext_wholesale_cost",
    "ss_ext_list_price",
    "ss_ext_tax",
    "ss_coupon_amt",
    "ss_net_paid",
    "ss_net_paid_inc_tax",
    "ss_net_profit",
)
MONEY = pa.decimal128(7, 2)
SCHEMA = pa.schema(
    [pa.field(c, pa.int32(), nullable=c not in KEY_COLUMNS) for c in _INT_COLUMNS]
    + [pa.field(c, MONEY) for c in _MONEY_COLUMNS]
)


@dataclass(frozen=True)
class Scale:
    """A table size: rows, and the file size both the generator and every writer aim at.

    Files are smaller than Delta's 128 MiB default so that 5% of the files (the Delta benchmark's usual
    ``fileMatchedFraction``) is at least one file at every scale.
    """

    name: str
    rows: int
    target_file_size: int


MIB = 1024 * 1024
SCALES = {
    "S": Scale("S", 1_000_000, 4 * MIB),
    "M": Scale("M", 10_000_000, 16 * MIB),
    "L": Scale("L", 100_000_000, 64 * MIB),
}


@dataclass(frozen=True)
class TargetTables:
    """Where the generated tables of one scale live (read-only: runs work on copies)."""

    flat: str
    by_date: str
    flat_with_deletion_vectors: str  # ``flat``'s files, with delta.enableDeletionVectors=true


def write_tables(scale: Scale, folder: Path) -> TargetTables:
    """Write the flat and the date-partitioned target of ``scale`` under ``folder``, unless already there."""
    tables = TargetTables(
        flat=str(folder / "store_sales"),
        by_date=str(folder / "store_sales_by_date"),
        flat_with_deletion_vectors=str(folder / "store_sales_deletion_vectors"),
    )
    configuration = {"delta.targetFileSize": str(scale.target_file_size)}
    if not (Path(tables.flat) / "_delta_log").is_dir():
        # One append per file: delta-rs spreads one write's batches over parallel writers, which would
        # interleave ticket ranges across files.
        rows_per_file = scale.target_file_size // BYTES_PER_ROW
        for first in range(0, scale.rows, rows_per_file):
            write_deltalake(
                tables.flat,
                _reader(first, min(scale.rows, first + rows_per_file), total_rows=scale.rows),
                mode="append",
                configuration=configuration,
                target_file_size=2 * scale.target_file_size,
            )
    if not (Path(tables.by_date) / "_delta_log").is_dir():
        write_deltalake(
            tables.by_date,
            _reader(0, scale.rows, total_rows=scale.rows),
            partition_by=[DATE_COLUMN],
            configuration=configuration,
            target_file_size=scale.target_file_size,
        )
    if not (Path(tables.flat_with_deletion_vectors) / "_delta_log").is_dir():
        shutil.copytree(tables.flat, tables.flat_with_deletion_vectors)
        enable_deletion_vectors(tables.flat_with_deletion_vectors)
    return tables


def _reader(start: int, stop: int, *, total_rows: int) -> pa.RecordBatchReader:
    """Rows ``start`` .. ``stop - 1`` of a table of ``total_rows`` rows, in ticket order, as a stream."""
    batches = (
        store_sales_batch(first, min(BATCH_ROWS, stop - first), total_rows=total_rows)
        for first in range(start, stop, BATCH_ROWS)
    )
    return pa.RecordBatchReader.from_batches(SCHEMA, batches)


def store_sales_batch(first_row: int, count: int, *, total_rows: int) -> pa.RecordBatch:
    """Rows ``first_row`` .. ``first_row + count - 1`` of a table of ``total_rows`` rows."""
    rng = np.random.default_rng(first_row)
    row = np.arange(first_row, first_row + count, dtype=np.int64)
    ticket = row // ITEMS_PER_TICKET + 1
    tickets = total_rows // ITEMS_PER_TICKET + 1
    # Ten distinct items per ticket: one from each tenth of the item range, shifted by the ticket.
    item = (
        (row % ITEMS_PER_TICKET) * (NUM_ITEMS // ITEMS_PER_TICKET)
        + ticket % (NUM_ITEMS // ITEMS_PER_TICKET)
        + 1
    )
    quantity = rng.integers(1, 101, count)
    wholesale = rng.integers(100, 10_001, count)  # cents
    list_price = wholesale * rng.integers(100, 301, count) // 100
    sales_price = list_price * rng.integers(0, 101, count) // 100
    ext_sales = sales_price * quantity
    ext_list = list_price * quantity
    ext_wholesale = wholesale * quantity
    coupon = np.where(rng.random(count) < 0.2, ext_sales * rng.integers(0, 51, count) // 100, 0)
    net_paid = ext_sales - coupon
    tax = net_paid * rng.integers(0, 10, count) // 100
    ints = {
        "ss_sold_date_sk": FIRST_DATE_SK + ticket * NUM_DAYS // tickets,
        "ss_sold_time_sk": rng.integers(28_800, 75_601, count),
        "ss_item_sk": item,
        "ss_customer_sk": rng.integers(1, 100_001, count),
        "ss_cdemo_sk": rng.integers(1, 1_920_801, count),
        "ss_hdemo_sk": rng.integers(1, 7_201, count),
        "ss_addr_sk": rng.integers(1, 50_001, count),
        "ss_store_sk": rng.integers(1, 7, count) * 2 - 1,
        "ss_promo_sk": rng.integers(1, 301, count),
        "ss_ticket_number": ticket,
        "ss_quantity": quantity,
    }
    cents = {
        "ss_wholesale_cost": wholesale,
        "ss_list_price": list_price,
        "ss_sales_price": sales_price,
        "ss_ext_discount_amt": ext_list - ext_sales,
        "ss_ext_sales_price": ext_sales,
        "ss_ext_wholesale_cost": ext_wholesale,
        "ss_ext_list_price": ext_list,
        "ss_ext_tax": tax,
        "ss_coupon_amt": coupon,
        "ss_net_paid": net_paid,
        "ss_net_paid_inc_tax": net_paid + tax,
        "ss_net_profit": net_paid - ext_wholesale,
    }
    arrays = [pa.array(ints[c].astype(np.int32)) for c in _INT_COLUMNS]
    arrays += [money(cents[c]) for c in _MONEY_COLUMNS]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def money(cents: np.ndarray) -> pa.Array:
    """DECIMAL(7,2) values from whole cents, built from the 128-bit unscaled integers directly."""
    unscaled = np.empty((len(cents), 2), dtype=np.int64)
    unscaled[:, 0] = cents
    unscaled[:, 1] = cents >> 63  # the sign extension of the high word
    return pa.Array.from_buffers(MONEY, len(cents), [None, pa.py_buffer(unscaled.tobytes())])
