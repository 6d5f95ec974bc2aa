"""Statements the differential suite (tests/engine/test_differential_delta.py) once failed on, kept as
explicit examples: every run, in every profile, judges them first, whatever its seed draws.

When a run fails, Hypothesis prints the falsifying ``Case`` whole; add it here as it is printed (with the
imports its values need), with a line on what it found, in the same change as the fix or the deliberate
difference that explains it.
"""

from __future__ import annotations

import datetime
from decimal import Decimal

from tests.engine.delta_differential import INT_MAX, Case

_MIDNIGHT = datetime.datetime(2026, 1, 3, tzinfo=datetime.UTC)

# The rows of both sides of one example below (Hypothesis drew the same rows for each).
_FLAGGED_ROWS = (
    {"id": 2, "flag": False, "v": INT_MAX, "m": {"k": 1}, "ntz": None},
    {"id": 1, "ntz": datetime.datetime(2026, 1, 3, 0, 0), "v": None, "flag": False, "m": {"k": 1}},
    {"id": 3, "v": None, "flag": True, "m": None, "ntz": None},
    {"flag": True, "v": None, "m": None, "ntz": None, "id": 2},
    {"id": 5, "flag": None, "m": None, "v": None, "ntz": None},
)

# Two failing rows, another error each: tests/engine/test_delta_differences.py shows the difference on it.
OVERFLOW_AND_BROKEN_CHECK = Case(
    target_columns=("id", "v", "nest"),
    source_columns=("id", "v", "nest"),
    target_rows=(
        {"nest": {"d": 1, "a": {"b": None, "c": "p"}}, "id": 2, "v": None},
        {"id": 5, "v": 2, "nest": None},
        {"v": INT_MAX, "id": 2, "nest": {"a": {"c": "p", "b": None}, "d": None}},
        {"id": 2, "nest": {"a": None, "d": 2}, "v": INT_MAX},
        {"v": None, "id": 3, "nest": {"d": 0, "a": {"c": None, "b": 0}}},
        {"nest": None, "v": INT_MAX, "id": 0},
    ),
    source_rows=({"nest": {"a": {"c": "p", "b": 2}, "d": 0}, "id": 0, "v": None},),
    statement=(
        "MERGE INTO delta.`{target}` AS t USING (SELECT * FROM parquet.`{source}` WHERE rand() < 2) AS s "
        "ON t.id = s.id\n"
        "WHEN MATCHED AND s.v < 2 THEN UPDATE SET *\n"
        "WHEN MATCHED AND t.nest.a.b > 0 THEN DELETE\n"
        "WHEN NOT MATCHED BY SOURCE AND t.nest.a IS NULL THEN UPDATE SET t.v = t.v * 2\n"
        "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET t.v = t.v * 2"
    ),
    properties={"delta.enableChangeDataFeed": "true"},
    features=("rowTracking", "v2Checkpoint", "checkConstraint", "notNull", "clustering"),
    excepted="v",
)

