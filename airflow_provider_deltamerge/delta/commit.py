"""The one atomic commit of a merge: removes and adds together, Delta's MERGE record in commitInfo, and
rebasing over concurrent commits that cannot change the merge's answer."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction

from airflow_provider_deltamerge.delta.conflicts import (
    AlreadyCommitted,
    ReadSet,
    Rebase,
    Rerun,
    check_winning_commits,
)
from airflow_provider_deltamerge.delta.history import COMMIT_INFO_KEY
from airflow_provider_deltamerge.delta.snapshot import DataFile, Snapshot, open_table
from airflow_provider_deltamerge.delta.writer import WrittenFile
from airflow_provider_deltamerge.exceptions import MergeCommitError

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
) -> CommitOutcome:
    """Commit ``removed`` and ``added`` as one new version on top of ``snapshot``, or say why not.

    Each attempt commits with no automatic rebase; when another writer took the version, the winning
    commits are checked (``conflicts.check_winning_commits``) and the same actions are committed on top of
    them if none could change what this merge read. ``info`` must carry the job's submission id.

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
    base, rebased_over = snapshot, list[int]()
    for _ in range(MAX_REBASES + 1):
        crash_point("before_commit")
        if _try_commit(base, actions, properties):
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


def _try_commit(
    base: Snapshot, actions: list[AddAction | RemoveAction], properties: CommitProperties
) -> bool:
    """Commit at ``base.version + 1``; False when another writer took that version first."""
    table = open_table(base.table_uri, base.version)
    try:
        table.create_write_transaction(
            actions,
            mode="append",
            schema=table.schema(),
            partition_by=list(base.partition_columns) or None,
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
