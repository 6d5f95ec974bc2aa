"""What a merge task does when its run's merge is already in the Delta log.

An automatic retry returns that commit (the worker died after it: the log's run identity prevents merging
twice); a user's Clear, or a backfill that reprocesses completed runs, merges again (the extract was fixed).
Airflow tells them apart in what it records: a Clear (from the UI, the REST API or a reprocessing backfill)
raises the DAG run's ``clear_number`` and gives the task instance a new budget of tries,
``max_tries = try_number + retries``, so the first try since the last Clear is ``max_tries - retries + 1``
(the task SDK finds a sensor's first reschedule the same way). An automatic retry changes neither.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from airflow_provider_deltamerge.exceptions import MergeSpecError

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context

RerunPolicy = Literal["auto", "skip", "merge"]
RERUN_POLICIES: tuple[RerunPolicy, ...] = ("auto", "skip", "merge")
# The policies' names before 0.1, accepted for one minor release.
DEPRECATED_POLICIES: Mapping[str, RerunPolicy] = {"skip_if_committed": "skip", "always": "merge"}
# Provenance keys (in every merge commit's commitInfo) that place a commit in a task's tries.
CLEAR_NUMBER = "clearNumber"
TRY_NUMBER = "tryNumber"


def rerun_policy(value: Any, *, task_id: str) -> RerunPolicy:
    """``value`` as a policy, once rendered: it may come from run conf or params, so it chooses between the
    three policies and nothing else.

    Raises:
        MergeSpecError: ``DELTAMERGE_INVALID_RERUN``, naming the value and the choices.
    """
    if value in DEPRECATED_POLICIES:
        replacement = DEPRECATED_POLICIES[value]
        warnings.warn(
            f"rerun={value!r} is deprecated; use rerun={replacement!r}", DeprecationWarning, stacklevel=3
        )
        return replacement
    if value not in RERUN_POLICIES:
        raise MergeSpecError(
            f"{task_id}: rerun is {str(value)[:80]!r}, which is no rerun policy. Give 'auto' (merge again "
            "after a Clear, skip on an automatic retry), 'skip' or 'merge', in the DAG or in the run conf or "
            "params that the DAG's rerun template reads.",
            error_class="DELTAMERGE_INVALID_RERUN",
        )
    return cast("RerunPolicy", value)


@dataclass(frozen=True)
class TrySeries:
    """The tries of one task instance since its last Clear: the DAG run's clear number and the first try."""

    clear_number: int
    first_try: int

    @classmethod
    def of(cls, context: Context) -> TrySeries:
        ti = context["ti"]
        retries = ti.task.retries or 0
        return cls(int(context["dag_run"].clear_number or 0), max(1, ti.max_tries - retries + 1))

    def provenance(self) -> dict[str, int]:
        """What a commit records so that a later try can place it."""
        return {CLEAR_NUMBER: self.clear_number}

    def made(self, provenance: Mapping[str, Any]) -> bool:
        """Whether the commit with ``provenance`` was made by a try of this series.

        Such a try did not succeed (Airflow runs a task again without a Clear only after a failed try), so its
        commit has been neither reported nor announced by an asset event. A commit that records no clear
        number predates this check and counts as made by this series: skipping it is the safe side.
        """
        clear = provenance.get(CLEAR_NUMBER, self.clear_number)
        tried = provenance.get(TRY_NUMBER, self.first_try)
        return int(clear) == self.clear_number and int(tried) >= self.first_try


def replays(policy: RerunPolicy, series: TrySeries, earlier: Mapping[str, Any] | None) -> bool:
    """Whether the task returns the earlier commit (with provenance ``earlier``) instead of merging."""
    if earlier is None or policy == "merge":
        return False
    return policy == "skip" or series.made(earlier)
