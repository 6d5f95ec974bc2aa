"""Cloud storage connections resolved by the cloud providers' own hooks, where those providers are installed.

The hooks know every way their providers' operators authenticate (assumed roles, profiles, web and workload
identity, service principals, SAS tokens, connection strings, service account keys, impersonation chains);
what they resolve is handed on as the variables Spark's clients and ``deltalake`` read. Without a provider,
the connection's login and password are the key pair (a Google connection's key: its Keyfile JSON or Path),
as before such hooks were used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from airflow.providers.common.compat.sdk import AirflowException
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from airflow_provider_deltamerge.exceptions import StorageCredentialsError
from airflow_provider_deltamerge.spec.transport import write_private

# Connection extras by the variables they feed, when the Amazon provider is not installed.
_AWS_EXTRAS = {
    "aws_session_token": "AWS_SESSION_TOKEN",
    "region_name": "AWS_REGION",
    "endpoint_url": "AWS_ENDPOINT_URL",
}
# The OAuth scope of Azure Storage, for which a token credential is asked.
_AZURE_STORAGE_SCOPE = "https://storage.azure.com/.default"
# The variables deltalake and obstore read for an Azure Blob service other than Azure's own (Azurite, say).
AZURE_ENDPOINT = "AZURE_STORAGE_ENDPOINT"
AZURE_ALLOW_HTTP = "AZURE_ALLOW_HTTP"
# The variables deltalake and obstore read for Google Cloud Storage (object_store's GoogleConfigKey).
GOOGLE_KEY = "GOOGLE_SERVICE_ACCOUNT_KEY"
GOOGLE_TOKEN = "GOOGLE_BEARER_TOKEN"
GOOGLE_ANONYMOUS = "GOOGLE_SKIP_SIGNATURE"
GOOGLE_ALLOW_HTTP = "GOOGLE_ALLOW_HTTP"
# Where Google's own clients find a Cloud Storage emulator (fake-gcs-server, say); a connection names it in
# its env extra.
GOOGLE_EMULATOR = "STORAGE_EMULATOR_HOST"
# Ways of signing in of a google_cloud_platform connection that only the Google provider's hook resolves.
_GOOGLE_PROVIDER_FIELDS = (
    "key_secret_name",
    "impersonation_chain",
    "credential_config_file",
    "idp_issuer_url",
)
# Spark's GCS connector (3.x) reads a service account key only from a file, named by these settings.
GCS_AUTH_TYPE = "spark.hadoop.fs.gs.auth.type"
GCS_KEYFILE = "spark.hadoop.fs.gs.auth.service.account.json.keyfile"


def aws_environment(connection: Any) -> dict[str, str]:
    """An ``aws`` connection's credentials, resolved by the Amazon provider's ``AwsBaseHook``.

    The job gets the resulting (possibly temporary) keys; ``role_arn``, ``profile_name`` and web identity
    work as in the Amazon provider's own operators.
    """
    try:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook
    except ImportError:
        extra = connection.extra_dejson
        env = {"AWS_ACCESS_KEY_ID": connection.login or ""}
        env["AWS_SECRET_ACCESS_KEY"] = connection.password or ""
        env.update({variable: str(extra[key]) for key, variable in _AWS_EXTRAS.items() if extra.get(key)})
        return _with_plain_http(env)
    from botocore.exceptions import BotoCoreError, ClientError

    hook = AwsBaseHook(aws_conn_id=connection.conn_id)
    try:
        credentials = hook.get_credentials()
    except (BotoCoreError, ClientError) as err:
        raise _cannot_resolve(connection, "Amazon", err, "login, password, role_arn or profile_name") from err
    config = hook.conn_config
    return _with_plain_http(
        {
            "AWS_ACCESS_KEY_ID": credentials.access_key or "",
            "AWS_SECRET_ACCESS_KEY": credentials.secret_key or "",
            "AWS_SESSION_TOKEN": credentials.token or "",
            "AWS_REGION": config.region_name or "",
            "AWS_ENDPOINT_URL": config.endpoint_url or "",
        }
    )


def azure_environment(connection: Any) -> dict[str, str]:
    """A ``wasb`` connection's credentials, resolved by the Azure provider's ``WasbHook``.

    The hook builds its client as the Azure provider's operators do (connection string, shared access key,
    SAS token, service principal, managed or workload identity, account key); its credential becomes an
    account key, a SAS token, or an OAuth token for Azure Storage. Such a token lasts about an hour: enough
    for the sensor, which resolves the connection before each poll; give a longer merge a key or a SAS.
    """
    try:
        from airflow.providers.microsoft.azure.hooks.wasb import WasbHook
    except ImportError:
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": connection.login or "",
            "AZURE_STORAGE_ACCOUNT_KEY": connection.password or "",
            **azure_endpoint(connection.host or "", connection.login or ""),
        }
    from azure.core.exceptions import AzureError

    client = WasbHook(wasb_conn_id=connection.conn_id).get_conn()
    credential = client.credential
    env = {"AZURE_STORAGE_ACCOUNT_NAME": client.account_name or ""}
    env.update(azure_endpoint(client.url, client.account_name or ""))
    # The credential's kinds are told apart by what they hold: the shared-key one is a private class.
    if hasattr(credential, "account_key"):
        env["AZURE_STORAGE_ACCOUNT_KEY"] = credential.account_key
    elif hasattr(credential, "signature"):
        env["AZURE_STORAGE_SAS_KEY"] = credential.signature
    elif hasattr(credential, "get_token"):
        try:
            env["AZURE_STORAGE_TOKEN"] = credential.get_token(_AZURE_STORAGE_SCOPE).token
        except AzureError as err:
            raise _cannot_resolve(connection, "Azure", err, "tenant_id, login and password") from err
    elif query := urlsplit(client.url).query:  # a SAS URL given as the connection's sas_token
        env["AZURE_STORAGE_SAS_KEY"] = query
    return env


def azure_endpoint(url: str, account: str) -> dict[str, str]:
    """The Blob endpoint ``url`` as ``deltalake``'s variables where it is not Azure's public one for
    ``account`` (an emulator, a sovereign cloud), with plain HTTP allowed to an ``http://`` one (Azurite's);
    none for Azure's own or no URL."""
    parts = urlsplit(url)
    if not parts.hostname or parts.hostname == f"{account}.blob.core.windows.net":
        return {}
    env = {AZURE_ENDPOINT: url.rstrip("/")}
    if parts.scheme == "http":
        env[AZURE_ALLOW_HTTP] = "true"
    return env


