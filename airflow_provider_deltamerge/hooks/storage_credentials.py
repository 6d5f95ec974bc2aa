"""Object-store credentials from an Airflow connection, as environment variables for the merge job.

Spark's s3a/abfs/gcs clients and ``deltalake`` all read these variables, so the credentials never enter the
merge spec, never stand on the spark-submit command line in client mode, and every secret value is
registered with Airflow's log masker before anything could print it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk.log import mask_secret

# Connection extras by the variables they feed; the connection's login and password are mapped per type.
_AWS_EXTRAS = {
    "aws_session_token": "AWS_SESSION_TOKEN",
    "region_name": "AWS_REGION",
    "endpoint_url": "AWS_ENDPOINT_URL",
}
# Where a store is and whose it is, not how to get in: every other value is registered as a secret, whatever
# its name (an ``env`` extra may carry GCS_HMAC_KEY or any other).
_PUBLIC_VARIABLES = {"AWS_REGION", "AWS_ENDPOINT_URL", "AZURE_STORAGE_ACCOUNT_NAME"}


def storage_environment(connection: Any) -> dict[str, str]:
    """The environment that carries ``connection``'s storage credentials (aws, wasb, or any ``env`` extra).

    A connection of another type may list variables under its ``env`` extra, e.g.
    ``{"env": {"GOOGLE_APPLICATION_CREDENTIALS": "/secrets/key.json"}}``.
    """
    extra: Mapping[str, Any] = connection.extra_dejson
    env: dict[str, str] = {}
    if connection.conn_type == "aws":
        env.update(AWS_ACCESS_KEY_ID=connection.login or "", AWS_SECRET_ACCESS_KEY=connection.password or "")
        env.update({variable: str(extra[key]) for key, variable in _AWS_EXTRAS.items() if extra.get(key)})
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
