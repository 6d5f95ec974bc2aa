"""The one atomic commit of a merge: removes and adds together, with Delta's MERGE record in commitInfo."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction

from airflow_provider_deltamerge.delta.history import COMMIT_INFO_KEY, SUBMISSION_ID, find_merge_commit
from airflow_provider_deltamerge.delta.snapshot import DataFile, Snapshot, open_table
from airflow_provider_deltamerge.delta.writer import WrittenFile
from airflow_provider_deltamerge.exceptions import MergeCommitError


def commit_merge(
    snapshot: Snapshot,
    *,
    removed: Sequence[DataFile],
    added: Sequence[WrittenFile],
    operation_parameters: Mapping[str, str],
    operation_metrics: Mapping[str, int],
    info: Mapping[str, Any],
) -> int:
    """Commit ``removed`` and ``added`` as one new version on top of ``snapshot``; return that version.

    ``info`` must carry the job's submission id: the committed version is found by it, since other writers
    may commit in between.

    Raises:
        MergeCommitError: when the log refuses the commit (e.g. a concurrent commit removed a file
            this merge rewrote).
    """
    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = [
        RemoveAction(f.log_path, True, now, f.size, dict(f.partition_values)) for f in removed
    ]
    actions += [
        AddAction(f.log_path, f.size, dict(f.partition_values), f.modification_time, True, f.stats)
        for f in added
    ]
    table = open_table(snapshot.table_uri, snapshot.version)
    properties = CommitProperties(
        custom_metadata={
            "operationParameters": dict(operation_parameters),
            # Delta keeps every operation metric as a string.
            "operationMetrics": {name: str(value) for name, value in operation_metrics.items()},
            COMMIT_INFO_KEY: dict(info),
        },
    )
    try:
        table.create_write_transaction(
            actions,
            mode="append",
            schema=table.schema(),
            partition_by=list(snapshot.partition_columns) or None,
            commit_properties=properties,
        )
    except CommitFailedError as err:
        raise MergeCommitError(
            f"A concurrent commit conflicts with this merge into {snapshot.table_uri} (read at version "
            f"{snapshot.version}): {err}. Nothing was changed; run the task again.",
            error_class="DELTA_CONCURRENT_MODIFICATION",
        ) from err
    except DeltaError as err:
        raise MergeCommitError(
            f"The Delta log refused the merge commit to {snapshot.table_uri}: {err}. Nothing was changed."
        ) from err
    commit = find_merge_commit(snapshot.table_uri, submission_id=str(info[SUBMISSION_ID]))
    if commit is None:
        raise MergeCommitError(
            f"The merge was committed to {snapshot.table_uri} but its commit is not in the recent history; "
            "check the table's history for it before running the task again."
        )
    return commit.version
