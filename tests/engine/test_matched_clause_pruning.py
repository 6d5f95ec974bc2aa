"""A merge of MATCHED clauses only reads the files some clause may act on, judged by the clauses' conjuncts
that name the target's partition columns alone, as Delta's data skipping does
(``MergeIntoCommandBase.getTargetOnlyPredicates``): a target row matched by several source rows in a file no
clause can act on is never read, so it is no error. Each statement runs on Delta's runtime and on the
engine, each on its own copy of the table: the whole outcome (error or rows, schema, commit, file metrics)
must be the same. The differential suite draws MATCHED-only merges into partitioned tables in every run; CI
runs one statement a day here, another each day (``of_the_day``, tests/run_profile.py), locally all.
"""

from __future__ import annotations

import pytest

from tests.engine.delta_differential import Case
from tests.engine.test_differential_delta import report, run_in_a_folder
from tests.run_profile import of_the_day

# ON a range: target row 5 of partition 'b' is matched by source rows 4 and 5, target row 2 by 1 and 2.
_MERGE = "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id BETWEEN s.id AND s.id + 1\n"
_TARGET = ({"id": 5, "name": "b"}, {"id": 2, "name": "b"}, {"id": 7, "name": None}, {"id": 9, "name": "c"})
_SOURCE = tuple({"id": k, "name": "a"} for k in (1, 2, 4, 5, 6, 7))

# name: (clauses, whether Delta fails with the multiple match)
STATEMENTS = {
    # no clause can act in partition 'b' (nor in the NULL one, where <> is NULL): Delta reads neither
    "clauses exclude the multiply matched partitions": (
        "WHEN MATCHED AND t.name <> 'b' THEN DELETE\n"
        "WHEN MATCHED AND t.name IS NULL AND s.name = 'z' THEN UPDATE SET t.id = s.id",
        False,
    ),
    "a clause on another partition": ("WHEN MATCHED AND t.name = 'c' THEN UPDATE SET t.id = s.id", False),
    # a clause that may act anywhere: every file is read, and the multiple match fails the merge
    "a clause without a condition on the target": (
        "WHEN MATCHED AND t.name = 'c' THEN DELETE\nWHEN MATCHED AND s.name = 'z' THEN DELETE",
        True,
    ),
    "a clause that may act in the partition": ("WHEN MATCHED AND t.name >= 'b' THEN DELETE", True),
}


@pytest.mark.parametrize("name", of_the_day(list(STATEMENTS)))
def test_a_matched_only_merge_skips_the_partitions_no_clause_acts_in_as_delta_does(
    spark, tmp_path_factory, name
):
    clauses, fails = STATEMENTS[name]
    case = Case(
        target_columns=("id", "name"),
        source_columns=("id", "name"),
        target_rows=_TARGET,
        source_rows=_SOURCE,
        statement=_MERGE + clauses,
        partition_by="name",
        two_phases=True,
    )
    delta, ours = run_in_a_folder(spark, tmp_path_factory, case)
    multiple = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    assert (delta.error_class == multiple) is fails, report(case, delta, ours)
    assert delta.observed() == ours.observed(), report(case, delta, ours)
