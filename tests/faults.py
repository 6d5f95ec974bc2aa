"""Faults the tests inject into merges that run in other processes (spark-submit jobs, Airflow tasks, spawned
workers): the process killed at a stage of the merge, or another writer committing just before the merge does.

A test switches a fault on with an environment variable that the merge's process inherits; the product reads
no such switch. tests/subprocess_hook/sitecustomize.py wraps the engine's functions with the ones below when
a process imports them, and each wrapper reads its variable at call time (a spawned worker sets it after
start-up).
"""

from __future__ import annotations

import os
import signal
from types import ModuleType
from typing import Any

# Names the stage at which the merge's process kills itself: after_snapshot, after_write, before_commit or
# after_commit.
CRASH_ENV = "DELTAMERGE_TEST_CRASH_AT"
# Names the try of the merge task in which another writer rewrites the table (same rows, new files) just
# before each run of the merge commits, so that run finds the files it read gone and runs again.
CONFLICT_ENV = "DELTAMERGE_TEST_CONFLICT_ON_TRY"


def crash_point(stage: str) -> None:
    """The process kills itself (SIGKILL, no clean-up) when CRASH_ENV names ``stage``."""
    if os.environ.get(CRASH_ENV) == stage:
        os.kill(os.getpid(), signal.SIGKILL)


def conflict_point(table_uri: str, info: Any) -> None:
    """Another writer rewrites the table when CONFLICT_ENV names the try in ``info`` (its tryNumber)."""
    if os.environ.get(CONFLICT_ENV) == str(info.get("tryNumber")):
        from deltalake import DeltaTable, write_deltalake

        table = DeltaTable(table_uri)
        write_deltalake(table, table.to_pyarrow_table(), mode="overwrite")


def inject_into_merge(module: ModuleType) -> None:
    """Wrap engine/merge.py's ``_execute`` (a run's reads and file writes, after its snapshot is read)."""
    real = module._execute

    def execute(*args: Any, **kwargs: Any) -> Any:
        crash_point("after_snapshot")
        result = real(*args, **kwargs)
        crash_point("after_write")
        return result

    module._execute = execute


def inject_into_commit(module: ModuleType) -> None:
    """Wrap delta/commit/transaction.py's ``_try_commit`` (each attempt at the log's next version)."""
    real = module._try_commit

    def try_commit(base: Any, actions: Any, store: Any) -> bool:
        if base is actions.snapshot:  # the first attempt of this run's commit, on the snapshot it read
            conflict_point(base.table_uri, actions.info)
        crash_point("before_commit")
        committed = bool(real(base, actions, store))
        if committed:
            crash_point("after_commit")
        return committed

    module._try_commit = try_commit
