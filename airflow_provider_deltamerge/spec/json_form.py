"""The versioned, canonical JSON form of a ``MergeSpec``: the contract between Airflow and the Spark job."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec.clauses import CLAUSE_TYPES, MergeClause
from airflow_provider_deltamerge.spec.merge_spec import MergeSpec
from airflow_provider_deltamerge.spec.source import MergeSource, PathSource, QuerySource, TableSource

SPEC_VERSION = 1

_SOURCE_TYPES: dict[str, type[MergeSource]] = {
    cls.kind: cls for cls in (PathSource, TableSource, QuerySource)
}


def _to_json_value(value: Any) -> Any:
    return [_to_json_value(v) for v in value] if isinstance(value, tuple) else value


def _from_json_value(value: Any) -> Any:
    return tuple(_from_json_value(v) for v in value) if isinstance(value, list) else value


def _fields_dict(value: Any) -> dict[str, Any]:
    """A frozen value's fields as JSON values (tuples, also of pairs, become lists)."""
    return {f.name: _to_json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}


def spec_to_dict(spec: MergeSpec) -> dict[str, Any]:
    """The JSON-ready dict of ``spec``, with ``spec_version``."""
    return {
        "spec_version": SPEC_VERSION,
        "target": spec.target,
        "source": {"kind": spec.source.kind, **_fields_dict(spec.source)},
        "condition": spec.condition,
        "clauses": [{"kind": c.kind, **_fields_dict(c)} for c in spec.clauses],
        "target_alias": spec.target_alias,
        "source_alias": spec.source_alias,
        "schema_evolution": spec.schema_evolution,
    }


def spec_to_json(spec: MergeSpec) -> str:
    return json.dumps(spec_to_dict(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def spec_hash(spec: MergeSpec) -> str:
    return hashlib.sha256(spec_to_json(spec).encode("utf-8")).hexdigest()


def _build(cls: type[Any], data: dict[str, Any], where: str) -> Any:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise MergeSpecError(
            f"Unknown field(s) {', '.join(unknown)} in {where} of the merge spec JSON; "
            f"known fields are {', '.join(sorted(known))}. Was it written by a newer provider version?"
        )
    frozen = {k: _from_json_value(v) for k, v in data.items()}
    try:
        return cls(**frozen)
    except TypeError as err:
        raise MergeSpecError(f"Invalid {where} in the merge spec JSON: {err}") from err


def _tagged(data: Any, types: dict[str, type[Any]], where: str) -> Any:
    if not isinstance(data, dict) or data.get("kind") not in types:
        raise MergeSpecError(
            f"{where} of the merge spec JSON needs a 'kind' among {', '.join(sorted(types))}."
        )
    fields = {k: v for k, v in data.items() if k != "kind"}
    return _build(types[data["kind"]], fields, where)


def spec_from_dict(data: dict[str, Any]) -> MergeSpec:
    version = data.get("spec_version")
    if version != SPEC_VERSION:
        raise MergeSpecError(
            f"Merge spec JSON has spec_version {version!r}; this provider reads version {SPEC_VERSION}. "
            "Install the same provider version on the Airflow workers and the Spark cluster."
        )
    body = {k: v for k, v in data.items() if k != "spec_version"}
    clauses: list[MergeClause] = [
        _tagged(c, CLAUSE_TYPES, f"clause {n}") for n, c in enumerate(body.pop("clauses", []), start=1)
    ]
    source = _tagged(body.pop("source", None), _SOURCE_TYPES, "source")
    return _build(MergeSpec, {**body, "source": source, "clauses": clauses}, "the spec")


def spec_from_json(text: str) -> MergeSpec:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise MergeSpecError(f"The merge spec is not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise MergeSpecError("The merge spec JSON must be an object.")
    return spec_from_dict(data)
