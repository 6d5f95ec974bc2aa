"""S3 throttling every write of data files in the middle of a merge: the merge fails as a transient error
with no commit, the table as it was; the task's retry, the store healed, merges once, and VACUUM leaves only
the log's files."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import DeltaMergeError, is_final
from tests.conftest import ORDERS, make_table, table_state, upsert_from_extract
from tests.delta.helpers import files_on_disk_match_log
from tests.stores.faulty_proxy import faulty_proxy

# Spark jobs against the S3 server: run early in a worker's share, with the other slow tests.
pytestmark = pytest.mark.slow

RUN = {"dagId": "daily", "taskId": "merge", "runId": "scheduled__2024-01-01", "mapIndex": -1}
# S3A's retries, few and short for the test: S3 itself throttles for longer than a merge would wait.
FEW_RETRIES = {
    "retry.limit": "1",
    "retry.interval": "100ms",
    "retry.throttle.limit": "1",
    "retry.throttle.interval": "100ms",
    "attempts.maximum": "1",
}


def test_a_merge_throttled_while_writing_commits_nothing_and_its_retry_merges_once(
    spark_on_s3, s3_server_of_session, s3_lake, tmp_path, monkeypatch
):
    bucket = s3_lake.removeprefix("s3://")
    with faulty_proxy(s3_server_of_session.url) as proxy:
        # Given: the bucket reached through the proxy, by this process and by Spark's S3A alike
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        hadoop_conf = spark_on_s3._jsc.hadoopConfiguration()
        settings = {"endpoint": proxy.url, **FEW_RETRIES}
        for key, value in settings.items():
            hadoop_conf.set(f"fs.s3a.bucket.{bucket}.{key}", value)
        try:
            target = make_table(f"{s3_lake}/orders", partition_by=["region"])
            spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(1, 7, "us"), (42, 8, "eu")])
            before = table_state(target)
            # When: every write of a data file is answered 503 SlowDown
            proxy.failing(True)
            with pytest.raises(DeltaMergeError) as failed:
                run_merge(spark_on_s3, spec, provenance={**RUN, "tryNumber": 1})
            # Then: a transient error (Airflow retries it), no commit, the rows as they were
            assert proxy.refused > 0
            assert not is_final(failed.value), failed.value
            assert "SlowDown" in str(failed.value) and "Nothing was committed." in str(failed.value)
            assert table_state(target) == before
            # When: the store is healed and the task runs again
            proxy.failing(False)
            retry = run_merge(spark_on_s3, spec, provenance={**RUN, "tryNumber": 2})
            # Then: the merge lands once
            assert retry.version == before[0] + 1 and not retry.already_committed
            assert (retry.metrics[m.NUM_TARGET_ROWS_UPDATED], retry.metrics[m.NUM_TARGET_ROWS_INSERTED]) == (
                1,
                1,
            )
            assert len(DeltaTable(target).to_pyarrow_table()) == len(ORDERS) + 1
            DeltaTable(target).vacuum(
                retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
            )
            assert files_on_disk_match_log(target)
        finally:
            for key in settings:
                hadoop_conf.unset(f"fs.s3a.bucket.{bucket}.{key}")
