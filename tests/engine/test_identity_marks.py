"""Identity high-water marks on a merge that generates identity values but writes no row, against Delta's
runtime, under skipRecordingEmptyCommits=false (the only setting under which such a merge commits).

Delta's write of no row still tracks the marks, and its commit carries the schema as it was (a metaData
action), which makes it Serializable; except on its deletion-vector path with change data (the table writes
both, and Delta's phase 1 found a file to rewrite), whose commit holds its commitInfo alone and is
SnapshotIsolation. Each variant runs on Delta and on the engine, each on its own copy of the table: the
whole outcome (rows, schema, commit, metrics, change data) must be the same, and the isolation level the
one Delta's path gives. The differential suite draws identity columns under this setting in every run; CI runs
one variant a day here, another each day (``of_the_day``, tests/run_profile.py), and locally every one.
"""

from __future__ import annotations

import pytest

from tests.engine.delta_differential import Case
from tests.engine.test_differential_delta import report, run_in_a_folder
from tests.run_profile import of_the_day

_MERGE = "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
# inserts nothing: the one source row's f is NULL
_INSERT = "WHEN NOT MATCHED AND s.f > 0 THEN INSERT (id, f) VALUES (s.id, s.f)"
# acts on no row: the one target row's f is -1.5, the source row's NULL
_BY_SOURCE = _INSERT + "\nWHEN NOT MATCHED BY SOURCE AND t.f > 100 THEN DELETE"
_MATCHED = "WHEN MATCHED AND s.f > 0 THEN DELETE\n" + _INSERT
_SKIP_OFF = {"spark.databricks.delta.skipRecordingEmptyCommits": "false"}
_VECTORS = {"delta.enableDeletionVectors": "true"}
_CHANGES = {"delta.enableChangeDataFeed": "true"}

# name: (the source's key, the clauses, table properties, session confs, Delta's isolation level)
VARIANTS = {
    # a NOT MATCHED BY SOURCE clause makes Delta's phase 1 touch every file, a matched pair the file it is in
    "vectors and change data, NOT MATCHED BY SOURCE": (
        4,
        _BY_SOURCE,
        {**_VECTORS, **_CHANGES},
        _SKIP_OFF,
        "SnapshotIsolation",
    ),
    "vectors and change data, a matched pair no clause acts on": (
        0,
        _MATCHED,
        {**_VECTORS, **_CHANGES},
        _SKIP_OFF,
        "SnapshotIsolation",
    ),
    "vectors only, NOT MATCHED BY SOURCE": (
        4,
        _BY_SOURCE,
        _VECTORS,
        _SKIP_OFF,
        "Serializable",
    ),
    "vectors only, a matched pair no clause acts on": (
        0,
        _MATCHED,
        _VECTORS,
        _SKIP_OFF,
        "Serializable",
    ),
    "change data only, a matched pair no clause acts on": (
        0,
        _MATCHED,
        _CHANGES,
        _SKIP_OFF,
        "Serializable",
    ),
    "vectors and change data, no file touched": (
        4,
        _MATCHED,
        {**_VECTORS, **_CHANGES},
        _SKIP_OFF,
        "Serializable",
    ),
    # an insert-only merge run the classic way: Delta's phase 1 touches the matched pair's file
    "vectors and change data, insert-only run the classic way": (
        0,
        _INSERT,
        {**_VECTORS, **_CHANGES},
        {**_SKIP_OFF, "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled": "false"},
        "SnapshotIsolation",
    ),
}


@pytest.mark.parametrize("name", of_the_day(list(VARIANTS)))
def test_an_empty_write_records_the_marks_as_delta_does(spark, tmp_path_factory, name):
    key, clauses, properties, confs, isolation = VARIANTS[name]
    case = Case(
        target_columns=("id", "f"),
        source_columns=("id", "f"),
        target_rows=({"id": 0, "f": -1.5},),
        source_rows=({"id": key, "f": None},),
        statement=_MERGE + clauses,
        confs=confs,
        properties=properties,
        features=("identity",),
        two_phases=True,
    )
    delta, ours = run_in_a_folder(spark, tmp_path_factory, case)
    assert delta.error_class is None, report(case, delta, ours)
    assert delta.commit["isolationLevel"] == isolation, report(case, delta, ours)
    assert delta.observed() == ours.observed(), report(case, delta, ours)