def google_environment(connection: Any) -> dict[str, str]:
    """A ``google_cloud_platform`` connection's credentials, resolved by the Google provider's
    ``GoogleBaseHook``.

    A service account key (Keyfile Path or Keyfile JSON) is handed on as the key itself, which does not
    expire. Whatever else the hook builds (a key from Secret Manager, an impersonation chain, a credential
    configuration file, the machine's application default credentials) is refreshed into an OAuth token, as
    the provider's own operators do. Such a token lasts about an hour and nobody renews it: enough for the
    sensor, which resolves the connection before each poll; a merge still running after that hour fails at
    its next request to the store with an authentication error (a retry starts again with a new token). Give
    a longer merge a key.
    """
    try:
        from airflow.providers.google.common.hooks.base_google import GoogleBaseHook
    except ImportError:
        return _google_without_provider(connection)
    from google.auth.credentials import AnonymousCredentials
    from google.auth.exceptions import GoogleAuthError
    from google.auth.transport.requests import Request
    from google.oauth2.service_account import Credentials as ServiceAccountCredentials

    hook = GoogleBaseHook(gcp_conn_id=connection.conn_id)
    try:
        credentials = hook.get_credentials()
        if isinstance(credentials, AnonymousCredentials):
            return {GOOGLE_ANONYMOUS: "true"}
        if isinstance(credentials, ServiceAccountCredentials):
            # The hook's own way of handing its key to other programs: the Keyfile Path, or the Keyfile JSON
            # in a temporary file; none for a key from Secret Manager, which signs in below instead.
            with hook.provide_gcp_credential_file_as_context() as key_file:
                if key_file:
                    return {GOOGLE_KEY: Path(key_file).read_text(encoding="utf-8")}
        credentials.refresh(Request())
    except (AirflowException, GoogleAuthError, OSError, ValueError) as err:
        raise _cannot_resolve(
            connection,
            "Google",
            err,
            "Keyfile JSON, Keyfile Path, Keyfile Secret Name or Impersonation Chain",
        ) from err
    return {GOOGLE_TOKEN: credentials.token or ""}


def gcs_keyfile_conf(environment: Mapping[str, str], folder: Path) -> dict[str, str]:
    """Spark conf pointing the GCS connector at ``environment``'s service account key, which is written to an
    owner-only file in ``folder``; none without a key (a token reaches ``deltalake`` only: the connector takes
    tokens only from a Java ``AccessTokenProvider`` class)."""
    key = environment.get(GOOGLE_KEY)
    if not key or environment.get(GOOGLE_EMULATOR):
        return {}
    keyfile = write_private(folder / "deltamerge-gcs-key.json", key)
    return {GCS_AUTH_TYPE: "SERVICE_ACCOUNT_JSON_KEYFILE", GCS_KEYFILE: str(keyfile)}


