"""A struct, array or map assigned to a column of another kind (or the reverse), against Delta's runtime.

Delta's ``castIfNeeded`` matches structs by name only where both sides are structs (arrays and maps of
structs likewise); any other pair goes to the policy's ``Cast`` or ``UpCast``, so Spark's cast rules decide:
a struct into a STRING column is written as its text where the policy casts it, a struct into an INT column
fails with the policy's cast error, not with "All nested columns must match". Each case runs the statement
on Delta and on the engine and compares the whole outcome.
"""

from __future__ import annotations

import pytest

from tests.engine.delta_differences import message_explained_by
from tests.engine.delta_differential import Case, message_agrees
from tests.engine.test_differential_delta import report, run_in_a_folder
from tests.run_profile import covering

_ASSIGNMENTS = {
    "a struct into a STRING": "t.name = s.st",
    "a struct into an INT": "t.v = s.st",
    "an INT into a struct": "t.st = s.v",
    "an array into a STRING": "t.name = s.arr",
    "a map into an array": "t.arr = s.m",
}
_COLUMNS = ("id", "v", "name", "st", "arr", "m")
_POLICIES = ["STRICT", "ANSI", "LEGACY"]


# Every pairing locally; in CI each assignment under one policy, each policy at least once, shifted daily.
@pytest.mark.parametrize(("policy", "assignment"), covering(_POLICIES, sorted(_ASSIGNMENTS)))
def test_a_value_of_another_kind_is_cast_as_on_delta(spark, tmp_path_factory, policy, assignment):
    rows = (
        {"id": 1, "v": 7, "name": "x", "st": {"a": 1, "b": "p"}, "arr": [1, 2], "m": {"k": 3}},
        {"id": 2, "v": None, "name": None, "st": None, "arr": None, "m": None},
    )
    case = Case(
        target_columns=_COLUMNS,
        source_columns=_COLUMNS,
        target_rows=rows,
        source_rows=rows,
        statement="MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
        f"WHEN MATCHED THEN UPDATE SET {_ASSIGNMENTS[assignment]}",
        confs={"spark.sql.storeAssignmentPolicy": policy},
    )
    delta, ours = run_in_a_folder(spark, tmp_path_factory, case)
    assert delta.observed() == ours.observed(), report(case, delta, ours)
    assert message_agrees(delta, ours) or message_explained_by(delta, ours), report(case, delta, ours)
