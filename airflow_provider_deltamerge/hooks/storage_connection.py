"""The provider's own connection type, ``deltamerge_storage``: object-store credentials for any store, as the
environment variables Spark's clients and ``deltalake`` read.

An ``aws``, ``wasb`` or ``google_cloud_platform`` connection is resolved by its own provider's hook
(``cloud_credentials.py``); this type is for the rest (an S3-compatible store with static keys, a key file
already on the workers, a token a secrets backend hands out): its one field, ``env``, is a JSON object of
variables, kept as a secret and masked in every log. The UI form shows just that field and a description;
``Test`` checks that the object parses and names variables.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import BaseHook

from airflow_provider_deltamerge.exceptions import StorageCredentialsError
from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options

CONNECTION_TYPE = "deltamerge_storage"


class DeltaStorageHook(BaseHook):
    """A ``deltamerge_storage`` connection: the variables of its ``env`` field, for the merge and the sensor.

    Operators and sensors take such a connection's id as ``storage_conn_id`` like any other.
    """

    conn_name_attr = "storage_conn_id"
    default_conn_name = "deltamerge_storage_default"
    conn_type = CONNECTION_TYPE
    hook_name = "Delta Lake storage"

    def __init__(self, storage_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.storage_conn_id = storage_conn_id

    def get_conn(self) -> dict[str, str]:
        """The connection's variables (every value but a region, endpoint or account name masked)."""
        return connection_storage_options(self.storage_conn_id)

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's connection test: the variables parse; nothing is sent to a store."""
        try:
            names = sorted(self.get_conn())
        except StorageCredentialsError as err:
            return False, str(err)
        if not names:
            return False, "The connection sets no variable: put a JSON object of them in its env field."
        return True, f"Sets {', '.join(names)}."
