"""The job request and the job's answer: what travels between Airflow and the Spark job, as files."""

from __future__ import annotations

import stat

import pytest

from airflow_provider_deltamerge.exceptions import ClauseResolutionError, DeltaMergeError, MergeSpecError
from airflow_provider_deltamerge.spec import MergeSpec, QuerySource, insert_all, update
from airflow_provider_deltamerge.spec.transport import (
    JobRequest,
    answer_text,
    decode_request,
    encode_request,
    read_answer,
    write_private,
)

SPEC = MergeSpec(
    target="s3://lake/orders",
    source=QuerySource("SELECT * FROM staged WHERE note = 'it''s \"quoted\" -- and long' " + "x" * 5000),
    condition="t.id = s.id",
    clauses=(update({"note": "concat(s.note, '$HOME `ls`')"}), insert_all()),
)


def test_a_request_round_trips_through_an_owner_only_file(tmp_path):
    request = JobRequest(SPEC, {"dagId": "d", "tryNumber": 2}, executor="classic", backend="engine")
    path = write_private(tmp_path / "request.json", encode_request(request))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert decode_request(path.read_text()) == request


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not-a-request", "request file is not a merge request"),
        ("{}", "request file is not a merge request"),
        ('{"spec": 3}', "merge spec JSON must be an object"),
    ],
)
def test_garbled_request_is_a_clear_spec_error(text, message):
    with pytest.raises(MergeSpecError, match=message):
        decode_request(text)


@pytest.mark.parametrize("rerun", ["always", "skip_if_committed", "auto", "", None])
def test_a_request_with_an_unknown_rerun_policy_is_refused_not_merged_again(rerun):
    # A job knows "skip" and "merge"; any other word (a renamed or the operator's own policy) is an error.
    with pytest.raises(MergeSpecError, match=r"DELTAMERGE_INVALID_RERUN.*'skip', 'merge'") as raised:
        JobRequest(SPEC, rerun=rerun)
    assert raised.value.error_class == "DELTAMERGE_INVALID_RERUN"
    body = encode_request(JobRequest(SPEC, rerun="merge")).replace('"rerun": "merge"', f'"rerun": "{rerun}"')
    with pytest.raises(MergeSpecError, match="DELTAMERGE_INVALID_RERUN"):
        decode_request(body)


def test_answers_round_trip_and_belong_to_their_submission():
    assert read_answer(answer_text("sub-1", result={"numTargetRowsInserted": 3}), "sub-1") == {
        "numTargetRowsInserted": 3
    }
    error = ClauseResolutionError(
        "Cannot resolve s.x in UPDATE clause\nDELTAMERGE_RESULT {}",
        error_class="DELTA_MERGE_UNRESOLVED_EXPRESSION",
    )
    rebuilt = read_answer(answer_text("sub-1", error=error), "sub-1")
    assert isinstance(rebuilt, ClauseResolutionError)
    assert (rebuilt.error_class, rebuilt.message) == (error.error_class, error.message)
    with pytest.raises(DeltaMergeError, match="answers submission 'sub-1'"):
        read_answer(answer_text("sub-1", result={}), "sub-2")
    with pytest.raises(DeltaMergeError, match="answer cannot be read"):
        read_answer("7\nDELTAMERGE_ERROR {not json", "sub-1")
