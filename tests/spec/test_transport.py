"""The job request and the job's answer lines: what travels between Airflow and the Spark job."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.exceptions import ClauseResolutionError, MergeSpecError
from airflow_provider_deltamerge.spec import MergeSpec, QuerySource, insert_all, update
from airflow_provider_deltamerge.spec.transport import (
    JobRequest,
    decode_request,
    encode_request,
    error_line,
    parse_error,
    parse_result,
    result_line,
)

SPEC = MergeSpec(
    target="s3://lake/orders",
    source=QuerySource("SELECT * FROM staged WHERE note = 'it''s \"quoted\" -- and long' " + "x" * 5000),
    condition="t.id = s.id",
    clauses=(update({"note": "concat(s.note, '$HOME `ls`')"}), insert_all()),
)


def test_request_survives_any_quoting_as_one_shell_safe_argument():
    request = JobRequest(SPEC, {"dagId": "d", "tryNumber": 2}, executor="classic", backend="engine")
    encoded = encode_request(request)
    assert set(encoded) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")
    assert decode_request(encoded) == request


def test_garbled_request_is_a_clear_spec_error():
    with pytest.raises(MergeSpecError, match="--request"):
        decode_request("not-a-request")


def test_result_and_error_lines_round_trip():
    assert parse_result(result_line({"numTargetRowsInserted": 3})) == {"numTargetRowsInserted": 3}
    assert parse_result("some spark log line") is None
    error = ClauseResolutionError(
        "Cannot resolve s.x in UPDATE clause", error_class="DELTA_MERGE_UNRESOLVED_EXPRESSION"
    )
    rebuilt = parse_error("  " + error_line(error) + "\n")
    assert isinstance(rebuilt, ClauseResolutionError)
    assert (rebuilt.error_class, rebuilt.message) == (error.error_class, error.message)
    assert parse_error("DELTAMERGE_RESULT {}") is None
