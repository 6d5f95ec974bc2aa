"""Merge jobs run in separate processes ('spawn', each with its own local SparkSession) by the concurrency
and crash tests. Module-level functions only, so a spawned child can import them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from deltalake import DeltaTable

from airflow_provider_deltamerge.spec.json_form import spec_from_json


def local_spark() -> Any:
    """A local[1] session; with a store's endpoint in the environment (the tests' S3 server, Azure or GCS
    emulator), set up for it as a merge job's session is: the store's connector, the endpoint's settings, the
    keys from the environment."""
    from pyspark.sql import SparkSession

    from airflow_provider_deltamerge.hooks.cloud_credentials import GOOGLE_EMULATOR
    from airflow_provider_deltamerge.hooks.connector_jars import distinct_jars
    from airflow_provider_deltamerge.hooks.store_setup import (
        GCS_CONNECTOR_CONF,
        abfs_credential_conf,
        abfs_endpoint_conf,
        gcs_endpoint_conf,
        local_connector_jars,
        s3a_endpoint_conf,
    )
    from airflow_provider_deltamerge.job.filesystems import prepare_filesystems
    from airflow_provider_deltamerge.storage_connectors import AZURE_CONNECTOR, GCS_CONNECTOR, S3_CONNECTOR

    builder = (
        SparkSession.builder.master("local[1]")
        .appName("deltamerge-race")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "512m")
    )
    on_s3 = "AWS_ENDPOINT_URL" in os.environ
    on_azure = "AZURE_STORAGE_ENDPOINT" in os.environ
    on_gcs = GOOGLE_EMULATOR in os.environ
    stores = ((S3_CONNECTOR, on_s3), (AZURE_CONNECTOR, on_azure), (GCS_CONNECTOR, on_gcs))
    connectors = [c for c, used in stores if used]
    jars = [jar for connector in connectors for jar in local_connector_jars(connector, announce=print)]
    if jars:
        builder = builder.config("spark.jars", ",".join(distinct_jars(jars)))
    if on_s3:
        builder = builder.config(map=s3a_endpoint_conf(os.environ))
    if on_azure:
        account = f"abfs://any@{os.environ['AZURE_STORAGE_ACCOUNT_NAME']}.dfs.core.windows.net"
        conf = {**abfs_endpoint_conf(os.environ), **abfs_credential_conf([account], os.environ)}
        builder = builder.config(map=conf)
    if on_gcs:
        builder = builder.config(map={**GCS_CONNECTOR_CONF, **gcs_endpoint_conf(os.environ)})
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if on_s3:
        prepare_filesystems(session, ["s3://any"])
    return session


def merge_job(
    spec_json: str,
    provenance: Mapping[str, Any],
    results: Any,
    *,
    barrier: Any = None,
    ready: Any = None,
    go: Any = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run one merge; put (name, outcome) on ``results``.

    Before its first commit attempt the merge waits at ``barrier`` (all racers have read their snapshot), or
    sets ``ready`` and waits for ``go`` (another writer commits in between). ``env`` may switch on a fault of
    tests/faults.py, which this process's sitecustomize installed.
    """
    os.environ.update(env or {})
    from airflow_provider_deltamerge.delta.commit import transaction as commit
    from airflow_provider_deltamerge.engine import run_merge
    from airflow_provider_deltamerge.exceptions import DeltaMergeError

    real, waited = commit._try_commit, []

    def try_commit(base: Any, actions: Any, store: Any) -> bool:
        if not waited:
            waited.append(True)
            if barrier is not None:
                barrier.wait(timeout=600)
            if ready is not None:
                ready.set()
                go.wait(timeout=600)
        return real(base, actions, store)

    commit._try_commit = try_commit
    spark = local_spark()
    name = provenance.get("taskId", "merge")
    try:
        result = run_merge(spark, spec_from_json(spec_json), provenance=provenance)
        results.put(
            (
                name,
                {
                    "version": result.version,
                    "committed": result.committed,
                    "attempts": result.attempts,
                    "earlier_attempts_ms": result.earlier_attempts_ms,
                    "rebased_over": list(result.rebased_over),
                    "metrics": dict(result.metrics),
                },
            )
        )
    except DeltaMergeError as err:
        results.put((name, {"error": str(err)}))
    except Exception as err:  # not a product error: the test shows it rather than waiting for a result
        results.put((name, {"crash": f"{type(err).__name__}: {err}"}))
        raise
    finally:
        spark.stop()


def deltalake_update(table: str, predicate: str, updates: Mapping[str, str], ready: Any, go: Any) -> None:
    """Another writer (delta-rs, no Spark): update rows once the merge has read its snapshot."""
    ready.wait(timeout=600)
    DeltaTable(table).update(predicate=predicate, updates=dict(updates))
    go.set()
