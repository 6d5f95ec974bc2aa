"""``google_cloud_platform`` storage connections: resolved by the Google provider's own
``GoogleBaseHook`` (the real class) where it is installed, else by the provider's fallback, into the
variables ``deltalake`` reads and the settings of Spark's GCS connector. Nothing is replaced; every case here
signs in without a network call (a service account key is used as it is; impersonation and application
default credentials would ask Google for a token, so they are not run here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.exceptions import StorageCredentialsError
from airflow_provider_deltamerge.hooks.cloud_credentials import GCS_AUTH_TYPE, GCS_KEYFILE
from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options
from tests.conftest import make_table, upsert_from_extract
from tests.job.conftest import local_spark_connection
from tests.secret_leaks import event_log_conf, watched_merge

__all__ = ["local_spark_connection"]

GOOGLE_HOOK_MODULE = "airflow.providers.google.common.hooks.base_google"
PROVIDER_INSTALLED = importlib.util.find_spec("airflow.providers.google") is not None


@pytest.fixture(
    params=[
        pytest.param(
            "provider",
            marks=pytest.mark.skipif(
                not PROVIDER_INSTALLED, reason="apache-airflow-providers-google is not installed"
            ),
        ),
        "fallback",
    ]
)
def resolver(request, monkeypatch) -> str:
    """Who resolves the connection: the real Google provider, or this provider's fallback without it."""
    if request.param == "fallback":
        monkeypatch.setitem(sys.modules, GOOGLE_HOOK_MODULE, None)
    return str(request.param)


@pytest.fixture(scope="module")
def key() -> dict[str, str]:
    """A service account key as Google Cloud's console creates one, with a real RSA private key."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return {
        "type": "service_account",
        "project_id": "lake-project",
        "private_key_id": "0123456789abcdef0123456789abcdef01234567",
        "private_key": pem,
        "client_email": "lake-writer@lake-project.iam.gserviceaccount.com",
        "client_id": "112233445566778899000",
        "token_uri": "https://oauth2.googleapis.com/token",
    }


def google_connection(monkeypatch, **extra: object) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE_GCS", json.dumps({"conn_type": "google_cloud_platform", "extra": extra})
    )
    return "lake_gcs"


def pem_body(key: dict[str, str]) -> str:
    """The private key's base64 body, the part a leak would show whatever its framing."""
    return "".join(key["private_key"].splitlines()[1:-1])


def test_a_keyfile_json_is_handed_on_as_the_service_account_key(monkeypatch, resolver, key):
    conn_id = google_connection(monkeypatch, keyfile_dict=json.dumps(key))

    options = connection_storage_options(conn_id)

    assert list(options) == ["GOOGLE_SERVICE_ACCOUNT_KEY"]
    assert json.loads(options["GOOGLE_SERVICE_ACCOUNT_KEY"]) == key


def test_a_keyfile_path_is_read_into_the_key(monkeypatch, resolver, key, tmp_path):
    keyfile = tmp_path / "lake-writer.json"
    keyfile.write_text(json.dumps(key))
    conn_id = google_connection(monkeypatch, key_path=str(keyfile))

    options = connection_storage_options(conn_id)

    assert json.loads(options["GOOGLE_SERVICE_ACCOUNT_KEY"]) == key


def test_the_key_and_its_private_key_alone_are_masked_in_logs(monkeypatch, resolver, key, tmp_path):
    # From a Keyfile Path: Airflow masks the connection's own fields, not a file's contents.
    from airflow.sdk.log import redact

    keyfile = tmp_path / "lake-writer.json"
    keyfile.write_text(json.dumps(key))
    options = connection_storage_options(google_connection(monkeypatch, key_path=str(keyfile)))

    line = f"env {options['GOOGLE_SERVICE_ACCOUNT_KEY']} pem {key['private_key']} id {key['private_key_id']}"
    masked = str(redact(line))
    assert pem_body(key) not in masked and key["private_key_id"] not in masked


