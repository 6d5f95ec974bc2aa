"""The JSON form: versioned, canonical, hashed, exact round trip, clear errors; golden files."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from spec_strategies import merge_specs

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec import SPEC_VERSION, MergeSpec, spec_hash
from airflow_provider_deltamerge.spec.json_form import spec_from_json, spec_to_json

SPECS = Path(__file__).parents[1] / "fixtures" / "specs"
VALID = sorted(p for p in SPECS.glob("*.json") if not p.name.endswith("__invalid.json"))
INVALID = sorted(SPECS.glob("*__invalid.json"))

# What each invalid golden file must be refused with: (error class, text in the message).
EXPECTED_ERRORS = {
    "conflicting_set__invalid.json": ("DELTA_CONFLICT_SET_COLUMN", "[`addr`, `addr.city`]"),
    "insert_under_matched__invalid.json": (
        "DELTAMERGE_INVALID_CLAUSE_ACTION",
        "INSERT clauses cannot be part of the WHEN MATCHED clause in MERGE INTO. "
        "(clause 1, WHEN MATCHED INSERT)",
    ),
    "no_clauses__invalid.json": ("DELTA_MERGE_MISSING_WHEN", "There must be at least one WHEN clause"),
    "non_last_condition__invalid.json": (
        "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
        "clause 1, WHEN MATCHED",
    ),
    "star_by_source__invalid.json": (
        "DELTAMERGE_INVALID_CLAUSE_ACTION",
        "UPDATE SET * clauses cannot be part of the WHEN NOT MATCHED BY SOURCE clause in MERGE INTO.",
    ),
    "unknown_field__invalid.json": (
        "DELTAMERGE_INVALID_SPEC_JSON.UNKNOWN_FIELD",
        "Unknown field(s) retries in the spec",
    ),
    "unknown_version__invalid.json": (
        "DELTAMERGE_INVALID_SPEC_JSON.UNKNOWN_VERSION",
        "spec_version 99; this provider reads version 1",
    ),
}


@given(merge_specs())
def test_json_round_trip_is_exact_and_canonical(spec: MergeSpec) -> None:
    text = spec_to_json(spec)
    again = spec_from_json(text)
    assert again == spec
    assert spec_to_json(again) == text
    assert spec_hash(again) == spec_hash(spec)
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert data["spec_version"] == SPEC_VERSION


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_golden_specs_read_and_write_back_canonically(path: Path) -> None:
    data = json.loads(path.read_text())
    spec = spec_from_json(path.read_text())
    assert json.loads(spec_to_json(spec)) == data


def test_spec_hash_of_a_golden_spec_is_stable() -> None:
    # A change here means every recorded merge changes identity: retries would not find their commits.
    spec = spec_from_json((SPECS / "upsert.json").read_text())
    assert spec_hash(spec) == "c064f3a8a683575bc98d7c68b3ee6e1e825822bb066df31e9949978607328071"


def test_specs_that_differ_have_different_hashes() -> None:
    spec = spec_from_json((SPECS / "upsert.json").read_text())
    other = spec_from_json(
        (SPECS / "upsert.json").read_text().replace("t.order_id = s.order_id", "t.id = s.id")
    )
    assert spec_hash(spec) != spec_hash(other)


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_golden_specs_are_refused(path: Path) -> None:
    error_class, text = EXPECTED_ERRORS[path.name]
    with pytest.raises(MergeSpecError) as info:
        spec_from_json(path.read_text())
    assert info.value.error_class == error_class
    assert text in str(info.value)


def test_every_invalid_golden_file_has_an_expected_error() -> None:
    assert sorted(EXPECTED_ERRORS) == [p.name for p in INVALID]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "The merge spec is not valid JSON"),
        ("[1]", "The merge spec JSON must be an object."),
        (
            json.dumps({"spec_version": 1, "clauses": [{"kind": "matched_merge"}]}),
            "clause 1 of the merge spec JSON",
        ),
        (
            json.dumps({"spec_version": 1, "clauses": [], "source": {"kind": "stream"}}),
            "source of the merge spec",
        ),
    ],
)
def test_malformed_json_is_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(MergeSpecError, match=message):
        spec_from_json(text)


def test_json_collects_forbidden_actions_with_the_other_problems() -> None:
    data = json.loads((SPECS / "upsert.json").read_text())
    data["clauses"] = [
        {"kind": "not_matched_delete", "condition": None},
        {"kind": "matched_delete", "condition": None},
        {"kind": "matched_delete", "condition": None},
    ]
    with pytest.raises(MergeSpecError) as info:
        spec_from_json(json.dumps(data))
    message = str(info.value)
    assert (
        "1. [DELTAMERGE_INVALID_CLAUSE_ACTION] DELETE clauses cannot be part of the WHEN NOT MATCHED"
        in message
    )
    assert "2. [DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION]" in message
    assert "(clause 2, WHEN MATCHED DELETE)" in message


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [path] + [p for k, v in value.items() for p in _leaf_paths(v, (*path, k))]
    if isinstance(value, list):
        return [path] + [p for i, v in enumerate(value) for p in _leaf_paths(v, (*path, i))]
    return [path]


@pytest.mark.parametrize("name", ["upsert.json", "cdc_with_deletes.json", "insert_only_from_query.json"])
@pytest.mark.parametrize("wrong", [7, None, True, {"x": 1}, ["a"], [["a", 1]], "text"])
def test_any_value_of_the_wrong_type_anywhere_is_a_spec_error(name: str, wrong: Any) -> None:
    # Every place in the document, given a value of another type: the spec loads, or a MergeSpecError says
    # why; never a raw AttributeError or TypeError.
    original = json.loads((SPECS / name).read_text())
    for path in _leaf_paths(original)[1:]:
        data = json.loads(json.dumps(original))
        *parents, last = path
        holder = data
        for key in parents:
            holder = holder[key]
        holder[last] = wrong
        with contextlib.suppress(MergeSpecError):
            spec_from_json(json.dumps(data))
