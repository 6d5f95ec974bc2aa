"""What a spark-submit job gets for the object stores its paths name: the connector's jars on a local master
(resolved once into the machine's cache), the endpoint settings of S3A, ABFS and the GCS connector from the
connection, nothing the user already gave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_deltamerge.hooks.cloud_credentials import gcs_keyfile_conf, with_google_emulator
from airflow_provider_deltamerge.hooks.connector_jars import JarResolutionError
from airflow_provider_deltamerge.hooks.store_setup import GCS_CONNECTOR_CONF, s3a_endpoint_conf, store_setup
from airflow_provider_deltamerge.job.filesystems import _missing
from airflow_provider_deltamerge.storage_connectors import (
    GCS_CONNECTOR,
    connectors_for,
    installed_spark_hadoop_version,
)

S3_ENV = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
    "AWS_REGION": "eu-west-1",
    "AWS_SECRET_ACCESS_KEY": "s",
}


def setup_of(paths, *, local_master=True, conf=None, kwargs=None, spark_submit="spark-submit", env=S3_ENV):
    return store_setup(
        paths,
        env,
        local_master=local_master,
        spark_submit=spark_submit,
        user_conf=conf or {},
        user_kwargs=kwargs or {},
        announce=lambda line: None,
    )


def test_each_scheme_needs_its_connector_once():
    paths = ["s3://lake/t", "s3a://lake/s", "abfss://c@a.dfs.core.windows.net/t", "gs://b/t", "/local/x"]
    names = [c.name for c in connectors_for(paths)]
    assert names == ["hadoop-aws (S3A)", "hadoop-azure (ABFS)", "Google Cloud Storage connector"]
    assert connectors_for(["/lake/orders", "file:///lake/x", "hdfs://nn/lake"]) == []


def test_a_local_master_gets_hadoop_aws_for_the_installed_sparks_hadoop():
    import pyspark

    hadoop = installed_spark_hadoop_version()
    jars_folder = Path(pyspark.__file__).parent / "jars"
    assert hadoop is not None and (jars_folder / f"hadoop-client-api-{hadoop}.jar").is_file()
    setup = setup_of(["s3://lake/orders", "s3://lake/staging/x.parquet"])
    names = [Path(jar).name for jar in setup.jars]
    assert f"org.apache.hadoop_hadoop-aws-{hadoop}.jar" in names
    assert any(name.startswith("software.amazon.awssdk_bundle-") for name in names)
    assert all(Path(jar).is_file() for jar in setup.jars)


@pytest.mark.parametrize(
    ("local_master", "conf", "kwargs"),
    [
        (False, {}, {}),  # a cluster: its own connectors
        (True, {"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.5.0"}, {}),
        (True, {}, {"jars": "/opt/jars/hadoop-aws-3.5.0.jar"}),
        (True, {}, {"packages": "org.apache.hadoop:hadoop-aws:3.5.0"}),
    ],
)
def test_no_jar_is_fetched_where_the_cluster_or_the_user_brings_the_connector(
    tmp_path, monkeypatch, local_master, conf, kwargs
):
    # An empty cache and a spark-submit that cannot run: any resolution would fail the call.
    monkeypatch.setenv("DELTAMERGE_JAR_CACHE", str(tmp_path))
    setup = setup_of(
        ["s3://lake/t"], local_master=local_master, conf=conf, kwargs=kwargs, spark_submit="false"
    )
    assert setup.jars == ()


def test_a_connector_that_cannot_be_fetched_fails_with_its_coordinates(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTAMERGE_JAR_CACHE", str(tmp_path))
    with pytest.raises(JarResolutionError, match=r"org\.apache\.hadoop:hadoop-aws:"):
        setup_of(["s3a://lake/t"], spark_submit=str(tmp_path / "no-spark-submit"))


def test_an_s3_compatible_endpoint_becomes_s3a_settings_and_no_secret_does():
    assert s3a_endpoint_conf(S3_ENV) == {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.path.style.access": "true",
    }
    # AWS itself: S3A finds the endpoint from the region.
    assert s3a_endpoint_conf({"AWS_REGION": "eu-west-1"}) == {
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1"
    }
    https = s3a_endpoint_conf({"AWS_ENDPOINT_URL": "https://s3.example.test"})
    assert https["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    assert https["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-1"


def test_the_users_own_s3a_settings_win(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTAMERGE_JAR_CACHE", str(tmp_path))
    conf = {"spark.hadoop.fs.s3a.path.style.access": "false"}
    setup = setup_of(["s3://lake/t"], local_master=False, conf=conf)
    assert "spark.hadoop.fs.s3a.path.style.access" not in setup.conf
    assert setup.conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert setup_of(["/lake/t"], local_master=False).conf == {}


AZURITE_ENV = {
    "AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
    "AZURE_STORAGE_ACCOUNT_KEY": "a2V5",
    "AZURE_STORAGE_ENDPOINT": "http://127.0.0.1:10000/devstoreaccount1",
    "AZURE_ALLOW_HTTP": "true",
}
AZURITE_TABLE = "abfs://lake@devstoreaccount1.dfs.core.windows.net/orders"


def test_an_emulators_endpoint_points_abfs_at_its_blob_service_and_the_key_is_private_conf():
    setup = setup_of([AZURITE_TABLE, "abfs://lake@devstoreaccount1.dfs.core.windows.net/s"], env=AZURITE_ENV)
    assert setup.conf["spark.hadoop.fs.azure.abfs.endpoint"] == "127.0.0.1:10000"
    assert setup.conf["spark.hadoop.fs.azure.always.use.https"] == "false"
    assert setup.conf["spark.hadoop.fs.azure.fns.account.service.type"] == "BLOB"
    assert setup.conf["spark.submit.callSystemExitOnMainExit"] == "true"
    assert "a2V5" not in str(setup.conf)
    assert setup.private_conf == {
        "spark.hadoop.fs.azure.account.key.devstoreaccount1.dfs.core.windows.net": "a2V5"
    }
    assert any(Path(jar).name.startswith("org.apache.hadoop_hadoop-azure-") for jar in setup.jars)


def test_azures_own_endpoint_needs_no_setting_and_a_sas_becomes_abfss_fixed_token():
    env = {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_SAS_KEY": "?sv=2024&sig=abc"}
    setup = setup_of(["abfss://lake@acct.dfs.core.windows.net/orders"], env=env, local_master=False)
    assert setup.conf == {"spark.submit.callSystemExitOnMainExit": "true"}
    assert setup.private_conf == {
        "spark.hadoop.fs.azure.account.auth.type.acct.dfs.core.windows.net": "SAS",
        "spark.hadoop.fs.azure.sas.fixed.token.acct.dfs.core.windows.net": "sv=2024&sig=abc",
    }


def test_the_users_own_abfs_key_wins():
    key = "spark.hadoop.fs.azure.account.key.devstoreaccount1.dfs.core.windows.net"
    setup = setup_of([AZURITE_TABLE], env=AZURITE_ENV, local_master=False, conf={key: "theirs"})
    assert setup.private_conf == {}


def test_a_local_master_gets_the_gcs_connectors_own_jar_and_the_settings_it_needs_on_sparks_hadoop():
    # The connector's jar alone (its dependencies shaded in), and gs:// mapped to it with byte sizes:
    # pyspark's Hadoop maps gs:// to its own hadoop-gcp and gives the connector sizes it cannot parse ("64m")
    setup = setup_of(["gs://lake/orders"], env={})
    assert [Path(jar).name for jar in setup.jars] == [
        "com.google.cloud.bigdataoss_gcs-connector-4.0.0-shaded.jar"
    ]
    assert setup.conf == GCS_CONNECTOR_CONF
    assert setup.conf["spark.hadoop.fs.gs.impl"] == "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"
    assert setup.conf["spark.hadoop.fs.gs.block.size"] == "67108864"
    # On a cluster: its own connector and settings
    assert setup_of(["gs://lake/orders"], env={}, local_master=False).conf == {}


def test_a_gcs_emulator_named_by_the_connection_points_the_connector_there_unauthenticated():
    env = with_google_emulator({"STORAGE_EMULATOR_HOST": "http://127.0.0.1:4443/"})
    setup = setup_of(["gs://lake/orders"], env=env, local_master=False)
    assert setup.conf == {
        "spark.hadoop.fs.gs.storage.root.url": "http://127.0.0.1:4443",
        "spark.hadoop.fs.gs.auth.type": "UNAUTHENTICATED",
        "spark.hadoop.fs.gs.operation.move.enable": "false",
    }
    # deltalake and obstore reach it through a key naming it, which the connector must not be given
    key = json.loads(env["GOOGLE_SERVICE_ACCOUNT_KEY"])
    assert key["gcs_base_url"] == "http://127.0.0.1:4443" and key["disable_oauth"] is True
    assert env["GOOGLE_ALLOW_HTTP"] == "true"
    assert gcs_keyfile_conf(env, Path("/nowhere")) == {}


def test_a_missing_gcs_connector_is_named_with_its_jar_which_packages_cannot_fetch():
    message = str(_missing(GCS_CONNECTOR, "gs", "3.5.0"))
    assert "spark_submit_kwargs={'jars': '<folder>/gcs-connector-4.0.0-shaded.jar'}" in message
    assert "com.google.cloud.bigdataoss:gcs-connector:4.0.0:shaded" in message
    assert "'packages'" not in message
