"""The "Your first DAG on ..." sections as a user pastes them, against the session's servers: the README's on
S3, docs/object-stores.md's on Azure and on GCS. The keys in the environment (or, on GCS, the emulator in
place of the key file), the table and extract written there, the DAG, the connection and the run, on a fresh
Airflow with no Spark connection (a local master, which fetches the store's connector by itself).

Each run is an Airflow and a Spark start of about 40 seconds on CI's machine: CI runs one store a day
(``of_the_day``), where tests/stores compares each store's merges with the same merges on disk every day.
Locally all three run.
"""

from __future__ import annotations

import json
import shlex
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from airflow_provider_deltamerge.hooks.cloud_credentials import GOOGLE_EMULATOR
from bench.first_dag import readme_first_dag_blocks
from tests.airflow.first_dag_pages import assert_first_merge, run_as_printed
from tests.run_profile import of_the_day
from tests.stores.azure_server import AzureServer
from tests.stores.gcs_server import GcsServer
from tests.stores.s3_server import S3Server

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Page:
    """A store's section as this machine runs it: its placeholders and what stands in for each, the table's
    URI, the DAG's id, the prefix of the store's environment variables the run must not inherit, and the
    secret that no line of the output may show (None where the emulator has none)."""

    heading: str
    document: str
    ours: dict[str, str]
    uri: str
    dag_id: str
    hidden_prefix: str
    secret: str | None


def s3_page(server: S3Server) -> Page:
    bucket = server.create_bucket(f"my-lake-{uuid.uuid4().hex[:8]}").removeprefix("s3://")
    key_id, secret = server.key_pair
    return Page(
        "Your first DAG on S3",
        "README.md",
        {
            "http://127.0.0.1:9000": server.url,
            "YOUR_KEY_ID": key_id,
            "YOUR_SECRET": secret,
            "my-lake": bucket,
        },
        f"s3://{bucket}/orders",
        "my_first_s3_merge",
        "AWS_",
        secret,
    )


def azure_page(server: AzureServer) -> Page:
    # the emulator's account, key and endpoint; Azure's connection string by the emulator's, and abfs:// for
    # its plain HTTP
    container = f"my-lake-{uuid.uuid4().hex[:8]}"
    server.create_container(container)
    return Page(
        "Your first DAG on Azure",
        "docs/object-stores.md",
        {
            "http://127.0.0.1:10000/devstoreaccount1": server.endpoint,
            "DefaultEndpointsProtocol=https": "DefaultEndpointsProtocol=http",
            "EndpointSuffix=core.windows.net": f"BlobEndpoint={server.endpoint}",
            "abfss://": "abfs://",
            "YOUR_ACCOUNT": server.account,
            "YOUR_KEY": server.key,
            "my-lake": container,
        },
        f"abfs://{container}@{server.account}.dfs.core.windows.net/orders",
        "my_first_azure_merge",
        "AZURE_",
        server.key,
    )


def gcs_page(server: GcsServer) -> Page:
    # the emulator in place of the key file: the variables deltalake reads, and the connection's env extra
    # naming it
    bucket = f"my-lake-{uuid.uuid4().hex[:8]}"
    server.create_bucket(bucket)
    variables = " ".join(f"{name}={shlex.quote(value)}" for name, value in server.environment().items())
    extra = json.dumps({"env": {GOOGLE_EMULATOR: server.url}})
    return Page(
        "Your first DAG on GCS",
        "docs/object-stores.md",
        {
            "export GOOGLE_SERVICE_ACCOUNT_PATH=YOUR_KEY_FILE": f"export {variables}",
            '--conn-extra "{\\"key_path\\": \\"$GOOGLE_SERVICE_ACCOUNT_PATH\\"}"': (
                f"--conn-extra {shlex.quote(extra)}"
            ),
            "my-lake": bucket,
        },
        f"gs://{bucket}/orders",
        "my_first_gcs_merge",
        "GOOGLE_",
        None,
    )


PAGES: dict[str, Callable[[Any], Page]] = {"s3": s3_page, "azure": azure_page, "gcs": gcs_page}


@pytest.mark.parametrize("store", of_the_day(list(PAGES)))
def test_first_dag_on_a_store_runs_as_printed(store, request, airflow_env, tmp_path):
    # Given: the section's blocks with this machine's server, keys and a new bucket in place of each
    # placeholder the section prints, and a fresh Airflow home whose DAGs folder holds the section's DAG
    server = request.getfixturevalue(f"{store}_server_of_session")
    page = PAGES[store](server)
    blocks = readme_first_dag_blocks(page.heading, page.document)
    printed = "\n".join(blocks)
    assert [p for p in page.ours if p not in printed] == []

    def ours(text: str) -> str:
        for placeholder, value in page.ours.items():
            text = text.replace(placeholder, value)
        return text

    # When: the shell runs the blocks in order, from the repository (where .venv/ is)
    output, home = run_as_printed(
        blocks,
        ours,
        dag_id=page.dag_id,
        airflow_env=airflow_env,
        tmp_path=tmp_path,
        hidden_prefix=page.hidden_prefix,
    )

    # Then: the merge ran on this machine's Spark into the table on the store, the secret in no line of the
    # output
    assert_first_merge(page.uri, server.environment(), home=home, dag_id=page.dag_id, output=output)
    if page.secret is not None:
        assert page.secret not in output
