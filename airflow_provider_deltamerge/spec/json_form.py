"""The versioned, canonical JSON form of a ``MergeSpec``: the contract between Airflow and the Spark job."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from typing import Any

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec.clauses import CLAUSE_TYPES, GROUP_SQL_NAMES, MergeClause
from airflow_provider_deltamerge.spec.merge_spec import MergeSpec, assemble_spec
from airflow_provider_deltamerge.spec.source import MergeSource, PathSource, QuerySource, TableSource
from airflow_provider_deltamerge.spec.validation import Problem, action_not_allowed

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
    """The JSON-ready dict of ``spec``, with ``spec_version``; every field is written, defaults too."""
    return {
        **_fields_dict(spec),
        "spec_version": SPEC_VERSION,
        "source": {"kind": spec.source.kind, **_fields_dict(spec.source)},
        "clauses": [{"kind": c.kind, **_fields_dict(c)} for c in spec.clauses],
    }


def spec_to_json(spec: MergeSpec) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 kept, so equal specs give equal text."""
    return json.dumps(spec_to_dict(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def spec_hash(spec: MergeSpec) -> str:
    """sha256 (hex) of the canonical JSON form."""
    return hashlib.sha256(spec_to_json(spec).encode("utf-8")).hexdigest()


def _reject_unknown_fields(cls: type[Any], data: dict[str, Any], where: str) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise MergeSpecError(
            f"Unknown field(s) {', '.join(unknown)} in {where} of the merge spec JSON; "
            f"known fields are {', '.join(sorted(known))}. Was it written by a newer provider version?",
            error_class="DELTAMERGE_INVALID_SPEC_JSON.UNKNOWN_FIELD",
        )


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a JSON value (lists already tuples) has the field's declared type: str, bool, unions of
    them, ``tuple[X, ...]`` and fixed tuples, as the spec's frozen values declare them."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(v, args[0]) for v in value)
        return len(value) == len(args) and all(_conforms(v, a) for v, a in zip(value, args, strict=True))
    if hint is type(None):
        return value is None
    return isinstance(value, hint) if isinstance(hint, type) else True


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint)


def _check_types(cls: type[Any], data: dict[str, Any], where: str) -> None:
    hints = typing.get_type_hints(cls)
    wrong = [name for name, value in data.items() if name in hints and not _conforms(value, hints[name])]
    if wrong:
        expected = ", ".join(
            f"{name} must be {getattr(hints[name], '__name__', hints[name])}" for name in wrong
        )
        raise MergeSpecError(
            f"Wrong value types in {where} of the merge spec JSON: {expected}. Write the spec with "
            "MergeSpec.to_json() or the operator, or give each field the type shown.",
            error_class="DELTAMERGE_INVALID_SPEC_JSON.WRONG_TYPE",
        )


def _build(cls: type[Any], data: dict[str, Any], where: str) -> Any:
    _reject_unknown_fields(cls, data, where)
    frozen = {k: _from_json_value(v) for k, v in data.items()}
    _check_types(cls, frozen, where)
    try:
        return cls(**frozen)
    except TypeError as err:
        raise MergeSpecError(
            f"Invalid {where} in the merge spec JSON: {err}",
            error_class="DELTAMERGE_INVALID_SPEC_JSON.INVALID_VALUE",
        ) from err


def _kind(data: Any) -> str | None:
    """The ``kind`` tag of a tagged JSON object, or None where there is none (or it is not text)."""
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else None


def _tagged(data: Any, types: dict[str, type[Any]], where: str) -> Any:
    if _kind(data) not in types:
        raise MergeSpecError(
            f"{where} of the merge spec JSON needs a 'kind' among {', '.join(sorted(types))}.",
            error_class="DELTAMERGE_INVALID_SPEC_JSON.UNKNOWN_KIND",
        )
    fields = {k: v for k, v in data.items() if k != "kind"}
    return _build(types[data["kind"]], fields, where)


def _clause(data: Any, position: int) -> MergeClause | Problem:
    """One clause of the JSON form, or the problem standing in for a clause its WHEN group forbids."""
    where = f"clause {position}"
    if isinstance(data, dict) and _kind(data) not in CLAUSE_TYPES:
        group, _, action = str(_kind(data)).rpartition("_")
        if group in GROUP_SQL_NAMES and action in ("update", "delete", "insert"):
            return action_not_allowed(position, group, action.upper())
    if _kind(data) == "not_matched_by_source_update" and data.get("star"):
        return action_not_allowed(position, "not_matched_by_source", "UPDATE SET *")
    return _tagged(data, CLAUSE_TYPES, where)


def spec_from_dict(data: dict[str, Any]) -> MergeSpec:
    """Read the dict form of a spec.

    Raises:
        MergeSpecError: for an unknown ``spec_version``, an unknown field or kind, or an invalid MERGE.
    """
    if not isinstance(data, dict):
        raise MergeSpecError(
            "The merge spec JSON must be an object.", error_class="DELTAMERGE_INVALID_SPEC_JSON.NOT_AN_OBJECT"
        )
    version = data.get("spec_version")
    if version != SPEC_VERSION:
        raise MergeSpecError(
            f"Merge spec JSON has spec_version {version!r}; this provider reads version {SPEC_VERSION}. "
            "Install the same provider version on the Airflow workers and the Spark cluster.",
            error_class="DELTAMERGE_INVALID_SPEC_JSON.UNKNOWN_VERSION",
        )
    body = {k: _from_json_value(v) for k, v in data.items() if k not in ("spec_version", "clauses", "source")}
    _reject_unknown_fields(MergeSpec, body, "the spec")
    _check_types(MergeSpec, body, "the spec")
    raw_clauses = data.get("clauses", [])
    if not isinstance(raw_clauses, list):
        raise MergeSpecError(
            "'clauses' of the merge spec JSON must be a list.",
            error_class="DELTAMERGE_INVALID_SPEC_JSON.WRONG_TYPE",
        )
    clauses = [_clause(c, n) for n, c in enumerate(raw_clauses, start=1)]
    source = _tagged(data.get("source"), _SOURCE_TYPES, "source")
    try:
        return assemble_spec(clauses, source=source, **body)
    except TypeError as err:
        raise MergeSpecError(
            f"Invalid merge spec JSON: {err}", error_class="DELTAMERGE_INVALID_SPEC_JSON.INVALID_VALUE"
        ) from err


def spec_from_json(text: str) -> MergeSpec:
    """Read the JSON text of a spec; see ``spec_from_dict``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise MergeSpecError(
            f"The merge spec is not valid JSON: {err}", error_class="DELTAMERGE_INVALID_SPEC_JSON.NOT_JSON"
        ) from err
    return spec_from_dict(data)