def test_an_anonymous_connection_skips_signing(monkeypatch, resolver):
    conn_id = google_connection(monkeypatch, is_anonymous=True)

    assert connection_storage_options(conn_id) == {"GOOGLE_SKIP_SIGNATURE": "true"}


@pytest.mark.parametrize(
    ("broken", "fallback_says"),
    [
        ('{"type": "service_account", "private_key": ', "it is not JSON (line 1, column 44)"),
        ("PRIVATE-KEY", "its private_key is not an unencrypted PEM key"),
    ],
    ids=["truncated-json", "not-a-pem-key"],
)
def test_a_broken_keyfile_is_a_storage_credentials_error_without_the_key(
    monkeypatch, resolver, key, broken, fallback_says
):
    # A key cut short when it was pasted, and a key whose private_key is not a key at all.
    keyfile = broken if broken.startswith("{") else json.dumps({**key, "private_key": broken})
    conn_id = google_connection(monkeypatch, keyfile_dict=keyfile)

    with pytest.raises(StorageCredentialsError, match="lake_gcs") as raised:
        connection_storage_options(conn_id)

    message = str(raised.value)
    if resolver == "provider":
        assert "The Google provider could not get the credentials of connection 'lake_gcs'" in message
        assert "Check its Keyfile JSON" in message
    else:
        assert (
            f"The Keyfile JSON of connection 'lake_gcs' does not give a service account key ({fallback_says})"
            in (message)
        )
    assert pem_body(key) not in message and "PRIVATE-KEY" not in message


def test_without_the_google_provider_an_impersonation_chain_says_what_to_install(monkeypatch, key):
    monkeypatch.setitem(sys.modules, GOOGLE_HOOK_MODULE, None)
    conn_id = google_connection(
        monkeypatch,
        keyfile_dict=json.dumps(key),
        impersonation_chain="lake-writer@lake-project.iam.gserviceaccount.com",
    )

    with pytest.raises(StorageCredentialsError) as raised:
        connection_storage_options(conn_id)

    assert raised.value.error_class == "DELTAMERGE_STORAGE_PROVIDER_MISSING"
    assert raised.value.message == (
        "Connection 'lake_gcs' signs in with impersonation_chain, which only the Google provider's hook "
        "resolves. Install it (pip install 'airflow-provider-deltamerge[google]', i.e. "
        "apache-airflow-providers-google), or give the connection a Keyfile JSON or Keyfile Path."
    )


@pytest.mark.slow
def test_the_spark_job_gets_the_key_as_a_keyfile_never_on_its_command_line_or_in_the_log(
    tmp_path, monkeypatch, local_spark_connection, key, caplog
):
    # A local merge with a google_cloud_platform storage connection: the GCS connector's settings reach
    # Spark (its event log lists them) while the key stays out of every command line, the event log and the
    # task log. The table is local, so no request goes to Google.
    monkeypatch.setitem(sys.modules, GOOGLE_HOOK_MODULE, None)  # the same on both sides; resolution is above
    conn_id = google_connection(monkeypatch, keyfile_dict=json.dumps(key))
    events = tmp_path / "events"
    events.mkdir()
    target = make_table(tmp_path / "orders")
    spec = upsert_from_extract(target, tmp_path / "extract.parquet", [(2, 5, "eu")])
    hook = DeltaMergeHook(
        local_spark_connection,
        storage_conn_id=conn_id,
        conf=event_log_conf(events),
    )
    with caplog.at_level("DEBUG"):
        merge = watched_merge(hook, spec, events)

    assert merge.metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    spark_properties = merge.properties("Spark Properties")
    assert spark_properties[GCS_AUTH_TYPE] == "SERVICE_ACCOUNT_JSON_KEYFILE"
    # The keyfile was the submission's private file, removed with its folder once the job ended.
    keyfile = Path(spark_properties[GCS_KEYFILE])
    assert keyfile.name == "deltamerge-gcs-key.json" and not keyfile.exists()
    for secret in (pem_body(key), key["private_key_id"]):
        assert merge.leaked(secret) == []
        assert secret not in caplog.text
