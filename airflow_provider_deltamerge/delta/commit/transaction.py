"""The one atomic commit of a merge: Delta's MERGE actions in one put-if-absent of the next version's commit
file, and rebasing over concurrent commits that cannot change the merge's answer."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction
from obstore.exceptions import BaseError as ObstoreError

from airflow_provider_deltamerge.delta.commit.added_files import ChangeFile, WrittenFile
from airflow_provider_deltamerge.delta.commit.checkpoints import write_checkpoint_if_due
from airflow_provider_deltamerge.delta.commit.commit_actions import (
    IN_COMMIT_TIMESTAMPS,
    MergeCommitActions,
    TableMetadata,
)
from airflow_provider_deltamerge.delta.commit.conflicts import (
    AlreadyCommitted,
    ReadSet,
    Rebase,
    Rerun,
    check_winning_commits,
)
from airflow_provider_deltamerge.delta.commit.log_store import LogStore, commit_file, log_store
from airflow_provider_deltamerge.delta.format.column_mapping import maps_columns
from airflow_provider_deltamerge.delta.format.provenance import COMMIT_INFO_KEY
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.row_tracking import high_water_mark, tracks_rows
from airflow_provider_deltamerge.delta.log.snapshot import DataFile, Snapshot, open_table
from airflow_provider_deltamerge.delta.log.table_features import unsupported_features_message
from airflow_provider_deltamerge.exceptions import MergeCommitError, TargetTableError

log = logging.getLogger(__name__)

# How many times the same actions are recommitted on top of newer versions before giving up.
MAX_REBASES = 50


@dataclass(frozen=True)
class Committed:
    """The merge is in the log at ``version``, after rebasing over ``rebased_over`` (winning commits)."""

    version: int
    rebased_over: tuple[int, ...] = ()


CommitOutcome = Committed | Rerun | AlreadyCommitted


def commit_merge(
    snapshot: Snapshot,
    *,
    removed: Sequence[DataFile],
    added: Sequence[WrittenFile],
    operation_parameters: Mapping[str, str],
    operation_metrics: Mapping[str, int],
    info: Mapping[str, Any],
    read: ReadSet,
    same_run: Callable[[Mapping[str, Any]], bool],
    schema: str | None = None,
    engine_info: str = "",
    readded: Sequence[Mapping[str, Any]] = (),
    change_files: Sequence[ChangeFile] = (),
) -> CommitOutcome:
    """Commit ``removed`` and ``added`` as one new version on top of ``snapshot``, or say why not.

    ``readded`` are add actions of removed files coming back under new deletion vectors (made by
    ``deletion_vector_writes.write_vectors``), ``change_files`` the change data feed's files; both need
    this engine's own commit.

    The commit is one file written with a put-if-absent (``log_store.py``): Delta's MERGE actions, the
    new schema's metaData with them when schema evolution changed it (``schema``, Delta's JSON form). When
    another writer took the version, the winning commits are checked (``conflicts.check_winning_commits``)
    and the same actions are committed on top of them if none could change what this merge read (a winning
    commit that changed the schema always makes the merge run again). ``info`` must carry the job's
    submission id. A checkpoint follows every ``delta.checkpointInterval`` versions, as Delta writes them.

    Returns:
        ``Committed``; ``Rerun`` when a winning commit may change the merge's answer (nothing committed);
        ``AlreadyCommitted`` when a winning commit is this same merge.

    Raises:
        TargetTableError: the store has no conditional write this engine can use, and the commit needs one
            (a schema change that removes files; deletion vectors, column mapping or the change data feed:
            DELTA_UNSUPPORTED_FEATURES_FOR_WRITE); final, the same on every try.
        MergeCommitError: when the log refuses the commit for another reason, or the table keeps moving.
    """
    store = log_store(snapshot.table_uri)
    if store is None and schema is not None and removed:
        raise TargetTableError(
            f"The merge into {snapshot.table_uri} evolves the schema and rewrites files, which must land in "
            "one commit, and this store has no conditional write this engine can use (only deltalake's "
            "transaction, which cannot change the schema and remove files at once). Nothing was changed. Add "
            "the new columns first (ALTER TABLE ... ADD COLUMNS), then merge without schema evolution.",
            error_class="DELTAMERGE_SCHEMA_CHANGE_NEEDS_CONDITIONAL_WRITE",
        )
    if store is None and (readded or any(f.deletion_vector is not None for f in removed)):
        raise _unsupported_here(
            snapshot.table_uri,
            "deletionVectors",
            f"The merge into {snapshot.table_uri} rewrites files that carry deletion vectors, and this store "
            "has no conditional write this engine can use (deltalake's transaction cannot name a deletion "
            "vector in a remove action, so the old rows would stay). Nothing was changed. Purge the vectors "
            "first (REORG TABLE ... APPLY (PURGE)), or run the merge with the delta-spark backend.",
        )
    if store is None and maps_columns(dict(snapshot.configuration)):
        raise _unsupported_here(
            snapshot.table_uri,
            "columnMapping",
            f"The merge into {snapshot.table_uri} writes a table with column mapping, and this store has no "
            "conditional write this engine can use (deltalake's transaction would key the partition values "
            "by logical names). Nothing was changed. Run the merge with the delta-spark backend.",
        )
    if store is None and change_files:
        raise _unsupported_here(
            snapshot.table_uri,
            "changeDataFeed",
            f"The merge into {snapshot.table_uri} writes change data files (the table has the change data "
            "feed on), and this store has no conditional write this engine can use (deltalake's transaction "
            "cannot write the cdc actions that name them). Nothing was changed. Run the merge with the "
            "delta-spark backend, or turn the feed off (delta.enableChangeDataFeed=false).",
        )
    if store is None and tracks_rows(snapshot.protocol.writer_features):
        raise _unsupported_here(
            snapshot.table_uri,
            "rowTracking",
            f"The merge into {snapshot.table_uri} writes a table with row tracking, and this store has no "
            "conditional write this engine can use (deltalake's transaction cannot give the added files "
            "their row ids). Nothing was changed. Run the merge with the delta-spark backend.",
        )
    metadata = open_table(snapshot.table_uri, snapshot.version).metadata() if schema is not None else None
    commit = MergeCommitActions(
        snapshot=snapshot,
        removed=removed,
        added=added,
        change_files=change_files,
        readded=readded,
        operation_parameters=operation_parameters,
        operation_metrics=operation_metrics,
        info=info,
        engine_info=engine_info,
        schema=schema,
        metadata=TableMetadata(str(metadata.id), metadata.name, metadata.description, metadata.created_time)
        if metadata is not None
        else None,
    )
    base, rebased_over = snapshot, list[int]()
    for _ in range(MAX_REBASES + 1):
        if _try_commit(base, commit, store):
            if store is not None:
                write_checkpoint_if_due(snapshot, base.version + 1)
            return Committed(base.version + 1, tuple(rebased_over))
        decision = check_winning_commits(base, read, same_run=same_run)
        if not isinstance(decision, Rebase):
            return decision
        rebased_over += range(base.version + 1, decision.snapshot.version + 1)
        base = decision.snapshot
    raise MergeCommitError(
        f"The merge into {snapshot.table_uri} could not commit: the table kept moving (rebased over versions "
        f"{_versions(rebased_over)}). Nothing was changed; run the task again.",
        error_class="DELTA_CONCURRENT_MODIFICATION",
    )


def _try_commit(base: Snapshot, commit: MergeCommitActions, store: LogStore | None) -> bool:
    """Commit at ``base.version + 1``; False when another writer took that version first."""
    if store is None:
        return _try_commit_with_deltalake(base, commit)
    now = int(time.time() * 1000)
    # Row ids go above the mark of the version the commit lands on, read again after each rebase: a winning
    # commit that assigned row ids moved it.
    mark = (
        high_water_mark(base.table_uri, base.version) if tracks_rows(base.protocol.writer_features) else None
    )
    text = commit.lines(
        timestamp=now,
        in_commit_timestamp=_in_commit_timestamp(base, now),
        version=base.version + 1,
        row_id_high_water_mark=mark,
    )
    try:
        return store.put_if_absent(commit_file(base.version + 1), text)
    except (ObstoreError, OSError) as err:  # OSError: a local disk, written by put_file itself
        raise MergeCommitError(
            f"The merge commit to {base.table_uri} could not be written: {err}. Nothing was changed.",
            error_class="DELTAMERGE_COMMIT_WRITE_FAILED",
        ) from err


def _in_commit_timestamp(base: Snapshot, now: int) -> int | None:
    """The commit's in-commit timestamp when the table keeps them: never before the previous commit's.

    PROTOCOL.md "In-Commit Timestamps": each is greater than the previous commit's, so readers can order
    commits by time even when clocks disagree.
    """
    if (base.setting(IN_COMMIT_TIMESTAMPS) or "").lower() != "true":
        return None
    previous = (LogReader(base.table_uri).commit_info(base.version) or {}).get("inCommitTimestamp")
    return max(now, int(previous) + 1) if previous is not None else now


def _try_commit_with_deltalake(base: Snapshot, commit: MergeCommitActions) -> bool:
    """Commit through deltalake's write transaction (stores obstore has no conditional put for).

    deltalake records the commit as operation ``WRITE`` with our MERGE record in its commitInfo. A new schema
    needs an overwrite whose partition filter selects no file: deltalake then writes a metaData action with
    the new schema next to the added files and removes nothing; an append never writes metaData, and an
    overwrite refuses RemoveActions, so ``commit_merge`` refuses a schema change that removes files here.
    """
    now = int(time.time() * 1000)
    # deltalake percent-encodes the paths it is given into the log, so it gets the decoded file-system
    # paths; passing log paths would encode them twice.
    actions: list[AddAction | RemoveAction] = [
        RemoveAction(f.relative_path, True, now, f.size, dict(f.partition_values)) for f in commit.removed
    ]
    actions += [
        AddAction(f.relative_path, f.size, dict(f.partition_values), f.modification_time, True, f.stats)
        for f in commit.added
    ]
    properties = CommitProperties(
        custom_metadata={
            "operationParameters": dict(commit.operation_parameters),
            "operationMetrics": {name: str(value) for name, value in commit.operation_metrics.items()},
            COMMIT_INFO_KEY: dict(commit.info),
        },
        max_commit_retries=0,
    )
    table = open_table(base.table_uri, base.version)
    partition_by = list(base.partition_columns) or None
    try:
        if commit.schema is None:
            table.create_write_transaction(
                actions,
                mode="append",
                schema=table.schema(),
                partition_by=partition_by,
                commit_properties=properties,
            )
        else:
            # A filter on any column matches no file with "in []"; partitioned tables need a partition column.
            any_column = (base.partition_columns or [json.loads(commit.schema)["fields"][0]["name"]])[0]
            table.create_write_transaction(
                actions,
                mode="overwrite",
                schema=DeltaSchema.from_json(commit.schema),
                partition_by=partition_by,
                partition_filters=[(any_column, "in", [])],
                commit_properties=properties,
            )
    except CommitFailedError as err:
        if open_table(base.table_uri).version() > base.version:
            return False
        raise MergeCommitError(
            f"The Delta log refused the merge commit to {base.table_uri}: {err}. Nothing was changed.",
            error_class="DELTAMERGE_COMMIT_REFUSED",
        ) from err
    except DeltaError as err:
        raise MergeCommitError(
            f"The Delta log refused the merge commit to {base.table_uri}: {err}. Nothing was changed.",
            error_class="DELTAMERGE_COMMIT_REFUSED",
        ) from err
    return True


def _unsupported_here(table_uri: str, feature: str, why: str) -> TargetTableError:
    """A table feature this engine writes only with its own commit, which this store cannot take: the same
    refusal on every try, so final."""
    return TargetTableError(
        unsupported_features_message(table_uri, [feature]) + " " + why,
        error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE",
    )


def _versions(versions: Sequence[int]) -> str:
    return ", ".join(str(v) for v in versions) or "none"
