"""A store's refusal or silence while the log or a source is read, as a product error: which store, which
connection, what the store answered, what to check; never the client's whole chain of messages, which
names internal URLs and the access key's id.

A wrong key and a missing bucket come back on every try (final); a store that does not answer or answers
5xx may not next time (transient, Airflow retries).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from airflow_provider_deltamerge.exceptions import StorageAccessError

ACCESS_DENIED = "DELTAMERGE_STORAGE_ACCESS_DENIED"
BUCKET_NOT_FOUND = "DELTAMERGE_STORAGE_BUCKET_NOT_FOUND"
STORE_UNAVAILABLE = "DELTAMERGE_STORAGE_UNAVAILABLE"
T = TypeVar("T")

_DENIED = re.compile(
    r"\b40[13] |lacked the necessary privileges|AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|"
    r"AuthorizationFailure|AuthenticationFailed|InvalidAuthenticationInfo|Unauthenticated|PermissionDenied"
)
_NO_BUCKET = re.compile(r"NoSuchBucket|ContainerNotFound|bucket does not exist|container does not exist")
_UNAVAILABLE = re.compile(
    r"Connection refused|tcp connect error|dns error|timed out|[Tt]imeout|connection (?:reset|closed)|"
    r"\b5\d\d |SlowDown|ServiceUnavailable|InternalError"
)
# What the store said: its HTTP status line and its error code, as the client quotes them.
_STATUS = re.compile(r"\b([1-5]\d\d [A-Z][A-Za-z ]*[a-z])")
_CODE = re.compile(r"<Code>(\w+)</Code>")
_CAUSE = re.compile(r"(Connection refused|dns error|timed out|connection reset|connection closed)")


def store_error(err: BaseException, location: str, conn_id: str | None) -> StorageAccessError | None:
    """``err`` (raised by ``deltalake`` or ``obstore`` reaching ``location`` with connection ``conn_id``'s
    credentials, or the environment's) as a product error; None when it is not a store's refusal or silence
    (a local file missing, a log the reader cannot parse)."""
    if "://" not in location or location.startswith("file:"):
        return None
    text = str(err)
    said = ", ".join(dict.fromkeys(_STATUS.findall(text) + _CODE.findall(text) + _CAUSE.findall(text)))
    said = f" ({said})" if said else ""
    connection = f"connection {conn_id!r}" if conn_id else "the credentials in this process's environment"
    if _NO_BUCKET.search(text):
        return StorageAccessError(
            f"The bucket or container of {location} does not exist, or {connection} cannot see it{said}. "
            "Check the path, and the connection's endpoint and region; the task is not retried.",
            error_class=BUCKET_NOT_FOUND,
        )
    if _DENIED.search(text):
        return StorageAccessError(
            f"The store refused {connection} reading {location}{said}. Check the connection's keys and "
            "their rights on the bucket or container; the task is not retried.",
            error_class=ACCESS_DENIED,
        )
    if _UNAVAILABLE.search(text):
        return StorageAccessError(
            f"The store of {location} did not answer or failed{said}, with {connection}. Check that the "
            "connection's endpoint is right and reachable from this worker; Airflow retries the task.",
            error_class=STORE_UNAVAILABLE,
        )
    return None


@contextmanager
def reading_store(location: str, conn_id: str | None) -> Iterator[None]:
    """Raise a store's refusal or silence met in the block as ``store_error`` says it.

    Raises:
        StorageAccessError: the store refused the credentials, has no such bucket, or did not answer.
    """
    from deltalake.exceptions import DeltaError
    from obstore.exceptions import BaseError

    try:
        yield
    except (OSError, DeltaError, BaseError) as err:
        error = store_error(err, location, conn_id)
        if error is None:
            raise
        raise error from None  # the client's chain names internal URLs and the key's id


def guarded(read: Callable[..., T], conn_id: str | None) -> Callable[..., T]:
    """``read`` (whose first argument is the location it reads) raising a store's refusal or silence as
    ``store_error`` says it."""

    def guarded_read(location: str, *args: Any, **kwargs: Any) -> T:
        with reading_store(location, conn_id):
            return read(location, *args, **kwargs)

    return guarded_read
