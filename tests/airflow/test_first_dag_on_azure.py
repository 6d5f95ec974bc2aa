"""docs/object-stores.md's "Your first DAG on Azure" as a user pastes it, against the session's Azure
emulator: the account's key in the environment, the table and extract written there, the DAG, a ``wasb``
connection and the run, on a fresh Airflow with no Spark connection (a local master, which fetches the Azure
connector by itself and hands ABFS the key in its private properties file)."""

from __future__ import annotations

import uuid

import pytest

from bench.first_dag import readme_first_dag_blocks
from tests.airflow.first_dag_pages import assert_first_merge, run_as_printed

pytestmark = pytest.mark.slow

DOC_ENDPOINT = "http://127.0.0.1:10000/devstoreaccount1"


def test_first_dag_on_azure_runs_as_printed(airflow_env, azure_server_of_session, tmp_path):
    # Given: the page's blocks with the emulator's account, key, endpoint and a new container in place of
    # the placeholders (and Azure's connection string by the emulator's, and abfs:// for its plain HTTP),
    # and a fresh Airflow home whose DAGs folder holds the page's DAG
    exports, setup, dag, commands = readme_first_dag_blocks(
        "Your first DAG on Azure", "docs/object-stores.md"
    )
    server = azure_server_of_session
    container = f"my-lake-{uuid.uuid4().hex[:8]}"
    server.create_container(container)

    def ours(text: str) -> str:
        return (
            text.replace(DOC_ENDPOINT, server.endpoint)
            .replace("DefaultEndpointsProtocol=https", "DefaultEndpointsProtocol=http")
            .replace("EndpointSuffix=core.windows.net", f"BlobEndpoint={server.endpoint}")
            .replace("abfss://", "abfs://")
            .replace("YOUR_ACCOUNT", server.account)
            .replace("YOUR_KEY", server.key)
            .replace("my-lake", container)
        )

    # When: the shell runs the page's blocks in order, from the repository (where .venv/ is)
    output, home = run_as_printed(
        [exports, setup, dag, commands],
        ours,
        dag_id="my_first_azure_merge",
        airflow_env=airflow_env,
        tmp_path=tmp_path,
        hidden_prefix="AZURE_",
    )

    # Then: the merge ran on this machine's Spark into the table in the container, the key in no line of
    # the output
    uri = f"abfs://{container}@{server.account}.dfs.core.windows.net/orders"
    assert_first_merge(uri, server.environment(), home=home, dag_id="my_first_azure_merge", output=output)
    assert server.key not in output
