"""The README's "Your first DAG on S3" as a user pastes it, against the session's S3 server: the keys in the
environment, the table and extract written there, the DAG, the connection and the run, on a fresh Airflow
with no Spark connection (a local master, which fetches the S3 connector by itself)."""

from __future__ import annotations

import pytest

from bench.first_dag import readme_first_dag_blocks
from tests.airflow.first_dag_pages import assert_first_merge, run_as_printed

pytestmark = pytest.mark.slow

README_ENDPOINT = "http://127.0.0.1:9000"


def test_readme_first_dag_on_s3_runs_as_printed(airflow_env, s3_server_of_session, tmp_path):
    # Given: the README's blocks with this server's endpoint, keys and a new bucket in place of the
    # placeholders, and a fresh Airflow home whose DAGs folder holds the README's DAG
    exports, setup, dag, commands = readme_first_dag_blocks("Your first DAG on S3")
    server = s3_server_of_session
    bucket = server.create_bucket(f"my-lake-{tmp_path.name[-8:].lower().replace('_', '-')}").removeprefix(
        "s3://"
    )
    key_id, secret = server.key_pair

    def ours(text: str) -> str:
        return (
            text.replace(README_ENDPOINT, server.url)
            .replace("YOUR_KEY_ID", key_id)
            .replace("YOUR_SECRET", secret)
            .replace("my-lake", bucket)
        )

    # When: the shell runs the README's blocks in order, from the repository (where .venv/ is)
    output, home = run_as_printed(
        [exports, setup, dag, commands],
        ours,
        dag_id="my_first_s3_merge",
        airflow_env=airflow_env,
        tmp_path=tmp_path,
        hidden_prefix="AWS_",
    )

    # Then: the merge ran on this machine's Spark into the table on S3, the secret in no line of the output
    assert_first_merge(
        f"s3://{bucket}/orders", server.environment(), home=home, dag_id="my_first_s3_merge", output=output
    )
    assert secret not in output