def with_google_emulator(env: dict[str, str]) -> dict[str, str]:
    """``env``, pointing ``deltalake`` and ``obstore`` at the Cloud Storage emulator it names, if any.

    Neither reads ``STORAGE_EMULATOR_HOST``; ``object_store`` takes an endpoint only from a service account
    key's ``gcs_base_url``, with ``disable_oauth`` for a server that checks no credential. Such a key, with
    no private key in it, replaces the connection's own: an emulator checks none.
    """
    emulator = env.get(GOOGLE_EMULATOR, "").rstrip("/")
    if not emulator:
        return env
    key = {"gcs_base_url": emulator, "disable_oauth": True}
    key.update(dict.fromkeys(("client_email", "private_key", "private_key_id"), ""))
    env = {name: value for name, value in env.items() if name not in (GOOGLE_TOKEN, GOOGLE_ANONYMOUS)}
    env[GOOGLE_KEY] = json.dumps(key)
    if emulator.startswith("http://"):
        env[GOOGLE_ALLOW_HTTP] = "true"
    return env


def _google_without_provider(connection: Any) -> dict[str, str]:
    """The connection's Keyfile JSON, or the file at its Keyfile Path, is the key; no key at all leaves the
    machine's application default credentials, which ``deltalake`` and Spark's GCS connector find themselves.

    Raises:
        StorageCredentialsError: the connection signs in a way only the Google provider resolves, or its key
            is not a service account key.
    """
    extra = connection.extra_dejson

    def field(name: str) -> Any:
        # The connection form of the Google provider stores its fields under a prefix (older Airflow).
        return extra.get(name) or extra.get(f"extra__google_cloud_platform__{name}")

    if needs_provider := [name for name in _GOOGLE_PROVIDER_FIELDS if field(name)]:
        raise StorageCredentialsError(
            f"Connection {connection.conn_id!r} signs in with {', '.join(needs_provider)}, which only the "
            "Google provider's hook resolves. Install it (pip install 'airflow-provider-deltamerge[google]', "
            "i.e. apache-airflow-providers-google), or give the connection a Keyfile JSON or Keyfile Path.",
            error_class="DELTAMERGE_STORAGE_PROVIDER_MISSING",
        )
    if field("is_anonymous"):
        return {GOOGLE_ANONYMOUS: "true"}
    if keyfile := field("keyfile_dict"):
        key, source = keyfile if isinstance(keyfile, str) else json.dumps(keyfile), "Keyfile JSON"
    elif key_path := field("key_path"):
        try:
            key, source = Path(key_path).read_text(encoding="utf-8"), "Keyfile Path"
        except OSError as err:
            raise _not_a_key(
                connection, "Keyfile Path", f"the file cannot be read: {type(err).__name__}"
            ) from None
    else:
        return {}
    _check_service_account_key(connection, key, source)
    return {GOOGLE_KEY: key}


def _check_service_account_key(connection: Any, key: str, source: str) -> None:
    """Refuse, here and not in the Spark job, a key Google would refuse; the key itself is never quoted."""
    try:
        info = json.loads(key)
    except json.JSONDecodeError as err:
        raise _not_a_key(
            connection, source, f"it is not JSON (line {err.lineno}, column {err.colno})"
        ) from None
    if not isinstance(info, dict) or info.get("type") != "service_account":
        raise _not_a_key(connection, source, "its type is not service_account")
    if missing := [name for name in ("client_email", "private_key") if not info.get(name)]:
        raise _not_a_key(connection, source, f"it has no {' and no '.join(missing)}")
    try:
        load_pem_private_key(str(info["private_key"]).encode(), password=None)
    except (ValueError, TypeError):
        raise _not_a_key(connection, source, "its private_key is not an unencrypted PEM key") from None


def _not_a_key(connection: Any, source: str, why: str) -> StorageCredentialsError:
    return StorageCredentialsError(
        f"The {source} of connection {connection.conn_id!r} does not give a service account key ({why}). "
        "Give the JSON key file Google Cloud creates for a service account.",
        error_class="DELTAMERGE_INVALID_STORAGE_CONNECTION",
    )


def _cannot_resolve(connection: Any, provider: str, err: Exception, fields: str) -> StorageCredentialsError:
    # The cloud's messages name roles and services, not keys; still, only the error's kind is kept.
    return StorageCredentialsError(
        f"The {provider} provider could not get the credentials of connection {connection.conn_id!r} "
        f"({type(err).__name__}). Check its {fields}, and that this machine may use them.",
        error_class="DELTAMERGE_STORAGE_CREDENTIALS_UNAVAILABLE",
    )


def _with_plain_http(env: dict[str, str]) -> dict[str, str]:
    """``env``, letting ``deltalake`` speak plain HTTP to an ``http://`` endpoint (a MinIO, say), which it
    refuses unless told; the connection's endpoint is the author's explicit choice."""
    if env.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        return {**env, "AWS_ALLOW_HTTP": "true"}
    return env
