"""Object-store credentials from an Airflow connection, as environment variables for the merge job.

Spark's s3a/abfs/gcs clients and ``deltalake`` all read these variables, so the credentials never enter the
merge spec, never stand on the spark-submit command line in client mode, and every secret value is
registered with Airflow's log masker before anything could print it. The sensor and its trigger resolve the
same connection, so a DAG file names a connection id and holds no secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.providers.common.compat.sdk import BaseHook
from airflow.sdk.log import mask_secret

from airflow_provider_deltamerge.exceptions import StorageCredentialsError

# Connection extras by the variables they feed, when the Amazon provider is not installed.
_AWS_EXTRAS = {
    "aws_session_token": "AWS_SESSION_TOKEN",
    "region_name": "AWS_REGION",
    "endpoint_url": "AWS_ENDPOINT_URL",
}
# Where a store is and whose it is, not how to get in: every other value is registered as a secret, whatever
# its name (an ``env`` extra may carry GCS_HMAC_KEY or any other).
_PUBLIC_VARIABLES = {"AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AZURE_STORAGE_ACCOUNT_NAME"}


def connection_storage_options(conn_id: str | None) -> dict[str, str]:
    """The storage credentials of connection ``conn_id`` (none without one), as ``deltalake`` options."""
    return {} if conn_id is None else storage_environment(BaseHook.get_connection(conn_id))


def storage_environment(connection: Any) -> dict[str, str]:
    """The environment that carries ``connection``'s storage credentials (aws, wasb, or any ``env`` extra).

    A connection of another type may list variables under its ``env`` extra, e.g.
    ``{"env": {"GOOGLE_APPLICATION_CREDENTIALS": "/secrets/key.json"}}``.

    Raises:
        StorageCredentialsError: the Amazon provider could not obtain the connection's credentials.
    """
    extra: Mapping[str, Any] = connection.extra_dejson
    env: dict[str, str] = {}
    if connection.conn_type == "aws":
        env.update(_aws_environment(connection))
    elif connection.conn_type == "wasb":
        env.update(
            AZURE_STORAGE_ACCOUNT_NAME=connection.login or "",
            AZURE_STORAGE_ACCOUNT_KEY=connection.password or "",
        )
    env.update({str(k): str(v) for k, v in dict(extra.get("env") or {}).items()})
    env = {k: v for k, v in env.items() if v}
    for variable, value in env.items():
        if variable not in _PUBLIC_VARIABLES:
            mask_secret(value, variable)
    return env


def _aws_environment(connection: Any) -> dict[str, str]:
    """An ``aws`` connection's credentials, resolved by the Amazon provider's ``AwsBaseHook`` when installed.

    The hook knows every way the Amazon provider's own operators authenticate (keys, ``role_arn``,
    ``profile_name``, web identity, the instance's role); the job gets the resulting (possibly temporary)
    keys. Without that provider, the connection's login and password are the key pair.
    """
    try:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook
    except ImportError:
        extra = connection.extra_dejson
        env = {
            "AWS_ACCESS_KEY_ID": connection.login or "",
            "AWS_SECRET_ACCESS_KEY": connection.password or "",
        }
        env.update({variable: str(extra[key]) for key, variable in _AWS_EXTRAS.items() if extra.get(key)})
        return _with_plain_http(env)
    from botocore.exceptions import BotoCoreError, ClientError

    hook = AwsBaseHook(aws_conn_id=connection.conn_id)
    try:
        credentials = hook.get_credentials()
    except (BotoCoreError, ClientError) as err:
        # botocore's messages name the role and the service, never a key; still, only its kind is kept.
        raise StorageCredentialsError(
            f"The Amazon provider could not get the credentials of connection {connection.conn_id!r} "
            f"({type(err).__name__}). Check its login, password, role_arn or profile_name, and that the "
            "role may be assumed from here."
        ) from err
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


def _with_plain_http(env: dict[str, str]) -> dict[str, str]:
    """``env``, letting ``deltalake`` speak plain HTTP to an ``http://`` endpoint (a MinIO, say), which it
    refuses unless told; the connection's endpoint is the author's explicit choice."""
    if env.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        return {**env, "AWS_ALLOW_HTTP": "true"}
    return env
