"""Which error a merge with two refused clauses fails with, against Delta's runtime.

Delta refuses a struct whose fields do not match its column's while it builds each clause's expressions
(``UpdateExpressionsSupport.castIfNeeded`` throws DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION), but leaves a value
its policy cannot cast to a ``Cast`` or ``UpCast`` that Spark's analyzer fails only once the whole command is
built. So the struct's error wins whichever clause comes first, under every store assignment policy. Each
case runs the statement on Delta and on the engine and compares the whole outcome; with the engine raising
each refused cast at once (resolve/casting ``_refuse``), the "cast first" cases fail.

Within one clause, Delta aligns the assignments with the table's columns before it casts them, so of two
struct columns whose fields do not match, the error names the first in the table's order, whatever order the
clause writes them in (found by the long run: seed 20261331, statement 960).
"""

from __future__ import annotations

import pytest

from tests.engine.delta_differential import Case, message_agrees
from tests.engine.test_differential_delta import report, run_in_a_folder
from tests.run_profile import covering

# A BOOLEAN into the DATE day: no policy casts it (Spark's canCast, canAnsiCast and canUpCast all refuse).
_REFUSED_CAST = "WHEN NOT MATCHED AND s.id > 1 THEN INSERT (id, day) VALUES (s.id, s.flag)"
# A struct lacking the column's field a, without schema evolution: "All nested columns must match". Both
# clauses have a condition, so that either may come first.
_STRUCT_MISMATCH = (
    "WHEN NOT MATCHED AND s.id > 0 THEN INSERT (id, nest) VALUES (s.id, named_struct('d', s.id))"
)
_ORDERS = {
    "cast first": f"{_REFUSED_CAST}\n{_STRUCT_MISMATCH}",
    "struct first": f"{_STRUCT_MISMATCH}\n{_REFUSED_CAST}",
}


# Every pairing locally; in CI each policy with one order, both orders at least once, shifted daily.
@pytest.mark.parametrize(("policy", "order"), covering(["STRICT", "ANSI", "LEGACY"], sorted(_ORDERS)))
def test_a_struct_mismatch_wins_over_a_refused_cast_as_on_delta(spark, tmp_path_factory, policy, order):
    rows = (
        {"id": 1, "nest": None, "day": None, "flag": True},
        {"id": 2, "nest": {"a": {"b": 1, "c": "p"}, "d": 0}, "day": None, "flag": False},
    )
    case = Case(
        target_columns=("id", "nest", "day", "flag"),
        source_columns=("id", "nest", "day", "flag"),
        target_rows=rows[:1],
        source_rows=rows,
        statement="MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
        + _ORDERS[order],
        confs={"spark.sql.storeAssignmentPolicy": policy},
    )
    delta, ours = run_in_a_folder(spark, tmp_path_factory, case)
    assert delta.error_class == "DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION", report(case, delta, ours)
    assert delta.observed() == ours.observed(), report(case, delta, ours)


# Two struct columns whose values lack a field of theirs; st comes before nest in the table.
_TWO_MISMATCHES = {
    "INSERT": "WHEN NOT MATCHED THEN INSERT ({first}, {second}, id) VALUES ({values})",
    "UPDATE": "WHEN MATCHED THEN UPDATE SET {assignments}",
}
_STRUCT_VALUES = {"st": "named_struct('b', 'x')", "nest": "named_struct('d', s.id)"}


@pytest.mark.parametrize("clause", sorted(_TWO_MISMATCHES))
@pytest.mark.parametrize("written", [("st", "nest"), ("nest", "st")], ids=["table order", "other order"])
def test_of_two_mismatched_structs_the_error_names_the_tables_first_as_on_delta(
    spark, tmp_path_factory, clause, written
):
    first, second = written
    statement = _TWO_MISMATCHES[clause].format(
        first=first,
        second=second,
        values=f"{_STRUCT_VALUES[first]}, {_STRUCT_VALUES[second]}, s.id",
        assignments=", ".join(f"t.{c} = {_STRUCT_VALUES[c]}" for c in written),
    )
    rows = ({"id": 1, "st": {"a": 1, "b": "x"}, "nest": {"a": {"b": 1, "c": "p"}, "d": 0}},)
    case = Case(
        target_columns=("id", "st", "nest"),
        source_columns=("id", "st", "nest"),
        target_rows=rows if clause == "UPDATE" else (),
        source_rows=rows,
        statement="MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
        + statement,
    )
    delta, ours = run_in_a_folder(spark, tmp_path_factory, case)
    assert delta.error_class == "DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION", report(case, delta, ours)
    assert delta.observed() == ours.observed(), report(case, delta, ours)
    assert "column st:" in (ours.message or ""), report(case, delta, ours)
    assert message_agrees(delta, ours), report(case, delta, ours)
