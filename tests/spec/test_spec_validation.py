"""Structural checks at construction: every problem, in Delta's words, named by clause, raised once."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec import (
    MatchedUpdate,
    MergeClause,
    MergeSpec,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
    PathSource,
    check_clauses,
    delete,
    delete_by_source,
    insert,
    insert_all,
    update,
    update_all,
    update_by_source,
)


def spec(*clauses: MergeClause, **fields: Any) -> MergeSpec:
    return MergeSpec(
        **{
            "target": "/data/orders",
            "source": PathSource("/staging/orders"),
            "condition": "t.id = s.id",
            **fields,
        },
        clauses=clauses,
    )


def raised(*clauses: MergeClause, **fields: Any) -> MergeSpecError:
    with pytest.raises(MergeSpecError) as info:
        spec(*clauses, **fields)
    return info.value


@pytest.mark.parametrize(
    "clauses",
    [
        (update({"qty": "s.qty"}), insert_all(), delete_by_source()),
        (update_all(except_columns=["created_at"]),),
        (update({"t.addr.city": "s.city", "t.addr.zip": "s.zip", "name": "s.name"}),),
        (delete(condition="s.op = 'D'"), update({"qty": "s.qty"}, condition="s.op = 'U'"), update_all()),
        (insert({"id": "s.id", "t.qty": "s.qty"}, condition="s.op = 'I'"), insert_all()),
        (update_by_source({"active": "false"}, condition="t.active"), delete_by_source()),
    ],
)
def test_valid_specs_are_accepted(clauses: tuple[MergeClause, ...]) -> None:
    assert spec(*clauses).clauses == clauses


def test_no_when_clause() -> None:
    error = raised()
    assert error.error_class == "DELTA_MERGE_MISSING_WHEN"
    assert "There must be at least one WHEN clause in a MERGE statement." in str(error)


@pytest.mark.parametrize(
    ("clauses", "error_class", "text", "where"),
    [
        (
            (update({"a": "s.a"}), delete()),
            "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
            "When there are more than one MATCHED clauses in a MERGE statement, only the last MATCHED clause "
            "can omit the condition.",
            "clause 1, WHEN MATCHED UPDATE",
        ),
        (
            (insert_all(), insert({"id": "s.id"}, condition="s.x")),
            "DELTA_NON_LAST_NOT_MATCHED_CLAUSE_OMIT_CONDITION",
            "When there are more than one NOT MATCHED clauses in a MERGE statement, only the last "
            "NOT MATCHED clause can omit the condition",
            "clause 1, WHEN NOT MATCHED INSERT",
        ),
        (
            (delete_by_source(), update_all(), update_by_source({"a": "1"})),
            "DELTA_NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
            "When there are more than one NOT MATCHED BY SOURCE clauses in a MERGE statement, only the last "
            "NOT MATCHED BY SOURCE clause can omit the condition.",
            "clause 1, WHEN NOT MATCHED BY SOURCE DELETE",
        ),
    ],
)
def test_only_the_last_clause_of_a_kind_may_omit_its_condition(
    clauses: tuple[MergeClause, ...], error_class: str, text: str, where: str
) -> None:
    error = raised(*clauses)
    assert error.error_class == error_class
    assert text in str(error)
    assert f"({where})" in str(error)
    assert "Give this clause a condition or move it after the others of its kind." in str(error)


def test_clauses_of_other_kinds_do_not_count_for_the_omitted_condition_rule() -> None:
    # Given: one unconditional clause per group, interleaved
    clauses = (insert_all(), update_all(), delete_by_source())
    # Then: each is the last of its group
    assert spec(*clauses).clauses == clauses


@pytest.mark.parametrize(
    ("clause", "column_list"),
    [
        (MatchedUpdate(set=(("qty", "s.qty"), ("QTY", "0"))), "[`qty`, `QTY`]"),
        (MatchedUpdate(set=(("t.addr", "s.addr"), ("addr.city", "s.city"))), "[`addr`, `addr.city`]"),
        (NotMatchedBySourceUpdate(set=(("a.b.c", "1"), ("t.a.b", "null"))), "[`a.b.c`, `a.b`]"),
    ],
)
def test_a_column_set_twice_or_with_its_own_field_conflicts(clause: MergeClause, column_list: str) -> None:
    error = raised(clause)
    assert error.error_class == "DELTA_CONFLICT_SET_COLUMN"
    assert f"There is a conflict from these SET columns: {column_list}." in str(error)
    kind = "WHEN MATCHED UPDATE" if isinstance(clause, MatchedUpdate) else "WHEN NOT MATCHED BY SOURCE UPDATE"
    assert f"(clause 1, {kind})" in str(error)


def test_sibling_fields_of_one_struct_do_not_conflict() -> None:
    assert spec(update({"addr.city": "s.city", "addr.cityzip": "s.zip"}))


def test_duplicate_insert_columns() -> None:
    error = raised(NotMatchedInsert(values=(("id", "s.id"), ("t.ID", "s.id + 1"))))
    assert error.error_class == "DELTA_DUPLICATE_COLUMNS_ON_INSERT"
    assert "Duplicate column names in INSERT clause (clause 1, WHEN NOT MATCHED INSERT)" in str(error)


def test_nested_field_as_insert_target() -> None:
    error = raised(insert({"id": "s.id", "t.addr.city": "s.city"}))
    assert error.error_class == "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION"
    assert (
        "Nested field is not supported in the INSERT clause of MERGE operation (field = addr.city). "
        "(clause 1, WHEN NOT MATCHED INSERT) Insert the whole struct `addr`"
    ) in str(error)


@pytest.mark.parametrize(
    ("clause", "action", "fix"),
    [
        (MatchedUpdate(), "UPDATE SET", "or use update_all() for *"),
        (NotMatchedInsert(), "INSERT", "or use insert_all() for *"),
        (NotMatchedBySourceUpdate(), "UPDATE SET", "or use delete_by_source() to drop the rows"),
    ],
)
def test_empty_assignment_lists(clause: MergeClause, action: str, fix: str) -> None:
    error = raised(clause)
    assert error.error_class == "DELTAMERGE_EMPTY_ASSIGNMENTS"
    assert f"{action} needs at least one column." in str(error)
    assert fix in str(error)


def test_star_with_assignments_and_except_without_star() -> None:
    error = raised(
        MatchedUpdate(set=(("a", "s.a"),), star=True, condition="s.x"),
        NotMatchedInsert(values=(("a", "s.a"),), except_columns=("b",)),
    )
    assert (
        "A clause is either UPDATE SET * or lists its columns, not both. (clause 1, WHEN MATCHED UPDATE)"
        in str(error)
    )
    assert "EXCEPT (b) is only allowed after *. (clause 2, WHEN NOT MATCHED INSERT)" in str(error)


@pytest.mark.parametrize("blank", ["", "   ", "\n"])
def test_blank_conditions(blank: str) -> None:
    error = raised(delete(condition=blank), condition=blank)
    assert error.error_class == "DELTAMERGE_BLANK_CONDITION"
    assert "The merge condition is blank. (ON)" in str(error)
    assert "The clause condition is blank. (clause 1, WHEN MATCHED DELETE)" in str(error)


def test_invalid_assignment_column_names() -> None:
    error = raised(update({"t..a": "1", "a b": "2"}))
    assert error.error_class == "DELTAMERGE_INVALID_COLUMN_NAME"
    assert "'t..a' is not a column name." in str(error)
    assert "'a b' is not a column name." in str(error)


def test_aliases_must_be_names_and_differ() -> None:
    # Delta's analysis finds the ON condition's `t`.`id` on both sides.
    ambiguous = raised(update_all(), target_alias="T", source_alias="t")
    assert ambiguous.error_class == "AMBIGUOUS_REFERENCE"
    assert "Reference `t`.`id` is ambiguous, could be: [`t`.`id`, `t`.`id`]. (ON)" in str(ambiguous)
    unqualified = raised(update_all(), target_alias="T", source_alias="t", condition="id = key")
    assert "The target and the source both have the alias T." in str(unqualified)
    assert "'a.b' is not a valid alias. (source alias)" in str(raised(update_all(), source_alias="a.b"))


@pytest.mark.parametrize(
    ("keys", "order_by", "text"),
    [
        (("id",), (), "Source de-duplication needs an ordering (deduplicate_order_by)."),
        ((), ("ts",), "Source de-duplication needs key columns (deduplicate_source_by)."),
    ],
)
def test_deduplication_needs_keys_and_an_ordering(
    keys: tuple[str, ...], order_by: tuple[str, ...], text: str
) -> None:
    error = raised(update_all(), deduplicate_source_by=keys, deduplicate_order_by=order_by)
    assert error.error_class == "DELTAMERGE_INVALID_DEDUPLICATION"
    assert text in str(error)


def test_every_problem_is_reported_at_once_in_clause_order() -> None:
    # Given: four faulty clauses and a blank ON condition
    error = raised(
        update({"a": "s.a"}),
        MatchedUpdate(set=(("a", "1"), ("a", "2")), condition="s.x"),
        insert({"id": "s.id"}),
        NotMatchedInsert(values=(("id", "s.id"),), condition=" "),
        condition="",
    )
    # Then: one error, numbered, with each problem at its clause
    message = str(error)
    assert message.startswith("[DELTAMERGE_BLANK_CONDITION] 5 problems in the merge spec:")
    classes = re.findall(r"^\d+\. \[(\w+)\]", message, flags=re.MULTILINE)
    assert classes == [
        "DELTAMERGE_BLANK_CONDITION",
        "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
        "DELTA_CONFLICT_SET_COLUMN",
        "DELTA_NON_LAST_NOT_MATCHED_CLAUSE_OMIT_CONDITION",
        "DELTAMERGE_BLANK_CONDITION",
    ]
    assert "(clause 2, WHEN MATCHED UPDATE)" in message and "(clause 4, WHEN NOT MATCHED INSERT)" in message


def test_check_clauses_alone_checks_the_clause_grammar() -> None:
    with pytest.raises(MergeSpecError, match=r"clause 1, WHEN MATCHED DELETE"):
        check_clauses([delete(), delete()])
    check_clauses([delete(condition="s.op = 'D'"), delete()])


def test_specs_are_immutable_values_with_a_readable_repr() -> None:
    clause = update({"qty": "s.qty"}, condition="s.qty > 0")
    assert repr(clause) == "MatchedUpdate(set={'qty': 's.qty'}, condition='s.qty > 0')"
    assert repr(insert_all(except_columns=["x"])) == "NotMatchedInsert(star=True, except_columns=('x',))"
    merge = spec(clause)
    with pytest.raises(AttributeError):
        merge.condition = "1 = 1"  # type: ignore[misc]
    assert merge == spec(update({"qty": "s.qty"}, condition="s.qty > 0"))
