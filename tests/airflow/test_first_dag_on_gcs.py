"""docs/object-stores.md's "Your first DAG on GCS" as a user pastes it, against the session's GCS emulator:
the emulator named in the environment and in a ``google_cloud_platform`` connection in place of the key
file, the table and extract written there, the DAG and the run, on a fresh Airflow with no Spark connection
(a local master, which fetches the GCS connector by itself and points it at the emulator)."""

from __future__ import annotations

import json
import shlex
import uuid

import pytest

from airflow_provider_deltamerge.hooks.cloud_credentials import GOOGLE_EMULATOR
from bench.first_dag import readme_first_dag_blocks
from tests.airflow.first_dag_pages import assert_first_merge, run_as_printed

pytestmark = pytest.mark.slow

KEY_EXPORT = "export GOOGLE_SERVICE_ACCOUNT_PATH=YOUR_KEY_FILE"
KEY_EXTRA = '--conn-extra "{\\"key_path\\": \\"$GOOGLE_SERVICE_ACCOUNT_PATH\\"}"'


def test_first_dag_on_gcs_runs_as_printed(airflow_env, gcs_server_of_session, tmp_path):
    # Given: the page's blocks with the emulator in place of the key file (the variables deltalake reads, and
    # the connection's env extra naming it) and a new bucket for my-lake, and a fresh Airflow home whose DAGs
    # folder holds the page's DAG
    exports, setup, dag, commands = readme_first_dag_blocks("Your first DAG on GCS", "docs/object-stores.md")
    assert KEY_EXPORT in exports and KEY_EXTRA in commands
    server = gcs_server_of_session
    bucket = f"my-lake-{uuid.uuid4().hex[:8]}"
    server.create_bucket(bucket)
    variables = " ".join(f"{name}={shlex.quote(value)}" for name, value in server.environment().items())
    extra = json.dumps({"env": {GOOGLE_EMULATOR: server.url}})

    def ours(text: str) -> str:
        return (
            text.replace(KEY_EXPORT, f"export {variables}")
            .replace(KEY_EXTRA, f"--conn-extra {shlex.quote(extra)}")
            .replace("my-lake", bucket)
        )

    # When: the shell runs the page's blocks in order, from the repository (where .venv/ is)
    output, home = run_as_printed(
        [exports, setup, dag, commands],
        ours,
        dag_id="my_first_gcs_merge",
        airflow_env=airflow_env,
        tmp_path=tmp_path,
        hidden_prefix="GOOGLE_",
    )

    # Then: the merge ran on this machine's Spark into the table in the bucket
    assert_first_merge(
        f"gs://{bucket}/orders", server.environment(), home=home, dag_id="my_first_gcs_merge", output=output
    )
