"""Our merges into liquid-clustered tables (writer feature ``clustering``, issue 39 item 2).

Delta made each table with ``CLUSTER BY``; our merge (one statement per executor) writes its files as
Delta's MERGE does without auto-clustering, leaves the clustering columns (domain metadata
``delta.clustering``) as they were, gives the rows Delta's own MERGE gives on an identical copy, and Delta's
OPTIMIZE then clusters the table and its next MERGE works.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from tests.delta.helpers import (
    STATEMENTS,
    assert_merges_agree,
    assert_next_merges_agree,
    delta_rows,
    last_history,
    log_actions,
)
from tests.delta.test_delta_reads_our_merges import TARGET_ROWS, source
from tests.run_profile import of_the_day


def clustered_table(spark: SparkSession, path: Path) -> str:
    """A table Delta creates at ``path`` clustered by (region, id): rows 1-6 (id, qty, region) in two
    files, version 0."""
    values = ", ".join(f"({i}L, {q}, '{r}')" for i, q, r in TARGET_ROWS)
    spark.sql(
        f"CREATE TABLE delta.`{path}` USING delta CLUSTER BY (region, id) "
        f"AS SELECT /*+ REPARTITION(2) */ id, CAST(qty AS INT) AS qty, region "
        f"FROM VALUES {values} AS v(id, qty, region)"
    ).collect()
    return str(path)


def clustering_domain(table: str) -> dict[str, Any] | None:
    """The ``delta.clustering`` domain's configuration as of the table's latest version (the newest
    domainMetadata action of the domain)."""
    reader = LogReader(table)
    for version in range(reader.latest_version(), -1, -1):
        for action in log_actions(table, version, "domainMetadata"):
            if action["domain"] == "delta.clustering":
                return dict(json.loads(action["configuration"]))
    return None


# Every executor locally; in CI one a day: the differential suite draws clustered tables in every run
# (tests/run_profile.py)
@pytest.mark.parametrize("executor", of_the_day(sorted(STATEMENTS)))
def test_merge_into_clustered_table_gives_deltas_rows_and_delta_clusters_it_after(spark, tmp_path, executor):
    # Given: a table Delta clustered by (region, id)
    target = clustered_table(spark, tmp_path / "ours")
    domain = clustering_domain(target)
    assert domain is not None and domain["clusteringColumns"] == [["region"], ["id"]]
    # When/Then: our engine merges with the executor the statement calls for, and Delta reads from our table
    # the rows and counts its own MERGE gives on an identical copy
    agreed = assert_merges_agree(
        spark, target, STATEMENTS[executor], source(tmp_path), executor=executor, version=1
    )
    # The clustering columns are untouched (no domainMetadata action of ours), the new files unclustered as
    # Delta's MERGE leaves them, and Delta still sees the table clustered by them
    assert log_actions(target, 1, "domainMetadata") == []
    assert clustering_domain(target) == domain
    assert all("clusteringProvider" not in add for add in log_actions(target, 1, "add"))
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{target}`").collect()[0]
    assert list(detail["clusteringColumns"]) == ["region", "id"]
    # When: Delta clusters the table
    spark.sql(f"OPTIMIZE delta.`{target}`").collect()
    # Then: its OPTIMIZE rewrote our files as liquid-clustered ones, with the same rows
    optimize = last_history(spark, target)
    assert optimize["operation"] == "OPTIMIZE"
    added = log_actions(target, optimize["version"], "add")
    assert added and all(add.get("clusteringProvider") == "liquid" for add in added)
    assert delta_rows(spark, target) == delta_rows(spark, agreed.theirs)
    # When/Then: Delta's own next merge works on our table and gives what it gives on its own copy
    assert_next_merges_agree(spark, target, agreed.theirs)
    assert clustering_domain(target) == domain
