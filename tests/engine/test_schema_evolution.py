"""Schema evolution (Delta's autoMerge rules) and store-assignment casting, on real Delta tables.

Each test runs one or two merges on small tables; where delta-rs's ``merge(merge_schema=True)`` agrees with
Delta, it is the oracle.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.resolve.casting import POLICY_KEY
from airflow_provider_deltamerge.exceptions import (
    ClauseResolutionError,
    MergeExecutionError,
    SchemaEvolutionError,
)
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    insert,
    insert_all,
    update,
    update_all,
)
from airflow_provider_deltamerge.spec.clauses import NotMatchedBySourceUpdate
from bench.spark_work import last_execution_id
from tests.conftest import make_table, table_state
from tests.engine.conftest import python_udf_plans
from tests.oracle import merge_with_deltalake, sorted_rows

# Target: ORDERS (id bigint, qty int, region string), ids 0-9. The source lacks region and brings note.
SOURCE = pa.table(
    {
        "id": pa.array([3, 4, 20], pa.int64()),
        "qty": pa.array([1, 2, 3], pa.int32()),
        "note": pa.array(["a", None, "c"]),
    }
)
INFO = pa.struct([("a", pa.int32()), ("b", pa.string())])
ITEMS = pa.list_(pa.struct([("x", pa.int32())]))


def write_source(tmp_path: Path, data: pa.Table, name: str = "source.parquet") -> str:
    path = tmp_path / name
    pq.write_table(data, path)
    return str(path)


def spec_of(target: str, source: str, *clauses: Any, evolve: bool = True) -> MergeSpec:
    return MergeSpec(
        target=target,
        source=PathSource(source),
        condition="t.id = s.id",
        clauses=clauses,
        schema_evolution=evolve,
    )


def schema_and_state(path: str) -> tuple[str, tuple[int, list[dict[str, object]]]]:
    return DeltaTable(path).schema().to_json(), table_state(path)


def log_entry(path: str, version: int) -> dict[str, Any]:
    """The actions of one commit file, by action name (the last of each kind)."""
    lines = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return {key: value for line in lines for key, value in json.loads(line).items()}


@pytest.mark.parametrize("partition_by", [None, ["region"]], ids=["unpartitioned", "partitioned"])
def test_star_clauses_evolve_like_deltalake(spark, tmp_path, partition_by):
    # Given: two identical targets and a source without `region` but with a new column `note`
    ours = make_table(tmp_path / "ours", partition_by=partition_by)
    oracle = make_table(tmp_path / "oracle", partition_by=partition_by)
    spec = spec_of(ours, write_source(tmp_path, SOURCE), update_all(), insert_all())
    # When: both engines merge with schema evolution
    result = run_merge(spark, spec)
    expected = merge_with_deltalake(oracle, spec, SOURCE)
    # Then: `note` is appended; matched rows keep `region`, inserted rows have none, copied rows no note
    rows = {r["id"]: r for r in sorted_rows(ours)}
    assert [f.name for f in DeltaTable(ours).schema().fields] == ["id", "qty", "region", "note"]
    assert rows[3] == {"id": 3, "qty": 1, "region": "us", "note": "a"}
    assert rows[20] == {"id": 20, "qty": 3, "region": None, "note": "c"}
    assert rows[5]["note"] is None
    assert sorted_rows(ours) == sorted_rows(oracle)
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == expected["num_target_rows_updated"] == 2
    assert DeltaTable(ours).metadata().partition_columns == (partition_by or [])


def test_insert_only_evolution_is_one_commit_keeping_the_table_settings(spark, tmp_path):
    # Given: an append-only table with another table property, partitioned by region
    target = str(tmp_path / "t")
    write_deltalake(
        target,
        pa.table({"id": pa.array([1], pa.int64()), "region": ["eu"]}),
        partition_by=["region"],
        configuration={"delta.appendOnly": "true", "delta.logRetentionDuration": "interval 7 days"},
    )
    before = DeltaTable(target)
    source = pa.table({"id": pa.array([2], pa.int64()), "region": ["us"], "note": ["n"]})
    spec = spec_of(target, write_source(tmp_path, source), insert_all())
    # When: an insert-only merge adds a column
    result = run_merge(spark, spec)
    # Then: one commit holds the new schema and the file; id, properties, partitioning, protocol kept
    after = DeltaTable(target)
    assert result.version == after.version() == before.version() + 1
    entry = log_entry(target, result.version)
    assert set(entry) >= {"commitInfo", "metaData", "add"} and "remove" not in entry
    assert json.loads(entry["metaData"]["schemaString"])["fields"][-1]["name"] == "note"
    assert after.metadata().id == before.metadata().id
    assert after.metadata().configuration == before.metadata().configuration
    assert after.metadata().partition_columns == ["region"]
    assert after.protocol() == before.protocol()
    info = entry["commitInfo"]
    assert info["operationMetrics"][m.NUM_TARGET_ROWS_INSERTED] == "1"
    assert json.loads(info["operationParameters"]["predicate"]) == ["t.id = s.id"]
    assert info["deltamerge"]["executor"] == "insert_only"
    assert sorted_rows(target) == [
        {"id": 1, "region": "eu", "note": None},
        {"id": 2, "region": "us", "note": "n"},
    ]


def test_explicit_assignments_add_only_the_columns_they_name(spark, tmp_path):
    target = make_table(tmp_path / "t")
    source = write_source(tmp_path, SOURCE.append_column("extra", pa.array([7, 8, 9], pa.int64())))
    # Given: the UPDATE assigns qty only, the INSERT assigns the new column `note`
    spec = spec_of(target, source, update({"qty": "s.qty"}), insert({"id": "s.id", "note": "s.note"}))
    run_merge(spark, spec)
    # Then: only `note` is added (`extra` is assigned nowhere); the matched rows' note stays NULL, as in
    # Delta (delta-rs fills it from the source)
    rows = {r["id"]: r for r in sorted_rows(target)}
    assert list(rows[3]) == ["id", "qty", "region", "note"]
    assert rows[3]["note"] is None and rows[20] == {"id": 20, "qty": None, "region": None, "note": "c"}


def test_not_matched_by_source_clauses_cannot_add_columns(spark, tmp_path):
    target = make_table(tmp_path / "t")
    before = schema_and_state(target)
    clause = NotMatchedBySourceUpdate(set=(("note", "'gone'"),))
    spec = spec_of(target, write_source(tmp_path, SOURCE), clause)
    refused = r"Cannot resolve note in UPDATE clause.*\(clause 1, .*cannot add columns"
    with pytest.raises(ClauseResolutionError, match=refused):
        run_merge(spark, spec)
    assert schema_and_state(target) == before


def nested_table(tmp_path: Path) -> str:
    return make_table(
        tmp_path / "nested",
        pa.table(
            {
                "id": pa.array([1, 2, 3], pa.int64()),
                "info": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, None], INFO),
                "items": pa.array([[{"x": 1}], [], None], ITEMS),
            }
        ),
    )


NESTED_SOURCE = pa.table(
    {
        "id": pa.array([1, 3, 4, 5], pa.int64()),
        "info": pa.array(
            [None, {"a": 30, "c": "new"}, {"a": 40, "c": "c4"}, None],
            pa.struct([("a", pa.int32()), ("c", pa.string())]),
        ),
        "items": pa.array(
            [[{"x": 10, "y": "p"}], None, [{"x": 4, "y": None}], None],
            pa.list_(pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ),
    }
)


def test_nested_structs_gain_fields_by_name_at_any_depth(spark, tmp_path):
    # Given: structs and arrays of structs whose source versions lack one field and bring a new one
    target = nested_table(tmp_path)
    spec = spec_of(target, write_source(tmp_path, NESTED_SOURCE), update_all(), insert_all())
    since = last_execution_id(spark)
    run_merge(spark, spec)
    # Then: info gains c, the array's structs gain y; new fields NULL in rows that did not bring them
    schema = json.loads(DeltaTable(target).schema().to_json())
    fields = {f["name"]: f["type"] for f in schema["fields"]}
    assert [f["name"] for f in fields["info"]["fields"]] == ["a", "b", "c"]
    assert [f["name"] for f in fields["items"]["elementType"]["fields"]] == ["x", "y"]
    rows = {r["id"]: r for r in sorted_rows(target)}
    # UPDATE * from a NULL source struct keeps the target-only field (Delta's per-leaf UPDATE *)
    assert rows[1]["info"] == {"a": None, "b": "x", "c": None}
    assert rows[1]["items"] == [{"x": 10, "y": "p"}]
    assert rows[2] == {"id": 2, "info": {"a": 2, "b": "y", "c": None}, "items": []}
    assert rows[3]["info"] == {"a": 30, "b": None, "c": "new"}
    assert rows[4]["info"] == {"a": 40, "b": None, "c": "c4"} and rows[4]["items"] == [{"x": 4, "y": None}]
    assert rows[5] == {"id": 5, "info": None, "items": None}  # a NULL source struct stays NULL
    assert python_udf_plans(spark, since=since) == []


def test_structs_are_cast_by_name_without_evolution(spark, tmp_path):
    target = nested_table(tmp_path)
    reordered = pa.table(
        {
            "id": pa.array([2], pa.int64()),
            "info": pa.array([{"b": "z", "a": 9}], pa.struct([("b", pa.string()), ("a", pa.int64())])),
        }
    )
    spec = spec_of(target, write_source(tmp_path, reordered), update({"info": "s.info"}), evolve=False)
    run_merge(spark, spec)
    assert {r["id"]: r for r in sorted_rows(target)}[2]["info"] == {"a": 9, "b": "z"}


def test_struct_with_other_fields_is_refused_without_evolution(spark, tmp_path):
    target = nested_table(tmp_path)
    before = schema_and_state(target)
    spec = spec_of(target, write_source(tmp_path, NESTED_SOURCE), update_all(), evolve=False)
    with pytest.raises(
        ClauseResolutionError,
        match=r"column info: Cannot cast struct<a:int,c:string> to struct<a:int,b:string>\. "
        "All nested columns must match",
    ):
        run_merge(spark, spec)
    assert schema_and_state(target) == before


@pytest.mark.parametrize(
    ("column", "values", "message"),
    [
        (
            "qty",
            pa.array([{"v": 1}], pa.struct([("v", pa.int32())])),
            "Failed to merge fields 'qty' and 'qty': Failed to merge incompatible data types int and "
            "struct<v:int>",
        ),
        (
            "info",
            pa.array([{"a": {"deep": 1}}], pa.struct([("a", pa.struct([("deep", pa.int32())]))])),
            "Failed to merge fields 'info.a' and 'info.a'",
        ),
    ],
    ids=["top-level", "nested"],
)
def test_incompatible_types_fail_naming_column_and_change_nothing(spark, tmp_path, column, values, message):
    target = nested_table(tmp_path) if column == "info" else make_table(tmp_path / "t")
    before = schema_and_state(target)
    source = pa.table({"id": pa.array([1], pa.int64()), column: values})
    spec = spec_of(target, write_source(tmp_path, source), update_all(), insert_all())
    with pytest.raises(SchemaEvolutionError, match=message.replace("(", r"\(")) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_FAILED_TO_MERGE_FIELDS"
    assert schema_and_state(target) == before


def test_evolution_keeps_the_target_type_through_an_implicit_cast(spark, tmp_path):
    # Given: the source has qty as text; Delta keeps the INT column and casts the value
    target, oracle = make_table(tmp_path / "t"), make_table(tmp_path / "oracle")
    source = pa.table({"id": pa.array([3], pa.int64()), "qty": ["77"], "note": ["n"]})
    spec = spec_of(target, write_source(tmp_path, source), update_all())
    run_merge(spark, spec)
    merge_with_deltalake(oracle, spec, source)
    assert DeltaTable(target).schema().fields[1].type.type == "integer"
    assert {r["id"]: r for r in sorted_rows(target)}[3]["qty"] == 77
    assert sorted_rows(target) == sorted_rows(oracle)


@pytest.fixture
def policy(spark: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    spark.conf.set(POLICY_KEY, request.param)
    yield request.param
    spark.conf.unset(POLICY_KEY)


TOO_BIG = pa.table({"id": pa.array([3, 4], pa.int64()), "qty": pa.array([5, 3_000_000_000], pa.int64())})


@pytest.mark.parametrize("policy", ["ANSI"], indirect=True)
def test_ansi_overflow_fails_with_deltas_message_and_changes_nothing(spark, tmp_path, policy):
    target = make_table(tmp_path / "t")
    before = schema_and_state(target)
    spec = spec_of(target, write_source(tmp_path, TOO_BIG), update({"qty": "s.qty"}), evolve=False)
    with pytest.raises(MergeExecutionError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE"
    expected = 'Failed to write a value of "BIGINT" type into the "INT" type column `qty` due to an overflow'
    assert expected in str(raised.value)
    assert schema_and_state(target) == before


@pytest.mark.parametrize("policy", ["ANSI"], indirect=True)
def test_ansi_malformed_text_fails_naming_value_and_column(spark, tmp_path, policy):
    target = make_table(tmp_path / "t")
    source = pa.table({"id": pa.array([3], pa.int64()), "qty": ["lots"]})
    spec = spec_of(target, write_source(tmp_path, source), update({"qty": "s.qty"}), evolve=False)
    malformed = r"The value 'lots' of the type \"STRING\" cannot be cast.*`qty`"
    with pytest.raises(MergeExecutionError, match=malformed):
        run_merge(spark, spec)


@pytest.mark.parametrize("policy", ["LEGACY"], indirect=True)
def test_legacy_policy_wraps_an_integral_overflow(spark, tmp_path, policy):
    target = make_table(tmp_path / "t")
    run_merge(spark, spec_of(target, write_source(tmp_path, TOO_BIG), update({"qty": "s.qty"}), evolve=False))
    rows = {r["id"]: r["qty"] for r in sorted_rows(target)}
    assert rows[3] == 5 and rows[4] == 3_000_000_000 - 2**32


@pytest.mark.parametrize("policy", ["STRICT"], indirect=True)
def test_strict_policy_refuses_a_narrowing_before_any_job(spark, tmp_path, policy):
    target = make_table(tmp_path / "t")
    before = schema_and_state(target)
    spec = spec_of(target, write_source(tmp_path, TOO_BIG), update({"qty": "s.qty"}), evolve=False)
    # Delta's error, Spark's CANNOT_UP_CAST_DATATYPE naming the value as the clause gives it
    with pytest.raises(
        ClauseResolutionError, match=r'Cannot up cast s\.qty from "BIGINT" to "INT"\. \(clause 1, '
    ) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "CANNOT_UP_CAST_DATATYPE"
    assert schema_and_state(target) == before


def test_a_timestamp_ntz_column_needs_the_table_feature(spark, tmp_path):
    target = make_table(tmp_path / "t")
    before = schema_and_state(target)
    source = pa.table({"id": pa.array([3], pa.int64()), "seen": pa.array([0], pa.timestamp("us"))})
    spec = spec_of(target, write_source(tmp_path, source), update_all(), insert_all())
    with pytest.raises(SchemaEvolutionError, match="Cannot add column seen of type TIMESTAMP_NTZ") as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT"
    assert schema_and_state(target) == before


@pytest.mark.parametrize("policy", ["ANSI"], indirect=True)
def test_a_non_deterministic_value_gets_the_overflow_check_too(spark, tmp_path, policy):
    # Given: a BIGINT value Spark deems non-deterministic (rand()), bound once for its check and its write
    target = make_table(tmp_path / "t")
    spec = spec_of(
        target,
        write_source(tmp_path, TOO_BIG),
        update({"qty": "s.qty + CAST(floor(rand()) AS BIGINT)"}),
        evolve=False,
    )
    with pytest.raises(MergeExecutionError, match="type column `qty` due to an overflow"):
        run_merge(spark, spec)
