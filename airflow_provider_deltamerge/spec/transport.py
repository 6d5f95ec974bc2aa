"""How a merge travels to the Spark job and how the job's answer travels back.

The request rides as one command-line argument: compressed, URL-safe base64 JSON, so any spec length and
any quoting survive spark-submit and cluster launchers. The job answers with one marked line on its
standard output (a result or an error); where that output is out of reach (cluster deploy mode) the job
also leaves that line in a report file beside the table (``delta/job_reports.py``), and the Airflow side
falls back to the job's commit in the Delta log when neither arrives.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_deltamerge.exceptions import ERRORS_BY_PHASE, DeltaMergeError, MergeSpecError
from airflow_provider_deltamerge.spec.json_form import spec_from_dict, spec_to_dict
from airflow_provider_deltamerge.spec.merge_spec import MergeSpec

REQUEST_ARG = "--request"
RESULT_MARK = "DELTAMERGE_RESULT "
ERROR_MARK = "DELTAMERGE_ERROR "


@dataclass(frozen=True)
class JobRequest:
    """One submission of a merge: the spec, who asked for it (run identity), and how to run it.

    ``backend`` ("auto", "engine" or "delta-spark"), ``executor`` and ``rerun`` ("skip_if_committed" or
    "always") choose how the merge is run, not what it does, so they travel beside the spec and do not
    change its hash. ``report_file`` asks the job to leave its answer in a report file too.
    """

    spec: MergeSpec
    provenance: Mapping[str, Any] = field(default_factory=dict)
    executor: str | None = None
    backend: str = "auto"
    rerun: str = "skip_if_committed"
    report_file: bool = False


def encode_request(request: JobRequest) -> str:
    body = {
        "spec": spec_to_dict(request.spec),
        "provenance": dict(request.provenance),
        "executor": request.executor,
        "backend": request.backend,
        "rerun": request.rerun,
        "report_file": request.report_file,
    }
    packed = zlib.compress(json.dumps(body, sort_keys=True).encode("utf-8"), 9)
    return base64.urlsafe_b64encode(packed).decode("ascii")


def decode_request(text: str) -> JobRequest:
    try:
        body = json.loads(zlib.decompress(base64.urlsafe_b64decode(text.encode("ascii"))))
    except (ValueError, zlib.error) as err:
        raise MergeSpecError(f"The merge job's {REQUEST_ARG} argument is not a merge request: {err}") from err
    return JobRequest(
        spec_from_dict(body["spec"]),
        body.get("provenance", {}),
        body.get("executor"),
        body.get("backend", "auto"),
        body.get("rerun", "skip_if_committed"),
        body.get("report_file", False),
    )


def result_line(result: Mapping[str, Any]) -> str:
    return RESULT_MARK + json.dumps(dict(result), sort_keys=True)


def error_line(error: DeltaMergeError) -> str:
    return ERROR_MARK + json.dumps(
        {"phase": error.phase, "error_class": error.error_class, "message": error.message}
    )


def parse_result(line: str) -> dict[str, Any] | None:
    """The result a job line carries, or None if the line is not a result line."""
    text = line.strip()
    return json.loads(text[len(RESULT_MARK) :]) if text.startswith(RESULT_MARK) else None


def parse_error(line: str) -> DeltaMergeError | None:
    """The merge error a job line carries, rebuilt as its own class, or None."""
    text = line.strip()
    if not text.startswith(ERROR_MARK):
        return None
    body = json.loads(text[len(ERROR_MARK) :])
    error_type = ERRORS_BY_PHASE.get(body.get("phase"), DeltaMergeError)
    return error_type(body["message"], error_class=body.get("error_class"))
