"""Final errors fail the task without retries; transient ones keep Airflow's retries."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_provider_deltamerge.exceptions import (
    ClauseResolutionError,
    DeltaMergeError,
    MergeCommitError,
    MergeExecutionError,
    MergeGuardError,
    MergeSpecError,
    SourceError,
    StorageCredentialsError,
    TargetTableError,
    is_final,
)
from tests.airflow.test_template_injection import python_merge, submitted_spec

FINAL = [
    MergeSpecError("bad clause", error_class="DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION"),
    ClauseResolutionError("no column", error_class="DELTA_MERGE_UNRESOLVED_EXPRESSION"),
    MergeExecutionError("two rows", error_class="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"),
    MergeExecutionError("overflow", error_class="DELTA_CAST_OVERFLOW_IN_TABLE_WRITE"),
    MergeExecutionError("null", error_class="DELTA_NOT_NULL_CONSTRAINT_VIOLATED"),
    TargetTableError("feature", error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"),
    SourceError("dedup", error_class="UNRESOLVED_COLUMN"),
    MergeGuardError("bounds", error_class="DELTAMERGE_METRIC_BOUNDS_BROKEN"),
]
TRANSIENT = [
    MergeCommitError("conflicts", error_class="DELTA_CONCURRENT_MODIFICATION"),
    MergeCommitError("storage said no"),
    SourceError("not yet", error_class="PATH_NOT_FOUND"),
    TargetTableError("not yet", error_class="DELTA_TABLE_NOT_FOUND"),
    SourceError("half uploaded", error_class="FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER"),
    MergeExecutionError("executor lost"),
    DeltaMergeError("answer unreadable"),
    StorageCredentialsError("the role could not be assumed"),
]


@pytest.mark.parametrize("error", FINAL, ids=lambda e: e.error_class)
def test_a_final_error_fails_the_task_without_retry_keeping_its_class(mocker, error):
    assert is_final(error)
    with pytest.raises(AirflowFailException, match=rf"\[{error.error_class}\] {error.message}"):
        submitted_spec(mocker, {}, failure=error, **python_merge())


@pytest.mark.parametrize("error", TRANSIENT, ids=lambda e: f"{e.phase}-{e.error_class}")
def test_a_transient_error_is_raised_as_it_is_for_airflows_retries(mocker, error):
    assert not is_final(error)
    with pytest.raises(type(error)) as raised:
        submitted_spec(mocker, {}, failure=error, **python_merge())
    assert raised.value is error
