"""Generated merges into tables with the change data feed on, against deltalake merging the same tables.

deltalake's merge writes the feed as Delta's does (pre- and post-images of updates, deletes, inserts; the
same rows whether they come from change files or, for a merge that only adds files, from its adds). So each
case draws the differential suite's tables and merges, turns the feed on for both copies, and checks that
our merge ends with deltalake's rows and counts and that the feed of the merge's version, read by
deltalake's ``load_cdf``, holds the same changes.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from hypothesis import assume, event, given

from tests.engine.test_differential import (
    SCHEMA,
    as_table,
    assert_merges_agree,
    has_matching_duplicates,
    merges,
)
from tests.engine.test_differential_deletion_vectors import DV_SETTINGS

FEED = {"delta.enableChangeDataFeed": "true"}


def feed(table: str) -> list[tuple[Any, ...]]:
    """The changes of the table's newest version: (change type, *columns), sorted with NULLs apart."""
    version = DeltaTable(table).version()
    read = DeltaTable(table).load_cdf(starting_version=version, ending_version=version).read_all()
    rows = [(r["_change_type"], *(r[c] for c in SCHEMA.names)) for r in pa.table(read).to_pylist()]
    return sorted(rows, key=lambda row: [(v is None, str(v)) for v in row])


@DV_SETTINGS
@given(case=merges())
def test_a_merge_writes_the_feed_deltalake_writes(spark, tmp_path_factory, case):
    assume(not has_matching_duplicates(case))
    work = tmp_path_factory.mktemp("merge")
    tables = {name: str(work / name) for name in ("ours", "oracle")}
    for path in tables.values():
        for rows in case["files"]:
            write_deltalake(path, as_table(rows), mode="append", partition_by=case["partition_by"])
        DeltaTable(path).alter.set_table_properties(FEED)
    versions = {name: DeltaTable(path).version() for name, path in tables.items()}
    assert_merges_agree(spark, work, case, tables["ours"], tables["oracle"])
    # deltalake commits some merges that change nothing, Delta (and so we) none: compare where both did.
    compared = all(DeltaTable(path).version() > versions[name] for name, path in tables.items())
    event("feed compared" if compared else "no commit to compare")
    if compared:
        assert feed(tables["ours"]) == feed(tables["oracle"])
