"""Generated merges into tables with deletion vectors, against deltalake merging the same visible rows.

Delta's reader requirement makes a table with deletion vectors the same table as one holding only its
visible rows (PROTOCOL.md "Reader Requirements for Deletion Vectors"). So each case draws the differential
suite's tables and merges, hides a random set of rows behind vectors (inline and in files), and checks that
our merge into it ends with the rows and counts deltalake's merge gives on a plain table of the visible
rows. Half the cases have the table property on, so the merge writes vectors itself. Every table read is
deltalake's own scan, which decodes the vectors with its own reader.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.delta.dv_tables import data_file, data_file_paths, delete_rows, enable_deletion_vectors
from tests.engine.conftest import ENGINE_SETTINGS
from tests.engine.test_differential import (
    SCHEMA,
    as_table,
    assert_merges_agree,
    has_matching_duplicates,
    merges,
)
from tests.oracle import sorted_rows

# A third of the differential suite's examples: each one writes two tables and runs two merges.
DV_SETTINGS = settings(ENGINE_SETTINGS, max_examples=max(ENGINE_SETTINGS.max_examples // 3, 1))


def hide_rows(table: str, positions: frozenset[int], inline: bool) -> None:
    """Hide the rows at ``positions``, counted over the files in log-path order, behind deletion vectors."""
    hidden: dict[str, list[int]] = {}
    first = 0
    for path in data_file_paths(table):
        rows = pq.read_metadata(data_file(table, path)).num_rows
        indexes = [p - first for p in positions if first <= p < first + rows]
        if indexes:
            hidden[path] = indexes
        first += rows
    if hidden:
        delete_rows(table, hidden, inline=inline)


@DV_SETTINGS
@given(case=merges(), positions=st.frozensets(st.integers(0, 14)), inline=st.booleans(), writes=st.booleans())
def test_a_merge_into_hidden_rows_ends_as_one_into_the_visible_rows(
    spark, tmp_path_factory, case, positions, inline, writes
):
    assume(not has_matching_duplicates(case))
    work = tmp_path_factory.mktemp("merge")
    ours = str(work / "ours")
    for rows in case["files"]:
        write_deltalake(ours, as_table(rows), mode="append", partition_by=case["partition_by"])
    enable_deletion_vectors(ours, enabled=writes)
    hide_rows(ours, positions, inline)
    visible = sorted_rows(ours)  # deltalake's scan, with its own vector decoder
    oracle = str(work / "oracle")
    write_deltalake(oracle, pa.Table.from_pylist(visible, SCHEMA), partition_by=case["partition_by"])
    assert_merges_agree(spark, work, case, ours, oracle)
