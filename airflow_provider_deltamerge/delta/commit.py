"""The one atomic commit of a merge: removes and adds together, Delta's MERGE record in commitInfo, and
rebasing over concurrent commits that cannot change the merge's answer."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction

from airflow_provider_deltamerge.delta.conflicts import (
    AlreadyCommitted,
    ReadSet,
    Rebase,
    Rerun,
    check_winning_commits,
)
from airflow_provider_deltamerge.delta.history import COMMIT_INFO_KEY, SUBMISSION_ID
from airflow_provider_deltamerge.delta.snapshot import DataFile, Snapshot, open_table, read_snapshot
from airflow_provider_deltamerge.delta.writer import WrittenFile
from airflow_provider_deltamerge.exceptions import MergeCommitError

log = logging.getLogger(__name__)

# The commitInfo key of a schema-only commit made for a merge (see ``_commit_schema``); not COMMIT_INFO_KEY.
SCHEMA_CHANGE_KEY = "deltamergeSchemaChange"
# How many times the same actions are recommitted on top of newer versions before giving up.
MAX_REBASES = 50
# Names the stage at which a test makes the merge process kill itself (see ``crash_point``).
CRASH_ENV = "DELTAMERGE_TEST_CRASH_AT"


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
) -> CommitOutcome:
    """Commit ``removed`` and ``added`` as one new version on top of ``snapshot``, or say why not.

    Each attempt commits with no automatic rebase; when another writer took the version, the winning
    commits are checked (``conflicts.check_winning_commits``) and the same actions are committed on top of
    them if none could change what this merge read (a winning commit that changed the schema always makes
    the merge run again). ``info`` must carry the job's submission id. ``schema`` (Delta's JSON form) is the
    table's new schema when schema evolution changed it: it is committed in the same version as the files,
    except when the merge removes files (deltalake's public API cannot write both in one commit): then the
    schema is committed first, alone, and put back if the files cannot be committed.

    Returns:
        ``Committed``; ``Rerun`` when a winning commit may change the merge's answer (nothing committed);
        ``AlreadyCommitted`` when a winning commit is this same merge.

    Raises:
        MergeCommitError: when the log refuses the commit for another reason, or the table keeps moving.
    """
    now = int(time.time() * 1000)
    # deltalake percent-encodes the paths it is given into the log, so it gets the decoded file-system
    # paths; passing log paths would encode them twice (a remove that misses its file, an add that points
    # nowhere) as soon as a partition value holds a space or '%'.
    actions: list[AddAction | RemoveAction] = [
        RemoveAction(f.relative_path, True, now, f.size, dict(f.partition_values)) for f in removed
    ]
    actions += [
        AddAction(f.relative_path, f.size, dict(f.partition_values), f.modification_time, True, f.stats)
        for f in added
    ]
    properties = CommitProperties(
        custom_metadata={
            "operationParameters": dict(operation_parameters),
            # Delta keeps every operation metric as a string.
            "operationMetrics": {name: str(value) for name, value in operation_metrics.items()},
            COMMIT_INFO_KEY: dict(info),
        },
        max_commit_retries=0,
    )
    base = snapshot
    if schema is not None and removed:
        # deltalake refuses RemoveActions in the overwrite commit that carries a new schema (see
        # ``_try_commit``): the schema goes first, alone, and is put back if the files cannot follow.
        evolved = _commit_schema(snapshot, schema, info, read, same_run)
        if not isinstance(evolved, Snapshot):
            return evolved
        base, schema = evolved, None
    try:
        outcome = _commit_on(base, actions, properties, schema, read=read, same_run=same_run)
    except BaseException:
        if base is not snapshot:
            _restore_schema(base, snapshot.schema_json)
        raise
    if base is not snapshot and not isinstance(outcome, Committed):
        _restore_schema(base, snapshot.schema_json)
    return outcome


def _commit_on(
    snapshot: Snapshot,
    actions: list[AddAction | RemoveAction],
    properties: CommitProperties,
    schema: str | None,
    *,
    read: ReadSet,
    same_run: Callable[[Mapping[str, Any]], bool],
) -> CommitOutcome:
    """Commit ``actions`` on ``snapshot``, rebasing over winning commits that cannot change the answer."""
    base, rebased_over = snapshot, list[int]()
    for _ in range(MAX_REBASES + 1):
        crash_point("before_commit")
        if _try_commit(base, actions, properties, schema):
            crash_point("after_commit")
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


def _commit_schema(
    snapshot: Snapshot,
    schema: str,
    info: Mapping[str, Any],
    read: ReadSet,
    same_run: Callable[[Mapping[str, Any]], bool],
) -> Snapshot | Rerun | AlreadyCommitted:
    """Commit ``schema`` alone (no file changes); the snapshot it made, or why the merge cannot go on.

    The commit carries no ``COMMIT_INFO_KEY`` record, so a retried task never takes it for its merge.
    """
    properties = _schema_change_properties(info, "evolve")
    outcome = _commit_on(snapshot, [], properties, schema, read=read, same_run=same_run)
    if not isinstance(outcome, Committed):
        return outcome
    return read_snapshot(snapshot.table_uri, outcome.version)


def _restore_schema(evolved: Snapshot, schema: str) -> None:
    """Put the table's schema back after a merge whose files could not follow its schema commit.

    Only when nothing was committed after the schema change: a later writer may already rely on it.
    """
    latest = open_table(evolved.table_uri).version()
    if latest != evolved.version:
        log.warning(
            "The merge into %s added columns at version %d but could not commit its files; the columns stay "
            "because versions up to %d were committed after them",
            evolved.table_uri,
            evolved.version,
            latest,
        )
        return
    properties = _schema_change_properties({}, "restore")
    if not _try_commit(evolved, [], properties, schema):
        log.warning("Could not restore the schema of %s after a failed merge", evolved.table_uri)


def _schema_change_properties(info: Mapping[str, Any], change: str) -> CommitProperties:
    return CommitProperties(
        custom_metadata={
            "operationParameters": {"schemaChange": f"MERGE schema evolution ({change})"},
            SCHEMA_CHANGE_KEY: {SUBMISSION_ID: info.get(SUBMISSION_ID)},
        },
        max_commit_retries=0,
    )


def _try_commit(
    base: Snapshot, actions: list[AddAction | RemoveAction], properties: CommitProperties, schema: str | None
) -> bool:
    """Commit at ``base.version + 1``; False when another writer took that version first.

    With a new ``schema`` the commit is an overwrite whose partition filter selects no file: deltalake then
    writes a metaData action with the new schema (same table id, properties and partitioning) next to the
    added files and removes nothing; an append never writes metaData, and an overwrite refuses RemoveActions
    ("RemoveAction is not supported with mode='overwrite'"), so ``actions`` may only add files here.
    """
    table = open_table(base.table_uri, base.version)
    partition_by = list(base.partition_columns) or None
    try:
        if schema is None:
            table.create_write_transaction(
                actions,
                mode="append",
                schema=table.schema(),
                partition_by=partition_by,
                commit_properties=properties,
            )
        else:
            # A filter on any column matches no file with "in []"; partitioned tables need a partition column.
            any_column = (base.partition_columns or [json.loads(schema)["fields"][0]["name"]])[0]
            table.create_write_transaction(
                actions,
                mode="overwrite",
                schema=DeltaSchema.from_json(schema),
                partition_by=partition_by,
                partition_filters=[(any_column, "in", [])],
                commit_properties=properties,
            )
    except CommitFailedError as err:
        if open_table(base.table_uri).version() > base.version:
            return False
        raise MergeCommitError(
            f"The Delta log refused the merge commit to {base.table_uri}: {err}. Nothing was changed."
        ) from err
    except DeltaError as err:
        raise MergeCommitError(
            f"The Delta log refused the merge commit to {base.table_uri}: {err}. Nothing was changed."
        ) from err
    return True


def crash_point(stage: str) -> None:
    """Test hook: the process kills itself (SIGKILL, no clean-up) at ``stage`` when CRASH_ENV names it."""
    if os.environ.get(CRASH_ENV) == stage:
        os.kill(os.getpid(), signal.SIGKILL)


def _versions(versions: Sequence[int]) -> str:
    return ", ".join(str(v) for v in versions) or "none"
