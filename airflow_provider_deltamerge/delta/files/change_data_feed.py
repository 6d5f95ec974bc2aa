"""The change data feed as a writer sees it (PROTOCOL.md "Add CDC File", Delta's ``CDCReader``).

With ``delta.enableChangeDataFeed`` on, a commit that rewrites files also adds change data files: the
changed rows with a ``_change_type`` of ``insert``, ``delete``, ``update_preimage`` or
``update_postimage``, under ``_change_data/``, named by ``cdc`` actions. A reader of the feed takes a
version's change files when it has any, else its added and removed files as inserts and deletes, which is
why a commit that only adds files (an insert-only merge) needs none.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_deltamerge.delta.log.snapshot import Snapshot
from airflow_provider_deltamerge.exceptions import ClauseResolutionError

ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
CHANGE_TYPE_COLUMN = "_change_type"
CHANGE_DATA_FOLDER = "_change_data"
INSERT = "insert"
DELETE = "delete"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"
# Columns the feed adds when it is read (CDCReader.cdcReservedColumnNames): a table may not have them.
RESERVED_COLUMNS = (CHANGE_TYPE_COLUMN, "_commit_version", "_commit_timestamp")


def writes_change_data(snapshot: Snapshot) -> bool:
    """Whether a merge into ``snapshot`` that rewrites files must write change data too."""
    return (snapshot.setting(ENABLE_CHANGE_DATA_FEED) or "").strip().lower() == "true"


def check_reserved_columns(columns: Sequence[str]) -> None:
    """Refuse a merge that would write a column the feed reserves into a change-data-feed table, as Delta's
    ``CDCReader.checkMetadataChange`` does (names compared exactly).

    Raises:
        ClauseResolutionError: Delta's RESERVED_CDC_COLUMNS_ON_WRITE.
    """
    reserved = [c for c in columns if c in RESERVED_COLUMNS]
    if reserved:
        raise ClauseResolutionError(
            f"The write contains reserved columns [{','.join(reserved)}] that are used internally as "
            "metadata for Change Data Feed. To write to the table either rename/drop these columns or "
            f"disable Change Data Feed on the table by setting {ENABLE_CHANGE_DATA_FEED} to false. The "
            "merge's schema evolution would add them: rename them in the source.",
            error_class="RESERVED_CDC_COLUMNS_ON_WRITE",
        )
