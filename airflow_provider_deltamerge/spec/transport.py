"""How a merge travels to the Spark job and how the job's answer travels back: both as files, never argv.

The request (the spec, the run identity, how to run) is JSON in an owner-only file whose path is the job's
only argument: no spec text or secret stands on a command line that ``ps`` shows, and no spec is too long
for one. The job answers with one JSON document (a result or an error) carrying the submission's id: in a
file the hook names (client mode) or beside the table (cluster mode, ``delta/log/job_reports.py``). The job's
standard output is log only: nothing printed there, data included, can speak for the job. When no answer
arrives the Airflow side falls back to the job's commit in the Delta log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from airflow_provider_deltamerge.exceptions import ERRORS_BY_PHASE, DeltaMergeError, MergeSpecError
from airflow_provider_deltamerge.spec.json_form import spec_from_dict, spec_to_dict
from airflow_provider_deltamerge.spec.merge_spec import MergeSpec

# What a job does when its run's merge is already in the log: return that commit, or merge again. The operator
# resolves its own policy (``auto`` among them) to one of these.
JobRerunPolicy = Literal["skip", "merge"]
JOB_RERUN_POLICIES: tuple[JobRerunPolicy, ...] = ("skip", "merge")


def job_rerun_policy(value: Any) -> JobRerunPolicy:
    """``value`` as a job's rerun policy: an unknown word is refused, never read as "merge again" (a renamed
    policy would merge twice).

    Raises:
        MergeSpecError: ``DELTAMERGE_INVALID_RERUN``, naming the value and the policies.
    """
    if value not in JOB_RERUN_POLICIES:
        raise MergeSpecError(
            f"The merge job's rerun policy is {str(value)[:80]!r}, which is none of "
            f"{', '.join(map(repr, JOB_RERUN_POLICIES))}: 'skip' returns the run's commit if the log holds "
            "it, 'merge' merges again. Nothing was merged; submit the job with one of them.",
            error_class="DELTAMERGE_INVALID_RERUN",
        )
    return cast("JobRerunPolicy", value)


@dataclass(frozen=True)
class JobRequest:
    """One submission of a merge: the spec, who asked for it (run identity), and how to run it.

    ``backend`` ("auto", "engine" or "delta-spark"), ``executor`` and ``rerun`` ("skip" or "merge": the
    operator's policy once resolved) choose how the merge is run, not what it does, so they travel beside
    the spec and do not change its hash. ``report_file`` asks the job to leave its answer in a report file
    too. ``bounds`` (metric or ratio -> min/max) are checked before the commit; a ``dry_run`` commits nothing.
    """

    spec: MergeSpec
    provenance: Mapping[str, Any] = field(default_factory=dict)
    executor: str | None = None
    backend: str = "auto"
    rerun: JobRerunPolicy = "skip"
    report_file: bool = False
    bounds: Mapping[str, Mapping[str, float]] | None = None
    dry_run: bool = False

    def __post_init__(self) -> None:
        job_rerun_policy(self.rerun)


def encode_request(request: JobRequest) -> str:
    """The request as the JSON text of its file."""
    body = {
        "spec": spec_to_dict(request.spec),
        "provenance": dict(request.provenance),
        "executor": request.executor,
        "backend": request.backend,
        "rerun": request.rerun,
        "report_file": request.report_file,
        "bounds": dict(request.bounds) if request.bounds else None,
        "dry_run": request.dry_run,
    }
    return json.dumps(body, sort_keys=True)


def decode_request(text: str) -> JobRequest:
    """Read a request file's text.

    Raises:
        MergeSpecError: the text is not a merge request, or names no rerun policy a job knows.
    """
    try:
        body = json.loads(text)
        return JobRequest(
            spec_from_dict(body["spec"]),
            body.get("provenance", {}),
            body.get("executor"),
            body.get("backend", "auto"),
            body.get("rerun", "skip"),
            body.get("report_file", False),
            body.get("bounds"),
            bool(body.get("dry_run", False)),
        )
    except (ValueError, KeyError, TypeError) as err:
        raise MergeSpecError(
            f"The merge job's request file is not a merge request: {err!r}",
            error_class="DELTAMERGE_INVALID_JOB_REQUEST",
        ) from err


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to a new file only its owner can read (it may hold a source's options)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(text)
    return path


def answer_text(
    submission_id: str, *, result: Mapping[str, Any] | None = None, error: DeltaMergeError | None = None
) -> str:
    """The job's answer to one submission: its result, or its error's phase, class and message."""
    if error is not None:
        body: dict[str, Any] = {
            "error": {"phase": error.phase, "error_class": error.error_class, "message": error.message}
        }
    else:
        body = {"result": dict(result or {})}
    return json.dumps({"submission": submission_id, **body}, sort_keys=True)


def read_answer(text: str, submission_id: str) -> dict[str, Any] | DeltaMergeError:
    """The result or the error (rebuilt as its own class) that ``text`` answers ``submission_id`` with.

    Raises:
        DeltaMergeError: the text is no answer, or answers another submission.
    """
    try:
        body = json.loads(text)
        if body["submission"] != submission_id:
            raise ValueError(f"it answers submission {body['submission']!r}")
        if "error" in body:
            error = body["error"]
            error_type = ERRORS_BY_PHASE.get(error.get("phase"), DeltaMergeError)
            return error_type(error["message"], error_class=error.get("error_class"))
        return dict(body["result"])
    except (ValueError, KeyError, TypeError) as err:
        raise DeltaMergeError(
            f"The merge job's answer cannot be read ({err}); the table is as the log shows.",
            error_class="DELTAMERGE_UNREADABLE_JOB_ANSWER",
        ) from err
