"""``wasb`` storage connections resolved by the Azure provider's own ``WasbHook`` (the real class), as the
variables ``deltalake`` reads; only Azure's token service, which cannot be started here, is replaced. The
merge job gets the key for ABFS in the private properties file, redacted in Spark's event log and on no
command line."""

from __future__ import annotations

import json
import sys

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.exceptions import StorageCredentialsError
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options
from tests.conftest import make_table, upsert_from_extract
from tests.job.conftest import local_spark_connection
from tests.secret_leaks import event_log_conf, watched_merge

ACCOUNT_KEY = "c2VjcmV0LWFjY291bnQta2V5"  # base64, as Azure's keys are
ABFS_KEY = "spark.hadoop.fs.azure.account.key.devstoreaccount1.dfs.core.windows.net"

__all__ = ["local_spark_connection"]  # a fixture, used by name


def wasb_connection(monkeypatch, **connection: object) -> str:
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_AZURE", json.dumps({"conn_type": "wasb", **connection}))
    return "lake_azure"


def service_principal(monkeypatch) -> str:
    """A connection of an app registration (login: client id, password: secret) to account lakeacct."""
    return wasb_connection(
        monkeypatch,
        login="client-id",
        password="client-secret",
        host="https://lakeacct.blob.core.windows.net",
        extra={"tenant_id": "t1"},
    )


def test_an_account_key_connection(monkeypatch):
    conn_id = wasb_connection(monkeypatch, login="lakeacct", password=ACCOUNT_KEY)

    assert connection_storage_options(conn_id) == {
        "AZURE_STORAGE_ACCOUNT_NAME": "lakeacct",
        "AZURE_STORAGE_ACCOUNT_KEY": ACCOUNT_KEY,
    }


@pytest.mark.parametrize(
    ("endpoints", "endpoint_variables"),
    [
        ("DefaultEndpointsProtocol=https;EndpointSuffix=core.windows.net", {}),
        (
            # An emulator's (Azurite's): its endpoint, over plain HTTP.
            "DefaultEndpointsProtocol=http;BlobEndpoint=http://127.0.0.1:10000/fromstring;",
            {
                "AZURE_STORAGE_ENDPOINT": "http://127.0.0.1:10000/fromstring",
                "AZURE_ALLOW_HTTP": "true",
            },
        ),
    ],
    ids=["azure", "emulator"],
)
def test_a_connection_string_gives_its_account_and_key(monkeypatch, endpoints, endpoint_variables):
    connection_string = f"AccountName=fromstring;AccountKey={ACCOUNT_KEY};{endpoints}"
    conn_id = wasb_connection(monkeypatch, extra={"connection_string": connection_string})

    assert connection_storage_options(conn_id) == {
        "AZURE_STORAGE_ACCOUNT_NAME": "fromstring",
        "AZURE_STORAGE_ACCOUNT_KEY": ACCOUNT_KEY,
        **endpoint_variables,
    }


@pytest.mark.parametrize(
    ("login", "sas_token"),
    [
        ("lakeacct", "sv=2024-05-04&ss=b&sig=c2ln"),
        (None, "https://lakeacct.blob.core.windows.net/?sv=2024&sig=c2ln"),
    ],
    ids=["token", "url"],
)
def test_a_sas_token_connection(monkeypatch, login, sas_token):
    conn_id = wasb_connection(monkeypatch, login=login, extra={"sas_token": sas_token})

    options = connection_storage_options(conn_id)

    assert options["AZURE_STORAGE_ACCOUNT_NAME"] == "lakeacct"
    assert options["AZURE_STORAGE_SAS_KEY"] == sas_token.rsplit("?", 1)[-1]
    assert "AZURE_STORAGE_ACCOUNT_KEY" not in options


def test_a_service_principal_gets_a_storage_token(monkeypatch, mocker):
    # Azure's token service is the boundary: the hook's own ClientSecretCredential asks it for a token.
    ask = mocker.patch(
        "azure.identity.ClientSecretCredential.get_token", return_value=AccessToken("storage-token", 2**40)
    )
    conn_id = service_principal(monkeypatch)

    options = connection_storage_options(conn_id)

    assert options == {"AZURE_STORAGE_ACCOUNT_NAME": "lakeacct", "AZURE_STORAGE_TOKEN": "storage-token"}
    ask.assert_called_once_with("https://storage.azure.com/.default")


