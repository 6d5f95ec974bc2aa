"""Checkpoints after a merge commit, when Delta would write one: every ``delta.checkpointInterval`` versions.

Readers (Delta, ``deltalake``, this engine's snapshot) replay the log from the newest checkpoint, so without
them every read of a much-merged table replays thousands of commit files. ``deltalake`` writes the
checkpoint (and ``_last_checkpoint``); then, like Delta, the expired log files are cleaned up by Delta's
rules (``delta/commit/log_cleanup.py``) unless ``delta.enableExpiredLogCleanup`` is false.
"""

from __future__ import annotations

import logging

from deltalake.exceptions import DeltaError
from obstore.exceptions import BaseError as StoreError

from airflow_provider_deltamerge.delta.commit.log_cleanup import clean_up_expired_logs
from airflow_provider_deltamerge.delta.commit.log_store import settle_local_modes
from airflow_provider_deltamerge.delta.log.snapshot import Snapshot, open_table

log = logging.getLogger(__name__)

# Delta's default for delta.checkpointInterval (DeltaConfigs.CHECKPOINT_INTERVAL).
DEFAULT_CHECKPOINT_INTERVAL = 10
# Writer feature checkpointProtection (protocol_rfcs/checkpoint-protection.md): checkpoints and commits
# before this version may be cleaned up only together with all history up to it, and only by a writer that
# supports every protocol in it; checkpoints before it only by one that supports its protocol.
CHECKPOINT_PROTECTION = "checkpointProtection"
PROTECTED_BEFORE_KEY = "delta.requireCheckpointProtectionBeforeVersion"


def checkpoint_due(snapshot: Snapshot, version: int) -> bool:
    """Whether Delta checkpoints after committing ``version`` to the table ``snapshot`` read.

    On every table, as Delta does: ``deltalake``'s checkpoint keeps the files' row ids and commit versions
    and the ``delta.rowTracking`` domain of a table with row tracking, and on a table with v2 checkpoints it
    writes a classic-named V2 checkpoint, with its checkpointMetadata action (Delta writes UUID-named ones;
    the protocol allows both).
    """
    # Under checkpoint protection only versions from the protected one on (a merge commits past it).
    if protects_checkpoints(snapshot) and version < int(snapshot.setting(PROTECTED_BEFORE_KEY) or 0):
        return False
    interval = int(snapshot.setting("delta.checkpointInterval") or DEFAULT_CHECKPOINT_INTERVAL)
    return version > 0 and version % max(interval, 1) == 0


def protects_checkpoints(snapshot: Snapshot) -> bool:
    return CHECKPOINT_PROTECTION in snapshot.protocol.writer_features


def write_checkpoint_if_due(snapshot: Snapshot, version: int) -> None:
    """Checkpoint ``version`` when it is due. A failure only warns: the commit stands, and so does the log."""
    if not checkpoint_due(snapshot, version):
        return
    try:
        table = open_table(snapshot.table_uri, version)
        table.create_checkpoint()
        log_folder = f"{snapshot.table_uri.rstrip('/')}/_delta_log"
        settle_local_modes(log_folder, (f"{version:020d}.checkpoint.parquet", "_last_checkpoint"))
    except (DeltaError, OSError) as err:
        log.warning("Committed version %d of %s; its checkpoint failed: %s", version, snapshot.table_uri, err)
        return
    log.info("Checkpoint written at version %d", version)
    protected = int(snapshot.setting(PROTECTED_BEFORE_KEY) or 0) if protects_checkpoints(snapshot) else None
    try:
        clean_up_expired_logs(snapshot.table_uri, dict(snapshot.configuration), protected_before=protected)
    except (
        StoreError,
        OSError,
        ValueError,
    ) as err:  # a cleanup is optional: the next checkpoint's tries again
        log.warning(
            "Checkpointed version %d of %s; its log cleanup failed: %s", version, snapshot.table_uri, err
        )
