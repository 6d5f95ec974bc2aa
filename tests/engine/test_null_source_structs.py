"""A NULL source struct under schema evolution's ``UPDATE SET *``, against Delta's runtime.

Where the source's struct has every field of the target's, Delta writes a NULL source struct NULL. Where it
lacks one of the target's fields, the target's value of that field has to come from somewhere: these cases
run the statement on Delta and on the engine, each on its own copy of the tables, and compare the whole
outcome (rows, schema, commit, metrics, change data). The source's struct is narrowed in the statement's
source query, as a user's extract that dropped a field would have it.

Delta keeps the target's value of the field the source lacks through a NULL source struct (``{a: NULL, b:
'x'}`` over ``{a: 1, b: 'x'}``), and so does the engine (resolve/casting ``_by_name``). With the target's
struct never kept through a NULL source struct, the first case fails: the engine writes NULL there. CI runs
one case a day, another each day (``of_the_day``, tests/run_profile.py); locally every one runs.
"""

from __future__ import annotations

import pytest

from tests.engine.delta_differential import AUTO_MERGE, Case
from tests.engine.test_differential_delta import report, run_in_a_folder
from tests.run_profile import of_the_day

# The source's st without b: NULL where the source row's st is NULL, else {a}; or {a, c} with a new field.
_NARROWED = {
    "lacks b": "IF(st IS NULL, NULL, named_struct('a', st.a))",
    "lacks b, brings c": "IF(st IS NULL, NULL, named_struct('a', st.a, 'c', 'new'))",
    "lacks b, a non-NULL struct of NULLs": "named_struct('a', st.a)",
}
_CLAUSES = {
    "UPDATE SET *": "WHEN MATCHED THEN UPDATE SET *",
    "UPDATE SET * and INSERT *": "WHEN MATCHED THEN UPDATE SET *\nWHEN NOT MATCHED THEN INSERT *",
}


@pytest.mark.parametrize(
    ("narrowed", "clauses"),
    of_the_day(
        [
            ("lacks b", "UPDATE SET *"),
            ("lacks b", "UPDATE SET * and INSERT *"),
            ("lacks b, brings c", "UPDATE SET * and INSERT *"),
            ("lacks b, a non-NULL struct of NULLs", "UPDATE SET *"),
        ]
    ),
)
def test_a_null_source_struct_updates_as_deltas_does(spark, tmp_path_factory, narrowed, clauses):
    statement = (
        f"MERGE INTO delta.`{{target}}` AS t USING (SELECT id, {_NARROWED[narrowed]} AS st "
        f"FROM parquet.`{{source}}`) AS s ON t.id = s.id\n{_CLAUSES[clauses]}"
    )
    case = Case(
        target_columns=("id", "st"),
        source_columns=("id", "st"),
        # every combination of a NULL and a non-NULL struct on both sides, and a struct of NULLs
        target_rows=(
            {"id": 0, "st": {"a": 1, "b": "x"}},
            {"id": 1, "st": {"a": 2, "b": "y"}},
            {"id": 2, "st": None},
            {"id": 3, "st": None},
            {"id": 4, "st": {"a": None, "b": None}},
        ),
        source_rows=(
            {"id": 0, "st": None},
            {"id": 1, "st": {"a": 5, "b": "q"}},
            {"id": 2, "st": None},
            {"id": 3, "st": {"a": 6, "b": None}},
            {"id": 4, "st": None},
            {"id": 7, "st": None},
        ),
        statement=statement,
        confs={AUTO_MERGE: "true"},
    )
    delta, ours = run_in_a_folder(spark, tmp_path_factory, case)
    assert delta.error_class is None, report(case, delta, ours)
    assert delta.observed() == ours.observed(), report(case, delta, ours)
