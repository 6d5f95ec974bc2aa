"""``* EXCEPT`` judged against Delta (tests/engine/delta_differential.py): our Python clauses leave a column
out of ``*``, which Spark's grammar cannot say, so Delta runs the equivalent ``delta_statement`` writes, and
the whole outcome must agree, with schema evolution off and on. The generated suite draws such cases too;
these two always run.
"""

from __future__ import annotations

import pytest

from tests.engine.delta_differential import AUTO_MERGE, Case, delta_statement, run_case

ROWS = ({"id": 1, "v": 1, "name": "a"}, {"id": 2, "v": 2, "name": "b"})
SOURCE = ({"id": 2, "v": 20, "name": "z", "extra": "e"}, {"id": 3, "v": 30, "name": "y", "extra": None})
UPSERT_ALL = (
    "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
    "WHEN MATCHED THEN UPDATE SET *\n"
    "WHEN NOT MATCHED THEN INSERT *"
)


@pytest.mark.parametrize("evolution", [False, True], ids=["evolution-off", "evolution-on"])
def test_star_except_agrees_with_delta_on_its_equivalent(spark, tmp_path, evolution):
    case = Case(
        target_columns=("id", "v", "name"),
        source_columns=("id", "v", "name", "extra"),
        target_rows=ROWS,
        source_rows=SOURCE,
        statement=UPSERT_ALL,
        confs={AUTO_MERGE: "true"} if evolution else {},
        excepted="name",
    )
    # Delta's statement: written out without evolution, the source narrowed under it
    assert ("EXCEPT (name)" in delta_statement(case)) is evolution
    delta, ours = run_case(spark, case, tmp_path)
    assert delta.error_class is None and delta.observed() == ours.observed()
    # the matched row kept its name, the inserted one has none; evolution added the source's new column
    assert [(r["id"], r["v"], r["name"]) for r in ours.rows] == [(1, 1, "a"), (2, 20, "b"), (3, 30, None)]
    assert ("extra" in ours.schema) is evolution
