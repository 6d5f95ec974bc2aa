"""Refusals and constraints: features the engine does not honour are refused up front; appendOnly, NOT NULL
and CHECK constraints are honoured; every failure leaves the table as it was."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, Field, Schema, write_deltalake

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.protocol import refused_features
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from airflow_provider_deltamerge.delta.log.table_features import REFUSED_FEATURES
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import MergeExecutionError, TargetTableError
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, delete, insert_all, update, update_all
from tests.conftest import make_table, table_state
from tests.delta.helpers import craft_table, files_on_disk_match_log

SOURCE = pa.table({"id": pa.array([3, 42], pa.int64()), "qty": pa.array([-1, 7], pa.int32())})


def source_path(tmp_path: Path, data: pa.Table = SOURCE) -> str:
    path = tmp_path / "source.parquet"
    pq.write_table(data, path)
    return str(path)


def upsert(target: str, source: str, *clauses: object) -> MergeSpec:
    return MergeSpec(
        target=target,
        source=PathSource(source),
        condition="t.id = s.id",
        clauses=tuple(clauses) or (update_all(), insert_all()),  # type: ignore[arg-type]
    )


REFUSED = {
    "rowTracking": dict(reader=1, writer=7, writer_features=["rowTracking", "domainMetadata"]),
    "someFutureFeature": dict(reader=3, writer=7, reader_features=[], writer_features=["someFutureFeature"]),
}
# Delta's reader-writer features among them (deltalake checks that the log lists them in both).
READER_WRITER = {"typeWidening-preview"}
# Reader-writer features deltalake 1.6.6 cannot open a table with: refused when the snapshot read fails, by
# the log's protocol, on tables Delta made (tests/delta/test_unreadable_features.py).
UNREADABLE = {"catalogManaged", "geospatial", "geospatial-dev", "adaptiveMetadata-preview"}
# Every other feature the engine refuses by name, declared by a crafted log (docs/table-features.md).
REFUSED.update(
    {
        feature: dict(
            reader=3,
            writer=7,
            reader_features=[feature] if feature in READER_WRITER else [],
            writer_features=[feature],
        )
        for feature in REFUSED_FEATURES
        if feature not in REFUSED and feature not in UNREADABLE
    }
)


@pytest.mark.parametrize("feature", sorted(REFUSED))
def test_unsupported_feature_is_refused_naming_it_and_the_fix(spark, tmp_path, feature):
    target = craft_table(tmp_path / "t", **REFUSED[feature])  # type: ignore[arg-type]
    assert refused_features(read_snapshot(target)) == [feature]
    before = DeltaTable(target).version()
    with pytest.raises(TargetTableError, match=feature) as raised:
        run_merge(spark, upsert(target, source_path(tmp_path)))
    assert raised.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    # Delta 4.4's wording (delta-error-classes.json), then the reason and the way out
    assert str(raised.value).startswith(
        f'[DELTA_UNSUPPORTED_FEATURES_FOR_WRITE] Unsupported Delta write feature: table "{target}" requires '
        'writer table feature(s) that are unsupported by Delta Lake "airflow-provider-deltamerge '
    )
    assert any(way in str(raised.value) for way in ('backend="delta-spark"', "ALTER TABLE", "Kernel"))
    assert DeltaTable(target).version() == before


def test_honoured_features_are_accepted(tmp_path):
    target = craft_table(
        tmp_path / "t",
        reader=3,
        writer=7,
        reader_features=[
            "timestampNtz",
            "v2Checkpoint",
            "deletionVectors",
            "variantType",
            "variantType-preview",
            "variantShredding",
            "variantShredding-preview",
            "typeWidening",
        ],
        writer_features=[
            "deletionVectors",
            "identityColumns",
            "appendOnly",
            "invariants",
            "checkConstraints",
            "timestampNtz",
            "v2Checkpoint",
            "inCommitTimestamp",
            "allowColumnDefaults",
            "generatedColumns",
            "changeDataFeed",
            "columnMapping",
            "domainMetadata",
            "clustering",
            "typeWidening",
            "variantType",
            "variantType-preview",
            "variantShredding",
            "variantShredding-preview",
            "checkpointProtection",
        ],
        fields=[{"name": "v", "type": "variant", "nullable": True, "metadata": {}}],
    )
    assert refused_features(read_snapshot(target)) == []


def test_append_only_refuses_update_up_front_and_allows_inserts(spark, tmp_path):
    target = make_table(tmp_path / "t")
    DeltaTable(target).alter.set_table_properties({"delta.appendOnly": "true"})
    before = table_state(target)
    source = pa.table(
        {
            "id": pa.array([3, 42], pa.int64()),
            "qty": pa.array([1, 7], pa.int32()),
            "region": pa.array(["eu", "us"]),
        }
    )
    with pytest.raises(TargetTableError, match="only allow appends") as raised:
        run_merge(spark, upsert(target, source_path(tmp_path, source), delete()))
    assert raised.value.error_class == "DELTA_CANNOT_MODIFY_APPEND_ONLY"
    assert table_state(target) == before
    new_only = source.slice(1)  # the classic executor would rewrite a file with a match
    result = run_merge(spark, upsert(target, source_path(tmp_path, new_only), insert_all()))
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
    assert result.metrics[m.NUM_TARGET_FILES_REMOVED] == 0


def constrained_table(path: Path) -> str:
    schema = Schema([Field("id", "long", nullable=False), Field("qty", "integer", nullable=True)])
    DeltaTable.create(str(path), schema=schema)
    data = pa.table({"id": pa.array(range(5), pa.int64()), "qty": pa.array([1, 2, 3, 4, 5], pa.int32())})
    write_deltalake(str(path), data, mode="append", schema_mode=None)
    DeltaTable(str(path)).alter.add_constraint({"qty_positive": "qty > 0"})
    return str(path)


def test_check_constraint_violation_fails_the_merge_and_commits_nothing(spark, tmp_path):
    target = constrained_table(tmp_path / "t")
    before = table_state(target)
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, upsert(target, source_path(tmp_path)))  # sets qty = -1 on id 3
    assert raised.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    # Delta's text: the constraint as Spark prints it, then the column it reads
    shown = "CHECK constraint qty_positive (qty > 0) violated by row with values:\n - qty : -1\n"
    assert shown in str(raised.value)
    assert table_state(target) == before
    assert files_on_disk_match_log(target)


def test_not_null_violation_fails_the_merge_and_commits_nothing(spark, tmp_path):
    target = constrained_table(tmp_path / "t")
    before = table_state(target)
    source = pa.table({"id": pa.array([None], pa.int64()), "qty": pa.array([9], pa.int32())})
    spec = upsert(target, source_path(tmp_path, source), insert_all())
    with pytest.raises(MergeExecutionError, match="NOT NULL constraint violated for column: id") as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    assert table_state(target) == before
    assert files_on_disk_match_log(target)


def test_rows_satisfying_constraints_are_merged(spark, tmp_path):
    target = constrained_table(tmp_path / "t")
    spec = upsert(target, source_path(tmp_path), update({"qty": "t.qty + 10"}), insert_all())
    result = run_merge(spark, spec)
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == 1
    assert result.metrics[m.NUM_TARGET_ROWS_INSERTED] == 1
