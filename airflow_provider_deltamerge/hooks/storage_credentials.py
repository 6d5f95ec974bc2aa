"""Object-store credentials from an Airflow connection, as environment variables for the merge job.

Spark's s3a/abfs/gcs clients and ``deltalake`` all read these variables, so the credentials never enter the
merge spec, never stand on the spark-submit command line in client mode, and every secret value is
registered with Airflow's log masker before anything could print it. The sensor and its trigger resolve the
same connection, so a DAG file names a connection id and holds no secret.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from airflow.providers.common.compat.sdk import BaseHook
from airflow.sdk.log import mask_secret

from airflow_provider_deltamerge.exceptions import StorageCredentialsError
from airflow_provider_deltamerge.hooks.cloud_credentials import (
    AZURE_ALLOW_HTTP,
    AZURE_ENDPOINT,
    GOOGLE_ALLOW_HTTP,
    GOOGLE_ANONYMOUS,
    GOOGLE_EMULATOR,
    GOOGLE_KEY,
    aws_environment,
    azure_environment,
    google_environment,
    with_google_emulator,
)

# The connection types whose own providers' hooks resolve them (hooks/cloud_credentials.py).
_CLOUD_ENVIRONMENTS = {
    "aws": aws_environment,
    "wasb": azure_environment,
    "google_cloud_platform": google_environment,
}
# Where a store is and whose it is, not how to get in: every other value is registered as a secret, whatever
# its name (an ``env`` extra may carry GCS_HMAC_KEY or any other).
_PUBLIC_VARIABLES = {
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ALLOW_HTTP",
    "AZURE_STORAGE_ACCOUNT_NAME",
    AZURE_ENDPOINT,
    AZURE_ALLOW_HTTP,
    GOOGLE_ANONYMOUS,
    GOOGLE_ALLOW_HTTP,
    GOOGLE_EMULATOR,
}


def connection_storage_options(conn_id: str | None) -> dict[str, str]:
    """The storage credentials of connection ``conn_id`` (none without one), as ``deltalake`` options."""
    return {} if conn_id is None else storage_environment(BaseHook.get_connection(conn_id))


def storage_environment(connection: Any) -> dict[str, str]:
    """The environment that carries ``connection``'s storage credentials (aws, wasb, google_cloud_platform, or
    any ``env`` extra).

    A connection of another type may list variables under its ``env`` extra, e.g.
    ``{"env": {"GOOGLE_APPLICATION_CREDENTIALS": "/secrets/key.json"}}`` (the ``deltamerge_storage`` type's
    form keeps that object as JSON text); they are added to those of a cloud provider's connection too.

    Raises:
        StorageCredentialsError: the cloud provider's hook could not obtain the connection's credentials,
            or the ``env`` extra is not an object of variables.
    """
    extra: Mapping[str, Any] = connection.extra_dejson
    cloud = _CLOUD_ENVIRONMENTS.get(connection.conn_type)
    env = cloud(connection) if cloud else {}
    env.update(_env_field(connection, extra.get("env")))
    env = with_google_emulator({k: v for k, v in env.items() if v})
    for variable, value in env.items():
        if variable not in _PUBLIC_VARIABLES:
            # Unnamed: given a name, the masker skips values whose name it does not find sensitive
            # (AZURE_STORAGE_ACCOUNT_KEY, GCS_HMAC_KEY), and here the name does not decide.
            mask_secret(value)
    if GOOGLE_KEY in env:
        _mask_private_key(env[GOOGLE_KEY])
    return env


def _mask_private_key(key: str) -> None:
    """Register a key JSON's private_key (and its id) alone too, as a log shows it once the JSON is parsed
    (newlines, not \\n); a key that is not JSON (from an env extra) is left to Google's clients to refuse."""
    with suppress(json.JSONDecodeError):
        mask_secret(json.loads(key))


def _env_field(connection: Any, value: Any) -> dict[str, str]:
    """The variables of an ``env`` extra: an object, or JSON text of one (as the connection form keeps it)."""
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            # The text is a secret: only where it stops parsing is said, never what it holds.
            raise _not_an_object(
                connection, f"it is not JSON (line {err.lineno}, column {err.colno})"
            ) from None
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise _not_an_object(connection, f"it is a JSON {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items()}


def _not_an_object(connection: Any, why: str) -> StorageCredentialsError:
    return StorageCredentialsError(
        f"The env field of connection {connection.conn_id!r} must be a JSON object of environment variables "
        f'({why}), e.g. {{"GOOGLE_APPLICATION_CREDENTIALS": "/secrets/key.json"}}.',
        error_class="DELTAMERGE_INVALID_STORAGE_CONNECTION",
    )