def test_a_refused_service_principal_is_a_storage_credentials_error_without_the_secret(monkeypatch, mocker):
    mocker.patch(
        "azure.identity.ClientSecretCredential.get_token",
        side_effect=ClientAuthenticationError("AADSTS7000215: Invalid client secret provided."),
    )
    conn_id = service_principal(monkeypatch)

    with pytest.raises(StorageCredentialsError, match=r"lake_azure.*ClientAuthenticationError") as raised:
        connection_storage_options(conn_id)
    assert "client-secret" not in str(raised.value)


def test_an_env_extra_adds_variables_to_a_wasb_connection(monkeypatch):
    conn_id = wasb_connection(
        monkeypatch,
        login="lakeacct",
        password=ACCOUNT_KEY,
        extra={"env": {"AZURE_STORAGE_USE_EMULATOR": "true"}},
    )

    assert connection_storage_options(conn_id)["AZURE_STORAGE_USE_EMULATOR"] == "true"


def test_without_the_azure_provider_login_and_password_are_account_and_key(monkeypatch):
    monkeypatch.setitem(sys.modules, "airflow.providers.microsoft.azure.hooks.wasb", None)
    # A SAS token only the Azure provider's hook would read: without it, the key pair is what counts.
    conn_id = wasb_connection(
        monkeypatch, login="lakeacct", password=ACCOUNT_KEY, extra={"sas_token": "sv=1"}
    )

    assert connection_storage_options(conn_id) == {
        "AZURE_STORAGE_ACCOUNT_NAME": "lakeacct",
        "AZURE_STORAGE_ACCOUNT_KEY": ACCOUNT_KEY,
    }


def test_a_key_in_the_env_extra_is_masked_in_logs_whatever_its_variables_name(monkeypatch):
    # Airflow's masker skips a value registered under a name it does not find sensitive, and
    # AZURE_STORAGE_SAS_KEY is such a name; nor does Airflow mask the env extra's values itself.
    from airflow.sdk.log import redact

    sas = "sv=2024-05-04&ss=b&sig=ZW52LWV4dHJhLXNhcw"
    conn_id = wasb_connection(
        monkeypatch, login="lakeacct", password=ACCOUNT_KEY, extra={"env": {"AZURE_STORAGE_SAS_KEY": sas}}
    )

    assert connection_storage_options(conn_id)["AZURE_STORAGE_SAS_KEY"] == sas
    assert sas not in str(redact(f"AZURE_STORAGE_SAS_KEY={sas}"))


@pytest.mark.slow
def test_the_spark_job_gets_the_key_for_abfs_never_on_its_command_line_or_in_the_event_log(
    tmp_path, monkeypatch, local_spark_connection, azure_lake, azure_server_of_session, caplog
):
    # A local merge into a table in the emulator, with a wasb connection: ABFS reads and writes the data
    # with the key, which stays out of every command line, the event log and the task log.
    server = azure_server_of_session
    target = make_table(f"{azure_lake}/orders")
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(2, 5, "eu")])
    for name in server.environment():
        monkeypatch.delenv(name)
    conn_id = wasb_connection(monkeypatch, extra={"connection_string": server.connection_string()})
    events = tmp_path / "events"
    events.mkdir()
    hook = DeltaMergeHook(local_spark_connection, storage_conn_id=conn_id, conf=event_log_conf(events))
    with caplog.at_level("DEBUG"):
        merge = watched_merge(hook, spec, events)

    assert merge.metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert merge.properties("Spark Properties")[ABFS_KEY] == "*********(redacted)"
    hadoop_key = ABFS_KEY.removeprefix("spark.hadoop.")
    assert merge.properties("Hadoop Properties")[hadoop_key] == "*********(redacted)"
    assert merge.leaked(server.key) == []
    assert server.key not in caplog.text