FAILED_BEFORE: tuple[Case, ...] = (
    # An empty merge committed under skipRecordingEmptyCommits=false: Delta records SnapshotIsolation for a
    # commit that changes no data, the engine recorded Serializable (fixed in delta/commit/commit_actions).
    Case(
        target_columns=("id", "arr", "big"),
        source_columns=("id", "arr", "big"),
        target_rows=(),
        source_rows=(),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
            "WHEN NOT MATCHED THEN INSERT *"
        ),
        confs={
            "spark.sql.storeAssignmentPolicy": "LEGACY",
            "spark.sql.ansi.enabled": "false",
            "spark.databricks.delta.skipRecordingEmptyCommits": "false",
            "spark.sql.caseSensitive": "true",
        },
        properties={"delta.enableDeletionVectors": "true"},
    ),
    # A range in ON with MATCHED and NOT MATCHED BY SOURCE clauses: Delta's numSourceRows is twice the
    # source's rows (the source-rows-counted-once difference).
    Case(
        target_columns=("id", "flag"),
        source_columns=("id", "flag"),
        target_rows=(
            {"id": 3, "flag": False},
            {"id": 2, "flag": False},
            {"flag": True, "id": 4},
            {"flag": False, "id": 2},
        ),
        source_rows=(
            {"id": 2, "flag": False},
            {"flag": None, "id": 3},
            {"flag": True, "id": 5},
            {"id": 1, "flag": False},
            {"flag": False, "id": 4},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s"
            " ON t.id BETWEEN s.id AND s.id + 1 AND t.flag IS NULL\n"
            "WHEN MATCHED AND t.flag IS NULL THEN UPDATE SET *\n"
            "WHEN MATCHED AND t.flag IS NULL THEN UPDATE SET t.flag = s.flag\n"
            "WHEN NOT MATCHED AND s.flag THEN INSERT *\n"
            "WHEN NOT MATCHED AND s.flag IS NULL THEN INSERT (id) VALUES (s.id)\n"
            "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET t.flag = NOT t.flag"
        ),
        partition_by="flag",
        confs={"spark.sql.ansi.enabled": "false"},
        features=("columnMapping", "rowTracking"),
    ),
    # Only inserts, the change feed on, and a file Delta rewrites that the engine leaves alone: Delta writes
    # the inserts' change rows into change files, the engine leaves them to its added files; the feed's rows
    # are the same (change files are no longer compared, the feed's rows are).
    Case(
        target_columns=("id", "v", "bin", "day", "st"),
        source_columns=("id", "v", "bin", "day", "st", "extra"),
        target_rows=(
            {"st": None, "bin": b"\x00\xff", "v": INT_MAX, "day": datetime.date(2026, 1, 2), "id": 0},
            {"id": 2, "bin": b"\x00\xff", "day": None, "st": None, "v": None},
            {"st": {"b": "x", "a": None}, "bin": b"", "id": 5, "day": None, "v": 2},
        ),
        source_rows=(
            {
                "st": {"b": "x", "a": 1},
                "day": datetime.date(2026, 1, 4),
                "bin": b"ab",
                "extra": "e",
                "id": 5,
                "v": INT_MAX,
            },
            {"id": 4, "bin": b"", "extra": None, "v": 1, "st": {"a": 2, "b": None}, "day": None},
            {"v": None, "st": None, "day": datetime.date(2026, 1, 1), "extra": "e", "id": 1, "bin": b"ab"},
            {"v": -1, "bin": b"ab", "extra": "e", "id": 5, "day": None, "st": None},
            {
                "v": INT_MAX,
                "day": datetime.date(2026, 1, 2),
                "extra": None,
                "bin": b"",
                "id": 3,
                "st": None,
            },
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s"
            " ON t.id BETWEEN s.id AND s.id + 1 AND s.v IS NULL\n"
            "WHEN NOT MATCHED AND s.v < 2 THEN INSERT (id, st, day) VALUES (s.id, s.st, date_add(s.day, 7))\n"
            "WHEN NOT MATCHED THEN INSERT (id, day, st, bin)"
            " VALUES (s.id, date_add(s.day, 7), named_struct('a', s.st.a, 'b', 'z'), unhex('0A'))\n"
            "WHEN NOT MATCHED BY SOURCE AND t.v IS NULL THEN DELETE\n"
            "WHEN NOT MATCHED BY SOURCE AND t.st.a > 0 THEN DELETE"
        ),
        confs={"spark.databricks.delta.skipRecordingEmptyCommits": "false"},
        properties={"delta.enableChangeDataFeed": "true"},
        features=(
            "clustering",
            "rowTracking",
            "variant",
            "default",
            "generated",
            "columnMapping",
            "typeWidening",
        ),
    ),
    # Inserts by the classic executor into a one-file table, matched by a range: the one query's full outer
    # nested-loop join read the source twice and counted numSourceRows twice (engine/execute/one_query.py
    # now takes the count of the materialized source, as the two phases' is).
    Case(
        target_columns=("id", "amount"),
        source_columns=("id", "amount", "extra"),
        target_rows=({"id": 5, "amount": None}, {"id": 4, "amount": None}, {"id": 0, "amount": None}),
        source_rows=(
            {"id": 0, "amount": None, "extra": "e"},
            {"id": 5, "amount": None, "extra": "e"},
            {"id": 3, "amount": None, "extra": "e"},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s"
            " ON t.id BETWEEN s.id AND s.id + 1\n"
            "WHEN NOT MATCHED AND s.extra IS NULL THEN INSERT (id) VALUES (s.id)"
        ),
        confs={
            "spark.sql.storeAssignmentPolicy": "LEGACY",
            "spark.sql.ansi.enabled": "false",
            "spark.databricks.delta.skipRecordingEmptyCommits": "false",
            "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled": "false",
            "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag": "true",
        },
        properties={"delta.enableChangeDataFeed": "true"},
        catalog=True,
    ),
    # A range ON, MATCHED and NOT MATCHED clauses under schema evolution: Delta counted the source twice, as
    # it does with a NOT MATCHED BY SOURCE clause (source-rows-counted-once now names both cases).
    Case(
        target_columns=("id", "amount"),
        source_columns=("id", "amount", "extra"),
        target_rows=({"id": 0, "amount": None}, {"id": 0, "amount": None}, {"id": 0, "amount": None}),
        source_rows=(
            {"id": 0, "amount": None, "extra": "e"},
            {"id": 5, "amount": None, "extra": "e"},
            {"id": 3, "amount": None, "extra": "e"},
        ),
        statement=(
            "MERGE WITH SCHEMA EVOLUTION INTO delta.`{target}` AS t USING parquet.`{source}` AS s"
            " ON t.id BETWEEN s.id AND s.id + 1\n"
            "WHEN MATCHED THEN UPDATE SET *\n"
            "WHEN NOT MATCHED AND s.amount > 1.5 THEN INSERT *\n"
            "WHEN NOT MATCHED AND s.amount > 1.5 THEN INSERT *"
        ),
        confs={
            "spark.sql.ansi.enabled": "false",
            "spark.databricks.delta.skipRecordingEmptyCommits": "false",
            "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled": "false",
            "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag": "true",
        },
        properties={"delta.enableChangeDataFeed": "true"},
        catalog=True,
    ),
    # Rows breaking two NOT NULL columns (a NULL key inserted, a struct left out): Delta named the key, the
    # engine the struct, each the first violation its tasks met (another-null-column).
    Case(
        target_columns=("id", "nest"),
        source_columns=("id", "nest"),
        target_rows=({"id": 0, "nest": {"a": None, "d": None}}, {"id": 0, "nest": {"a": None, "d": None}}),
        source_rows=(
            {"id": None, "nest": None},
            {"id": 2, "nest": None},
            {"id": 3, "nest": None},
            {"id": 5, "nest": None},
            {"id": 1, "nest": None},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s"
            " ON t.ID = s.ID AND s.nest.a IS NULL\n"
            "WHEN NOT MATCHED AND s.nest.a IS NULL THEN INSERT (id) VALUES (s.ID)\n"
            "WHEN NOT MATCHED AND s.nest.a.b > 0 THEN INSERT (id, nest) VALUES (s.ID, s.nest)\n"
            "WHEN NOT MATCHED BY SOURCE AND t.nest.a IS NULL"
            " THEN UPDATE SET t.nest = named_struct('a', t.nest.a, 'd', t.nest.d + 1)\n"
            "WHEN NOT MATCHED BY SOURCE AND t.nest.a.b > 0 THEN DELETE"
        ),
        confs={"spark.sql.caseSensitive": "false"},
        features=(
            "checkConstraint",
            "clustering",
            "columnMapping",
            "default",
            "generated",
            "identity",
            "notNull",
            "rowTracking",
            "variant",
            "typeWidening",
        ),
        catalog=True,
    ),
    # Delta counted the rows of a filtered (non-deterministic) source query twice with a range ON and NOT
    # MATCHED clauses, where source-rows-counted-once named only NOT MATCHED BY SOURCE clauses and schema
    # evolution (the difference now names every join that keeps unmatched rows; seed 20261202, the long run).
    Case(
        target_columns=("id", "day"),
        source_columns=("id", "day"),
        target_rows=({"day": None, "id": 3},),
        source_rows=(
            {"id": 2, "day": None},
            {"day": None, "id": 1},
            {"day": datetime.date(2026, 1, 2), "id": 0},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT * FROM parquet.`{source}` WHERE rand() < 2) AS s"
            " ON t.id BETWEEN s.id AND s.id + 1\n"
            "WHEN MATCHED AND t.day > DATE'2026-01-02' THEN UPDATE SET *\n"
            "WHEN MATCHED AND t.day > DATE'2026-01-02' THEN UPDATE SET *\n"
            "WHEN NOT MATCHED AND s.day > DATE'2026-01-02' THEN INSERT (id) VALUES (s.id)\n"
            "WHEN NOT MATCHED AND s.day > DATE'2026-01-02' THEN INSERT *"
        ),
        partition_by="day",
        confs={
            "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag": "true",
            "spark.databricks.delta.merge.materializeSource": "all",
            "spark.sql.session.timeZone": "America/Los_Angeles",
        },
        properties={"delta.enableChangeDataFeed": "true"},
    ),
    # An overflowing INSERT value under updateAndMergeCastingFollowsAnsiEnabledFlag with ANSI on: Delta writes
    # Spark's ANSI cast and fails with NUMERIC_VALUE_OUT_OF_RANGE, the engine failed with Delta's table-write
    # overflow (fixed in engine/resolve/casting: the ANSI_CAST policy; seed 20261203, the long run).
    Case(
        target_columns=("id", "name", "big", "dbl", "amount"),
        source_columns=("id", "name", "big", "dbl", "amount", "extra"),
        target_rows=(
            {"id": 2, "amount": Decimal("-2.75"), "big": 3_000_000_000, "dbl": 0.0, "name": None},
            {"id": 2, "amount": Decimal("-2.75"), "big": 3_000_000_000, "dbl": 0.0, "name": None},
        ),
        source_rows=(
            {"id": 2, "extra": None, "dbl": None, "big": 0, "name": "a", "amount": Decimal("-13.58")},
            {
                "id": 5,
                "big": 3_000_000_000,
                "name": None,
                "extra": "e",
                "dbl": 0.0,
                "amount": Decimal("12.89"),
            },
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT * FROM parquet.`{source}` WHERE rand() < 2) AS s"
            " ON t.id = s.id AND t.name = 'a'\n"
            "WHEN MATCHED THEN UPDATE SET t.amount = s.amount + t.amount, t.big = s.amount\n"
            "WHEN NOT MATCHED THEN INSERT (id, dbl, amount) VALUES (s.id, s.DBL, s.big)\n"
            "WHEN NOT MATCHED BY SOURCE AND t.amount > 1.5 THEN DELETE\n"
            "WHEN NOT MATCHED BY SOURCE AND t.amount > 1.5 THEN DELETE"
        ),
        partition_by="name",
        confs={
            "spark.databricks.delta.schema.autoMerge.enabled": "true",
            "spark.sql.caseSensitive": "false",
            "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag": "true",
            "spark.databricks.delta.merge.materializeSource": "none",
        },
        properties={"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"},
        catalog=True,
    ),
    # Two source rows matching one target row in a merge of MATCHED clauses alone, whose condition is NULL
    # for that row: Delta counts no such match and raises no error, the engine raised the multiple-match
    # error (fixed in engine/execute/touched_files.counts_toward_multiple_matches; seed 20261204, the
    # long run, statement 768).
    Case(
        target_columns=("id", "flag", "m", "v", "ntz"),
        source_columns=("id", "flag", "m", "v", "ntz"),
        target_rows=_FLAGGED_ROWS,
        source_rows=_FLAGGED_ROWS,
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id AND t.flag\n"
            "WHEN MATCHED AND t.v > 0 THEN UPDATE SET t.flag = NOT t.flag"
        ),
        properties={
            "delta.checkpointInterval": "1",
            "delta.deletedFileRetentionDuration": "interval 1 hours",
            "delta.logRetentionDuration": "interval 1 hours",
        },
        log_ages=(3.0,),
    ),
    # Two statements whose ON has a conjunct on the target that no target row satisfies: Delta's numSourceRows
    # was 0 for a source of 1 and of 4 rows, as Spark planned its join without reading the source (the
    # deliberate difference source-rows-counted-where-no-target-row-qualifies; seed 20261206, the long run,
    # statements 26 and 131).
    Case(
        target_columns=("id", "bin"),
        source_columns=("id",),
        target_rows=({"id": 0, "bin": None},),
        source_rows=({"id": 3},),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id"
            " AND length(t.bin) > 1\n"
            "WHEN NOT MATCHED THEN INSERT (id) VALUES (s.id)"
        ),
        confs={
            "spark.sql.storeAssignmentPolicy": "LEGACY",
            "spark.databricks.delta.skipRecordingEmptyCommits": "false",
            "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled": "false",
        },
        properties={"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"},
        two_phases=True,
        row_commits=True,
    ),
    Case(
        target_columns=("id", "m", "v"),
        source_columns=("id", "m", "v", "extra"),
        target_rows=({"id": None, "m": {"k": 0, "l": None}, "v": -1}, {"v": INT_MAX, "id": 5, "m": None}),
        source_rows=(
            {"v": None, "m": None, "extra": None, "id": None},
            {"extra": "e", "id": 1, "v": 0, "m": None},
            {"extra": "e", "id": 4, "m": {}, "v": -1},
            {"extra": None, "id": 0, "v": 2, "m": None},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id <=> s.id"
            " AND t.v IS NULL\n"
            "WHEN MATCHED AND s.extra IS NULL THEN UPDATE SET *\n"
            "WHEN NOT MATCHED BY SOURCE AND t.m['k'] = 1 THEN UPDATE SET t.m = map_concat(t.m, map('z', 0))\n"
            "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET t.v = t.v * 2"
        ),
        confs={"spark.databricks.delta.schema.autoMerge.enabled": "true", "spark.sql.ansi.enabled": "false"},
        properties={"delta.enableDeletionVectors": "true"},
        features=(
            "identity",
            "generated",
            "typeWidening",
            "columnMapping",
            "checkConstraint",
            "v2Checkpoint",
            "default",
            "variant",
            "notNull",
            "clustering",
        ),
        two_phases=True,
        catalog=True,
    ),
    # Log files of versions 0-1 hours old, 2 half an hour, 3-5 days old, a checkpoint at each: Delta's cleanup
    # deleted versions 2 to 5 and kept 0 and 1, the engine kept them all (fixed in delta/commit/log_cleanup:
    # Delta's first question to its walk consumes the first segment, which stays, and the deletion walks on;
    # seed 20261207, the long run, statement 447).
    Case(
        target_columns=("id", "amount", "dbl", "v"),
        source_columns=("id", "amount", "dbl", "v", "extra"),
        target_rows=(
            {"id": 1, "amount": None, "v": None, "dbl": -0.5},
            {"id": 5, "amount": Decimal("-10.28"), "v": -1, "dbl": -0.5},
            {"id": 3, "amount": Decimal("1.00"), "v": INT_MAX, "dbl": None},
            {"v": None, "id": None, "amount": None, "dbl": 0.0},
            {"v": None, "id": 1, "dbl": 3.75, "amount": Decimal("0.24")},
            {"amount": Decimal("19.61"), "id": None, "v": None, "dbl": 3.75},
        ),
        source_rows=(
            {"dbl": None, "v": INT_MAX, "amount": Decimal("-10.84"), "extra": None, "id": 5},
            {"amount": Decimal("0.64"), "id": None, "dbl": 0.0, "extra": "e", "v": None},
            {"amount": None, "id": 0, "extra": "e", "v": -3, "dbl": 0.0},
            {"dbl": 1e300, "id": 1, "amount": Decimal("6.30"), "extra": "e", "v": None},
        ),
        statement=(
            "MERGE WITH SCHEMA EVOLUTION INTO delta.`{target}` AS t"
            " USING (SELECT * FROM parquet.`{source}` WHERE rand() < 2) AS s ON t.id = s.id"
            " AND t.amount IS NOT NULL\n"
            "WHEN NOT MATCHED AND s.v > 0 THEN INSERT (id, v) VALUES (s.id, s.v - 1)\n"
            "WHEN NOT MATCHED AND s.v > 0 THEN INSERT *\n"
            "WHEN NOT MATCHED BY SOURCE AND t.dbl < 1.0 THEN UPDATE SET t.amount = t.amount * 2\n"
            "WHEN NOT MATCHED BY SOURCE AND t.dbl < 1.0 THEN UPDATE SET t.v = t.v + 1"
        ),
        partition_by="v",
        confs={"spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled": "false"},
        properties={
            "delta.enableChangeDataFeed": "true",
            "delta.checkpointInterval": "1",
            "delta.deletedFileRetentionDuration": "interval 1 hours",
            "delta.logRetentionDuration": "1 day 12 hours",
        },
        two_phases=True,
        row_commits=True,
        log_ages=(3.0, 3.0, 0.5, 80.0, 80.0),
    ),
    # A target row matched by two source rows, one of whose pairs no MATCHED clause acts on, in merges of
    # MATCHED clauses alone: the row is written once per pair on both sides. Without an INSERT clause Delta
    # raised DELTA_NUM_RECORDS_MISMATCH naming "MERGE without INSERT clauses", the engine named "MERGE"
    # (seed 20261208, the long run, statements 113 and 114); with a DELETE clause that removes more rows
    # than the pair adds, Delta committed the row twice and the engine refused on its metrics (fixed in
    # engine/merge.check_record_counts: Delta's check on the files' counts, its metric checks only logged).
    *(
        Case(
            target_columns=("id", "m"),
            source_columns=("id", "m"),
            target_rows=tuple({"id": i, "m": None} for i in target_ids),
            source_rows=tuple({"id": i, "m": None} for i in (None, 3, 2, *extra_source_ids)),
            statement=(
                "MERGE INTO delta.`{target}` AS t USING (SELECT * FROM parquet.`{source}` WHERE rand() < 2)"
                " AS s ON t.id BETWEEN s.id AND s.id + 1\n"
                f"{delete_clause}"
                "WHEN MATCHED AND s.id > t.id - 1 THEN UPDATE SET *\n"
                "WHEN MATCHED AND s.M['k'] = 1 THEN UPDATE SET *"
            ),
            confs={"spark.sql.caseSensitive": "false"},
            two_phases=True,
        )
        for target_ids, extra_source_ids, delete_clause in (
            ((0, 1, 3, 1), (), ""),
            ((None, 3, 2), (), ""),
            ((0, 1, 3, 5, 6), (5,), "WHEN MATCHED AND s.id = 5 THEN DELETE\n"),
        )
    ),
    # A merge whose INSERT generates identity values and inserts nothing, recorded under
    # skipRecordingEmptyCommits=false: Delta's commit carries the schema as it was (its write records the
    # identity marks it tracked) and is Serializable, the engine's was SnapshotIsolation (fixed in
    # engine/merge._committed_schema; seed 20261210, the long run, statement 1123).
    Case(
        target_columns=("id", "f"),
        source_columns=("id", "f"),
        target_rows=({"id": 0, "f": -1.5},),
        source_rows=({"f": None, "id": 4},),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
            "WHEN NOT MATCHED AND s.f > 0 THEN INSERT (id, f) VALUES (s.id, s.f + 0.5)"
        ),
        confs={
            "spark.databricks.delta.skipRecordingEmptyCommits": "false",
            "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled": "false",
        },
        features=(
            "generated",
            "default",
            "notNull",
            "clustering",
            "columnMapping",
            "identity",
            "checkConstraint",
            "typeWidening",
            "rowTracking",
            "v2Checkpoint",
            "variant",
        ),
        two_phases=True,
    ),
    # The same, on a table with deletion vectors and change data, where a NOT MATCHED BY SOURCE clause makes
    # Delta's phase 1 touch the file: Delta's deletion-vector path tracks no marks for its write of no row, so
    # its commit holds commitInfo alone (SnapshotIsolation), where the engine's carried the schema
    # (Serializable; fixed in engine/merge._tracks_unwritten_marks, the variants in
    # tests/engine/test_identity_marks.py). Reduced from seed 20261310, the long run, statements 317-321.
    Case(
        target_columns=("id", "f"),
        source_columns=("id", "f"),
        target_rows=({"id": 0, "f": -1.5},),
        source_rows=({"id": 4, "f": None},),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
            "WHEN NOT MATCHED AND s.f > 0 THEN INSERT (id, f) VALUES (s.id, s.f)\n"
            "WHEN NOT MATCHED BY SOURCE AND t.f > 100 THEN DELETE"
        ),
        confs={"spark.databricks.delta.skipRecordingEmptyCommits": "false"},
        properties={"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"},
        features=("identity",),
    ),
    # Under deletion vectors, a NOT MATCHED BY SOURCE clause alone over a source not materialized and grouped
    # by the ON key: Spark's optimizer removes Delta's phase-1 join and its count of the source, Delta's
    # numSourceRows is 0, the engine's 1 (now source-rows-counted-where-the-source-is-unique; seed 20261312,
    # the long run, statement 604).
    Case(
        target_columns=("id", "name", "st", "ts"),
        source_columns=("id", "name", "st", "ts"),
        target_rows=(
            {
                "id": 0,
                "name": "a",
                "st": None,
                "ts": datetime.datetime(2026, 1, 1, 0, 0, 1, 1, tzinfo=datetime.UTC),
            },
        ),
        source_rows=({"id": 4, "name": "c", "st": None, "ts": None},),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT id, max(name) AS name, max(st) AS st, "
            "max(ts) AS ts FROM parquet.`{source}` GROUP BY id) AS s ON t.id = s.id\n"
            "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET t.name = concat(t.name, '!')"
        ),
        confs={"spark.sql.ansi.enabled": "false", "spark.databricks.delta.merge.materializeSource": "none"},
        properties={"delta.enableDeletionVectors": "true"},
    ),
    # MATCHED clauses alone, whose conditions no row of partition 'b' can satisfy, over a target row there
    # that two source rows match: Delta's data skipping does not read the partition and merges, the engine
    # read it and failed with the multiple match (fixed in engine/plan/pruning._matched_clauses_test; seed
    # 20261312, the long run, statements 748-754).
    Case(
        target_columns=("id", "name"),
        source_columns=("id", "name"),
        target_rows=({"name": "b", "id": 5}, {"name": "b", "id": 2}),
        source_rows=(
            {"id": None, "name": "a"},
            {"id": 5, "name": "a"},
            {"name": "a", "id": None},
            {"name": "a", "id": 4},
            {"name": "b", "id": 5},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s "
            "ON t.id BETWEEN s.id AND s.id + 1\n"
            "WHEN MATCHED AND t.name <> 'b' THEN DELETE\n"
            "WHEN MATCHED AND t.name IS NULL THEN UPDATE SET t.name = upper(t.name)"
        ),
        partition_by="name",
        confs={"spark.sql.session.timeZone": "America/Los_Angeles"},
        properties={"delta.enableChangeDataFeed": "true"},
        two_phases=True,
        catalog=True,
    ),
    # Under schema evolution, UPDATE SET * from a source whose struct has a field the target's lacks, where a
    # source row's struct is NULL and the target row's is not: Delta writes the struct NULL, the engine wrote
    # a struct of NULLs (fixed in engine/resolve/casting: the target's struct is kept through a NULL source
    # struct only for fields the source lacks; seed 20261313, the long run, statements 578-582).
    Case(
        target_columns=("id", "st", "f"),
        source_columns=("id", "st", "f", "extra"),
        target_rows=(
            {"id": 2, "st": {"a": None, "b": "x"}, "f": 2.25},
            {"f": -1.5, "id": 0, "st": None},
            {"id": 5, "f": 10000000000.0, "st": {"a": 1, "b": None}},
            {"f": 2.25, "id": 4, "st": {"a": 0, "b": None}},
            {"f": None, "id": 5, "st": None},
            {"f": 0.0, "id": 5, "st": {"a": None, "b": "y"}},
        ),
        source_rows=(
            {"extra": "e", "f": 2.25, "st": None, "id": 1},
            {"id": 2, "st": {"b": "x", "c": None, "a": 2}, "extra": "e", "f": None},
            {"extra": None, "f": 2.25, "st": {"b": "y", "a": 1, "c": None}, "id": 3},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT * FROM parquet.`{source}` AS s WHERE s.f > 0) "
            "AS s ON t.id BETWEEN s.id AND s.id + 1\n"
            "WHEN MATCHED AND s.f > 0 THEN UPDATE SET *\n"
            "WHEN MATCHED THEN UPDATE SET *"
        ),
        confs={
            "spark.databricks.delta.schema.autoMerge.enabled": "true",
            "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag": "true",
            "spark.databricks.delta.merge.materializeSource": "all",
            "spark.sql.session.timeZone": "Pacific/Chatham",
        },
        features=(
            "default",
            "typeWidening",
            "notNull",
            "checkConstraint",
            "rowTracking",
            "generated",
            "variant",
            "columnMapping",
            "v2Checkpoint",
            "clustering",
            "identity",
        ),
        wider=True,
    ),
    # Under storeAssignmentPolicy=STRICT a DATE written into a TIMESTAMP column: Delta's analyzer fails on its
    # own up-cast (INTERNAL_ERROR, "Found the unresolved Cast"), the engine wrote the value, which no verdict
    # explained (now strict-up-cast-to-a-timestamp, WHEN_DELTA_FAILS_INTERNALLY; seed 20261210, the long run,
    # statement 1066).
    Case(
        target_columns=("id", "ts", "f", "big", "day"),
        source_columns=("id", "ts", "f", "big", "day"),
        target_rows=(
            {"id": 1, "day": None, "f": None, "ts": None, "big": -5},
            {"f": None, "big": 3000000000, "ts": _MIDNIGHT, "day": None, "id": 3},
        ),
        source_rows=(
            {"day": datetime.date(2026, 1, 2), "id": 0, "f": 2.25, "big": None, "ts": _MIDNIGHT},
            {"id": 3, "ts": _MIDNIGHT, "day": None, "f": 0.0, "big": 3000000000},
            {"f": None, "day": datetime.date(2026, 1, 2), "ts": None, "big": 0, "id": 1},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.ID <=> s.ID"
            " AND t.day > DATE'2026-01-02'\n"
            "WHEN MATCHED THEN UPDATE SET t.ts = s.day\n"
            "WHEN NOT MATCHED THEN INSERT *\n"
            "WHEN NOT MATCHED BY SOURCE AND t.f > 0 THEN DELETE"
        ),
        partition_by="day",
        confs={"spark.sql.storeAssignmentPolicy": "STRICT", "spark.sql.caseSensitive": "false"},
    ),
    # Under spark.sql.caseSensitive=true a struct field assigned through a column named in another case
    # (SET t.ST.b for the column st): Delta cannot resolve t.ST.b (DELTA_MERGE_UNRESOLVED_EXPRESSION), the
    # engine matched the column ignoring case and committed (fixed in engine/resolve/struct_fields; seed
    # 20261213, the long run, statement 646).
    Case(
        target_columns=("id", "st"),
        source_columns=("id", "st", "extra"),
        target_rows=(
            {"id": 5, "st": None},
            {"id": 4, "st": None},
            {"st": {"b": "x", "a": None}, "id": 0},
            {"id": 4, "st": None},
        ),
        source_rows=(
            {"extra": None, "st": {"b": "x", "a": None}, "id": 5},
            {"extra": "e", "id": 3, "st": None},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
            "WHEN MATCHED THEN UPDATE SET t.ST.b = 'q'"
        ),
        confs={
            "spark.sql.storeAssignmentPolicy": "LEGACY",
            "spark.databricks.delta.skipRecordingEmptyCommits": "false",
            "spark.sql.caseSensitive": "true",
            "spark.sql.session.timeZone": "America/Los_Angeles",
        },
        properties={"delta.checkpointInterval": "2"},
        features=("checkConstraint", "typeWidening", "v2Checkpoint", "columnMapping"),
    ),
    # A struct field the struct lacks, through the column named in another case (SET t.ST.c for the column
    # st, ignoring case): Delta reports Spark's FIELD_NOT_FOUND, the operator's pre-flight checks called it
    # an unresolved name (DELTA_MERGE_UNRESOLVED_EXPRESSION; fixed in spec/preflight; seed 20261215, the long
    # run, statement 50).
    Case(
        target_columns=("id", "st"),
        source_columns=("id", "st"),
        target_rows=({"st": None, "id": None}, {"st": {"b": "y", "a": None}, "id": 5}, {"st": None, "id": 3}),
        source_rows=(),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT * FROM parquet.`{source}` WHERE rand() < 2) AS s "
            "ON t.id BETWEEN s.id AND s.id + 1\n"
            "WHEN MATCHED THEN UPDATE SET t.ST.c = 'q'\n"
            "WHEN NOT MATCHED AND s.ST IS NULL THEN INSERT *\n"
            "WHEN NOT MATCHED AND s.ST IS NULL THEN INSERT *\n"
            "WHEN NOT MATCHED BY SOURCE AND rand() < 2 THEN DELETE"
        ),
        confs={"spark.sql.caseSensitive": "false"},
        properties={"delta.enableDeletionVectors": "true"},
        two_phases=True,
        excepted="st",
    ),
    # Under schema evolution, a MATCHED UPDATE of a field neither the struct nor the source has (SET
    # t.nest.a.z): Delta resolves the name on the source, then refuses it as
    # DELTA_MERGE_UNRESOLVED_EXPRESSION; the engine said Spark's FIELD_NOT_FOUND (fixed in
    # engine/resolve/struct_fields; seed 20261217, the long run, statement 95).
    Case(
        target_columns=("id", "dbl", "nest", "m", "st"),
        source_columns=("id", "dbl", "nest", "m", "st", "extra"),
        target_rows=(
            {
                "id": None,
                "nest": {"a": {"c": None, "b": 2}, "d": None},
                "dbl": 3.75,
                "m": None,
                "st": {"a": None, "b": "y"},
            },
        ),
        source_rows=(
            {"dbl": -0.5, "extra": "e", "st": None, "m": None, "id": 5, "nest": None},
            {"m": {"l": 2}, "st": None, "extra": "e", "id": 2, "nest": {"a": None, "d": 2}, "dbl": None},
        ),
        statement=(
            "MERGE WITH SCHEMA EVOLUTION INTO delta.`{target}` AS t USING (SELECT * FROM parquet.`{source}` "
            "WHERE rand() < 2) AS s ON t.id BETWEEN s.id AND s.id + 1\n"
            "WHEN MATCHED THEN UPDATE SET t.nest.a.z = 1\n"
            "WHEN NOT MATCHED AND s.dbl < 1.0 THEN INSERT *\n"
            "WHEN NOT MATCHED THEN INSERT *"
        ),
        confs={
            "spark.databricks.delta.skipRecordingEmptyCommits": "false",
            "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag": "true",
        },
        two_phases=True,
    ),
    # With the change data feed on, target rows matched twice by the lone unconditional DELETE and an
    # unmatched source row inserted: Delta's deduplication of its delete rows dropped the inserted row 1
    # (its counts and change data hold it); the engine writes it (the deliberate difference
    # rows-delta-drops-deduplicating-change-data; seed 20261217, the long run, statement 210).
    Case(
        target_columns=("id", "st", "day", "m", "nest"),
        source_columns=("id", "m", "extra"),
        target_rows=(
            {"nest": {"d": 2, "a": None}, "day": None, "id": None, "m": None, "st": {"a": 0, "b": "y"}},
            {
                "st": {"b": "x", "a": 2},
                "nest": {"d": 0, "a": {"c": "p", "b": 2}},
                "id": 1,
                "m": None,
                "day": None,
            },
            {"day": None, "m": None, "st": {"b": "y", "a": -2}, "id": 5, "nest": None},
            {
                "day": None,
                "st": {"b": "y", "a": 2},
                "nest": {"a": {"b": None, "c": "p"}, "d": 0},
                "m": None,
                "id": 2,
            },
            {"nest": None, "id": 3, "m": None, "day": datetime.date(2026, 1, 4), "st": None},
        ),
        source_rows=(
            {"id": 0, "extra": None, "m": None},
            {"m": {}, "extra": "e", "id": 1},
            {"extra": None, "id": 2, "m": None},
            {"m": None, "id": 5, "extra": None},
            {"id": 3, "m": None, "extra": "e"},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT id, min_by(m, to_json(m)) AS m, "
            "max(extra) AS extra FROM parquet.`{source}` GROUP BY id) AS s "
            "ON t.id BETWEEN s.id AND s.id + 1 AND t.nest.a IS NULL\n"
            "WHEN MATCHED THEN DELETE\n"
            "WHEN NOT MATCHED THEN INSERT (id, m, day, nest) VALUES (s.id, map('k', 1), NULL, NULL)"
        ),
        confs={"spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag": "true"},
        properties={"delta.enableChangeDataFeed": "true"},
        features=("typeWidening",),
    ),
    # On a table writing deletion vectors, ON with <=>: Delta raised its merge output's assertion
    # (USER_RAISED_EXCEPTION, "Unexpected row: did not match any merge clause") where the engine merged (the
    # deliberate difference unmatched-row-merged-where-delta-raises; seed 20261220, the long run, statement
    # 45).
    Case(
        target_columns=("id", "ts"),
        source_columns=("id", "ts"),
        target_rows=(
            {"ts": datetime.datetime(2026, 1, 1, 0, 55, 57, 105, tzinfo=datetime.UTC), "id": 1},
            {"ts": datetime.datetime(2026, 1, 1, 0, 55, 57, 105, tzinfo=datetime.UTC), "id": 1},
        ),
        source_rows=(
            {"id": 4, "ts": None},
            {"id": 1, "ts": datetime.datetime(2026, 1, 1, 21, 53, 39, 638, tzinfo=datetime.UTC)},
            {"id": 5, "ts": None},
            {"id": 0, "ts": None},
            {"ts": None, "id": None},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT id, max(ts) AS ts FROM parquet.`{source}` "
            "GROUP BY id) AS s ON t.id <=> s.id\n"
            "WHEN MATCHED AND t.ts < TIMESTAMP'2026-01-02 00:00:00' THEN DELETE\n"
            "WHEN MATCHED THEN DELETE\n"
            "WHEN NOT MATCHED AND s.ts < TIMESTAMP'2026-01-02 00:00:00' THEN INSERT (id) VALUES (s.id)\n"
            "WHEN NOT MATCHED AND s.ts < TIMESTAMP'2026-01-02 00:00:00' THEN INSERT (id) VALUES (s.id)"
        ),
        confs={"spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled": "false"},
        properties={"delta.enableDeletionVectors": "true", "delta.checkpointInterval": "1"},
        features=("v2Checkpoint", "identity", "notNull", "default", "rowTracking"),
    ),
    # In a case-sensitive session, ON names the key in another case (`t.ID`, which does not resolve) and a
    # clause assigns a field the struct lacks: Delta resolves the ON condition first and reports it
    # (DELTA_MERGE_UNRESOLVED_EXPRESSION), where the operator's pre-flight checks reported the field
    # (FIELD_NOT_FOUND) and left the name in another case to the job (seed 20261305, the long run, statement
    # 474).
    Case(
        target_columns=("id", "nest", "day", "f", "dbl"),
        source_columns=("id", "nest", "day", "f", "dbl", "extra"),
        target_rows=(
            {"id": 1, "dbl": 3.75, "day": None, "nest": {"a": {"c": "p", "b": None}, "d": None}, "f": -1.5},
            {"day": None, "dbl": 3.75, "id": 1, "nest": {"a": {"b": None, "c": None}, "d": None}, "f": -1.5},
        ),
        source_rows=(
            {"day": None, "nest": None, "id": None, "extra": None, "f": 0.0, "dbl": 3.75},
            {"id": 1, "extra": None, "nest": None, "day": None, "dbl": None, "f": -1.5},
            {
                "day": None,
                "dbl": 0.0,
                "id": 2,
                "extra": "e",
                "f": 10000000000.0,
                "nest": {"a": {"c": "p", "b": 2}, "d": None},
            },
            {"dbl": 0.0, "id": 4, "f": 0.0, "nest": None, "extra": "e", "day": datetime.date(2026, 1, 1)},
            {
                "f": 2.25,
                "extra": "e",
                "dbl": 3.75,
                "id": 5,
                "nest": {"d": 0, "a": None},
                "day": datetime.date(2026, 1, 4),
            },
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT * FROM parquet.`{source}` AS s "
            "WHERE s.nest.a.b > 0) AS s ON t.ID <=> s.ID\n"
            "WHEN MATCHED THEN UPDATE SET t.nest.a.z = 1, t.f = s.f + 0.5\n"
            "WHEN NOT MATCHED BY SOURCE AND t.nest.a IS NULL THEN DELETE\n"
            "WHEN NOT MATCHED BY SOURCE THEN DELETE"
        ),
        partition_by="day",
        confs={
            "spark.sql.storeAssignmentPolicy": "LEGACY",
            "spark.sql.ansi.enabled": "false",
            "spark.sql.caseSensitive": "true",
            "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag": "true",
            "spark.sql.session.timeZone": "America/Los_Angeles",
        },
        properties={
            "delta.enableDeletionVectors": "true",
            "delta.enableChangeDataFeed": "true",
            "delta.checkpointInterval": "1",
            "delta.deletedFileRetentionDuration": "interval 1 hours",
            "delta.logRetentionDuration": "interval 2 days",
        },
        log_ages=(80.0, 0.5, 0.5),
    ),
    # STRICT, with clause 1 putting a DOUBLE into the FLOAT f and clause 2 a struct with a field (z) the
    # target's lacks: Delta refuses clause 2's struct while it builds the clauses, and clause 1's up-cast only
    # when Spark's analyzer checks the built command; the engine refused clause 1 first (fixed in
    # engine/resolve/casting: refused casts are raised after every clause's struct shapes are checked).
    Case(
        target_columns=("id", "nest", "dbl", "amount", "f"),
        source_columns=("id", "nest", "dbl", "amount", "f"),
        target_rows=(
            {"amount": None, "dbl": None, "id": 4, "f": None, "nest": None},
            {
                "nest": {"d": 2, "a": {"b": 0, "c": "p"}},
                "dbl": 3.75,
                "amount": Decimal("18.00"),
                "f": 10000000000.0,
                "id": 5,
            },
            {"dbl": None, "amount": None, "nest": None, "f": None, "id": 4},
            {"f": None, "id": 4, "amount": None, "dbl": -0.5, "nest": {"d": None, "a": None}},
        ),
        source_rows=(
            {
                "id": 0,
                "dbl": 0.0,
                "nest": {"d": 0, "a": {"z": 1, "b": None, "c": None}},
                "amount": Decimal("-22.78"),
                "f": -1.5,
            },
            {
                "f": None,
                "amount": Decimal("7.54"),
                "nest": {"d": None, "a": {"b": 2, "z": 1, "c": None}},
                "id": 4,
                "dbl": 3.75,
            },
            {"id": 2, "dbl": 1e300, "nest": None, "f": 10000000000.0, "amount": None},
            {
                "id": 3,
                "amount": Decimal("-5.16"),
                "nest": {"a": {"b": None, "z": 0, "c": "p"}, "d": 1},
                "dbl": 3.75,
                "f": 0.0,
            },
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT id, max(nest) AS nest, max(dbl) AS dbl, "
            "max(amount) AS amount, max(f) AS f FROM parquet.`{source}` GROUP BY id) AS s "
            "ON t.id BETWEEN s.id AND s.id + 1 AND s.amount IS NOT NULL\n"
            "WHEN NOT MATCHED AND s.dbl < 1.0 THEN INSERT (id, amount, f, dbl) "
            "VALUES (s.id, s.amount, s.f + 0.5, s.f)\n"
            "WHEN NOT MATCHED AND s.nest.a.b > 0 THEN INSERT (id, nest, dbl, amount) "
            "VALUES (s.id, s.nest, s.amount, s.amount)\n"
            "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET t.dbl = t.dbl / 2"
        ),
        confs={"spark.sql.storeAssignmentPolicy": "STRICT"},
        features=("identity", "clustering", "variant", "columnMapping"),
        two_phases=True,
        wider=True,
    ),
    # Strings of two matched rows that clause 2 assigns to a BOOLEAN column, neither a boolean: Delta quoted
    # one row's, the engine the other's, each the first its tasks met (another-malformed-value; statement 187
    # of the long run of seed 20261326).
    Case(
        target_columns=("id", "flag", "v", "st", "name"),
        source_columns=("id", "flag", "v", "st", "name", "extra"),
        target_rows=(
            {"v": INT_MAX, "name": None, "flag": None, "st": {"a": None, "b": "y"}, "id": 5},
            {"id": 1, "st": {"a": None, "b": "x"}, "name": "b", "flag": None, "v": None},
        ),
        source_rows=(
            {"v": INT_MAX, "extra": "e", "id": 1, "name": "b", "flag": False, "st": None},
            {"name": None, "id": 2, "extra": None, "v": None, "flag": None, "st": {"b": None, "a": -1}},
            {"name": "c", "st": {"a": -2, "b": "y"}, "extra": "e", "v": None, "flag": False, "id": 5},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
            "WHEN MATCHED AND t.name = 'a' THEN UPDATE SET *\n"
            "WHEN MATCHED THEN UPDATE SET t.flag = s.name, t.name = concat(t.name, '!')\n"
            "WHEN NOT MATCHED AND s.v < 2 THEN INSERT *\n"
            "WHEN NOT MATCHED THEN INSERT *\n"
            "WHEN NOT MATCHED BY SOURCE AND t.flag THEN UPDATE SET t.flag = NOT t.flag\n"
            "WHEN NOT MATCHED BY SOURCE AND t.st IS NULL"
            " THEN UPDATE SET t.st = named_struct('a', t.st.a + 1, 'b', t.st.b)"
        ),
        confs={
            "spark.databricks.delta.skipRecordingEmptyCommits": "false",
            "spark.sql.session.timeZone": "America/Los_Angeles",
        },
        properties={"delta.enableChangeDataFeed": "true"},
    ),
    # A NOT MATCHED BY SOURCE update that breaks the CHECK constraint `bounded`: Delta's message quoted the
    # constraint as Spark prints it and the engine's as the table stores it (statements 914-915 of the long
    # run of seed 20261328; fixed by printing the parsed constraint, test_constraint_violations.py).
    Case(
        target_columns=("id", "v"),
        source_columns=("id", "v", "extra"),
        target_rows=(
            {"id": 0, "v": INT_MAX},
            {"v": 3, "id": 4},
            {"id": 4, "v": -1},
            {"v": INT_MAX, "id": 0},
            {"id": None, "v": 2},
        ),
        source_rows=({"extra": None, "id": 0, "v": INT_MAX},),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id + 1\n"
            "WHEN NOT MATCHED AND s.v < 2 THEN INSERT (id, v) VALUES (s.id, coalesce(s.v, 0))\n"
            "WHEN NOT MATCHED BY SOURCE AND t.v IS NULL THEN UPDATE SET t.v = t.v + 1\n"
            "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET t.v = t.v + 1"
        ),
        confs={
            "spark.databricks.delta.schema.autoMerge.enabled": "true",
            "spark.sql.ansi.enabled": "false",
            "spark.databricks.delta.skipRecordingEmptyCommits": "false",
            "spark.sql.session.timeZone": "Asia/Kolkata",
        },
        properties={
            "delta.checkpointInterval": "2",
            "delta.deletedFileRetentionDuration": "interval 1 hours",
            "delta.logRetentionDuration": "interval 1 hours",
        },
        features=(
            "checkConstraint",
            "default",
            "rowTracking",
            "typeWidening",
            "columnMapping",
            "notNull",
            "v2Checkpoint",
            "identity",
            "generated",
            "variant",
            "clustering",
        ),
        two_phases=True,
        log_ages=(80.0, 80.0, 80.0, 0.5, 0.5),
    ),
    # Two struct columns' casts fail in one INSERT that writes nest before st: Delta aligns the assignments
    # with the table's columns before casting and names st, the engine named nest (fixed in
    # engine/plan/planning ``_cast_values``; long run, seed 20261331, statement 960).
    Case(
        target_columns=("id", "ts", "big", "st", "nest"),
        source_columns=("id", "ts", "big", "st", "nest"),
        target_rows=(
            {
                "id": 3,
                "big": 1,
                "ts": _MIDNIGHT,
                "nest": {"a": {"c": None, "b": 1}, "d": 2},
                "st": {"b": "x", "a": None},
            },
            {"big": 3000000000, "st": None, "nest": None, "ts": _MIDNIGHT, "id": 4},
            {
                "st": {"b": None, "a": None},
                "big": -3,
                "nest": None,
                "ts": datetime.datetime(2026, 1, 2, 12, 11, 34, 247, tzinfo=datetime.UTC),
                "id": 2,
            },
            {"ts": None, "id": 3, "st": None, "nest": {"a": None, "d": 2}, "big": 4},
        ),
        source_rows=(
            {"big": 4, "nest": None, "id": 2, "ts": _MIDNIGHT, "st": None},
            {
                "big": None,
                "st": {"b": "x", "c": "w", "a": None},
                "nest": {"d": None, "a": {"c": "p", "b": 1, "z": 0}},
                "id": 1,
                "ts": None,
            },
            {"big": None, "ts": None, "id": 5, "nest": None, "st": None},
            {"nest": {"d": 2, "a": None}, "ts": None, "big": 3000000000, "st": None, "id": 3},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT id, max(ts) AS ts, max(big) AS big, "
            "max(st) AS st, max(nest) AS nest FROM parquet.`{source}` GROUP BY id) AS s ON t.id = s.id\n"
            "WHEN MATCHED AND s.big >= 0 THEN UPDATE SET t.ts = s.ts\n"
            "WHEN MATCHED THEN UPDATE SET t.ts = t.ts + INTERVAL 1 HOUR\n"
            "WHEN NOT MATCHED THEN INSERT (id, ts, nest, st) VALUES (s.id, s.ts, s.nest, s.st)"
        ),
        confs={"spark.sql.storeAssignmentPolicy": "LEGACY"},
        properties={
            "delta.enableChangeDataFeed": "true",
            "delta.checkpointInterval": "1",
            "delta.deletedFileRetentionDuration": "interval 1 hours",
            "delta.logRetentionDuration": "interval 1 hours",
        },
        features=(
            "clustering",
            "variant",
            "columnMapping",
            "notNull",
            "v2Checkpoint",
            "identity",
            "checkConstraint",
            "typeWidening",
            "rowTracking",
        ),
        catalog=True,
        log_ages=(0.5, 80.0, 0.5, 3.0, 3.0, 0.5, 0.5, 3.0),
        wider=True,
    ),
    # One row overflows t.v * 2 and another breaks the CHECK constraint bounded: Delta reported the overflow,
    # the engine the constraint, each the row its tasks met first (deliberate difference another-failing-row;
    # long run, seed 20261330, statements 360-363).
    OVERFLOW_AND_BROKEN_CHECK,
    # UPDATE SET * of a query source lacking the target's generated column, then SET t.st.c on a struct
    # without c: Delta reported the source's name (DELTA_MERGE_UNRESOLVED_EXPRESSION), the operator's
    # pre-flight the missing field (deliberate difference target-names-checked-before-submission; long run,
    # seed 20261332, statements 1273-1274).
    Case(
        target_columns=("id", "m", "st"),
        source_columns=("id", "m", "st"),
        target_rows=({"m": None, "id": 2, "st": {"a": 2, "b": "y"}}, {"id": 3, "st": None, "m": {"l": None}}),
        source_rows=(
            {"id": 0, "m": None, "st": None},
            {"id": 2, "m": None, "st": {"c": "w", "a": None, "b": "y"}},
            {"id": None, "st": None, "m": None},
            {"id": 3, "st": {"a": -2, "c": None, "b": "y"}, "m": None},
        ),
        statement=(
            "MERGE INTO delta.`{target}` AS t USING (SELECT id, min_by(m, to_json(m)) AS m, max(st) AS st "
            "FROM parquet.`{source}` GROUP BY id) AS s ON t.id BETWEEN s.id AND s.id + 1 AND t.st IS NULL\n"
            "WHEN MATCHED AND s.m['k'] = 1 THEN UPDATE SET *\n"
            "WHEN MATCHED THEN UPDATE SET t.m = map('k', 1), t.st.c = 'q'\n"
            "WHEN NOT MATCHED THEN INSERT (id) VALUES (s.id)\n"
            "WHEN NOT MATCHED BY SOURCE AND t.st IS NULL "
            "THEN UPDATE SET t.st = named_struct('a', t.st.a + 1, 'b', t.st.b)\n"
            "WHEN NOT MATCHED BY SOURCE AND t.m['k'] = 1 THEN DELETE"
        ),
        partition_by=None,
        confs={},
        properties={"delta.enableDeletionVectors": "true"},
        features=(
            "identity",
            "typeWidening",
            "v2Checkpoint",
            "checkConstraint",
            "rowTracking",
            "default",
            "generated",
            "notNull",
            "clustering",
            "variant",
            "columnMapping",
        ),
        two_phases=True,
        catalog=False,
        excepted=None,
        row_commits=False,
        log_ages=(),
        wider=True,
    ),
)
