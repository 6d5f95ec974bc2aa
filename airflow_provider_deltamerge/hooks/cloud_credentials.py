"""Cloud storage connections resolved by the cloud providers' own hooks, where those providers are installed.

The hooks know every way their providers' operators authenticate (assumed roles, profiles, web and workload
identity, service principals, SAS tokens, connection strings); what they resolve is handed on as the
variables Spark's clients and ``deltalake`` read. Without a provider, the connection's login and password
are the key pair, as before such hooks were used.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from airflow_provider_deltamerge.exceptions import StorageCredentialsError

# Connection extras by the variables they feed, when the Amazon provider is not installed.
_AWS_EXTRAS = {
    "aws_session_token": "AWS_SESSION_TOKEN",
    "region_name": "AWS_REGION",
    "endpoint_url": "AWS_ENDPOINT_URL",
}
# The OAuth scope of Azure Storage, for which a token credential is asked.
_AZURE_STORAGE_SCOPE = "https://storage.azure.com/.default"


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
        }
    from azure.core.exceptions import AzureError

    client = WasbHook(wasb_conn_id=connection.conn_id).get_conn()
    credential = client.credential
    env = {"AZURE_STORAGE_ACCOUNT_NAME": client.account_name or ""}
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


def _cannot_resolve(connection: Any, provider: str, err: Exception, fields: str) -> StorageCredentialsError:
    # The cloud's messages name roles and services, not keys; still, only the error's kind is kept.
    return StorageCredentialsError(
        f"The {provider} provider could not get the credentials of connection {connection.conn_id!r} "
        f"({type(err).__name__}). Check its {fields}, and that this machine may use them."
    )


def _with_plain_http(env: dict[str, str]) -> dict[str, str]:
    """``env``, letting ``deltalake`` speak plain HTTP to an ``http://`` endpoint (a MinIO, say), which it
    refuses unless told; the connection's endpoint is the author's explicit choice."""
    if env.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        return {**env, "AWS_ALLOW_HTTP": "true"}
    return env
