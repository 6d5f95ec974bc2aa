"""UPDATE SET of struct fields on real tables: the struct is rebuilt with its other fields kept (a NULL
struct becomes one with only the assigned fields set), checked against deltalake's merge given the same
rebuild written out as a whole-struct assignment (delta-rs has no field assignment of its own)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.log_schema import read_table_schema
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.exceptions import ClauseResolutionError
from airflow_provider_deltamerge.session_kind import session_confs_set
from airflow_provider_deltamerge.spec import (
    MergeSpec,
    PathSource,
    insert,
    to_merge_sql,
    update,
    update_by_source,
)
from airflow_provider_deltamerge.spec.preflight import run_preflight
from tests.conftest import make_table, table_state
from tests.engine.delta_outcomes import delta_error_classes, jvm_errors
from tests.oracle import merge_with_deltalake, sorted_rows

GEO = pa.struct([("lat", pa.float64()), ("lon", pa.float64())])
ADDR = pa.struct([("city", pa.string()), ("zip", pa.string()), ("geo", GEO)])
TARGET = pa.table(
    {
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "addr": pa.array(
            [
                {"city": "Oslo", "zip": "0150", "geo": {"lat": 59.9, "lon": 10.7}},
                None,
                {"city": "Rome", "zip": "00100", "geo": None},
                {"city": "Lima", "zip": "15001", "geo": {"lat": -12.0, "lon": -77.0}},
            ],
            ADDR,
        ),
        "qty": pa.array([10, 20, 30, 40], pa.int32()),
    }
)
SOURCE = pa.table(
    {
        "id": pa.array([1, 2, 3, 5], pa.int64()),
        "city": pa.array(["Bergen", "Turin", None, "Quito"]),
        "lat": pa.array([60, 45, 41, -0], pa.int32()),  # cast to the field's double
    }
)


def source(tmp_path: Path) -> PathSource:
    pq.write_table(SOURCE, tmp_path / "source.parquet")
    return PathSource(str(tmp_path / "source.parquet"))


def whole_struct(city: str, lat: str) -> str:
    """The rebuild Delta documents for ``SET addr.city = <city>, addr.geo.lat = <lat>``, written out."""
    return (
        f"named_struct('city', {city}, 'zip', t.addr.zip, "
        f"'geo', named_struct('lat', CAST({lat} AS DOUBLE), 'lon', t.addr.geo.lon))"
    )


@pytest.mark.parametrize("executor", ["matched_only", "classic"])
def test_field_assignment_keeps_the_other_fields(spark, tmp_path, executor):
    ours, oracle = make_table(tmp_path / "ours", TARGET), make_table(tmp_path / "oracle", TARGET)
    spec = MergeSpec(
        ours,
        source(tmp_path),
        "t.id = s.id",
        (update({"t.addr.city": "s.city", "addr.geo.lat": "s.lat", "qty": "t.qty + 1"}),),
    )
    result = run_merge(spark, spec, executor=executor)
    rewritten = MergeSpec(
        oracle,
        spec.source,
        spec.condition,
        (update({"addr": whole_struct("s.city", "s.lat"), "qty": "t.qty + 1"}),),
    )
    expected = merge_with_deltalake(oracle, rewritten, SOURCE)
    assert sorted_rows(ours) == sorted_rows(oracle)
    by_id = {row["id"]: row for row in sorted_rows(ours)}
    assert by_id[1]["addr"] == {"city": "Bergen", "zip": "0150", "geo": {"lat": 60.0, "lon": 10.7}}
    assert by_id[2]["addr"] == {"city": "Turin", "zip": None, "geo": {"lat": 45.0, "lon": None}}
    assert by_id[3]["addr"] == {"city": None, "zip": "00100", "geo": {"lat": 41.0, "lon": None}}
    assert by_id[4] == {"id": 4, "addr": TARGET["addr"][3].as_py(), "qty": 40}
    assert result.metrics[m.NUM_TARGET_ROWS_UPDATED] == expected["num_target_rows_updated"] == 3


def test_field_assignment_by_source_and_insert_beside_it(spark, tmp_path):
    ours, oracle = make_table(tmp_path / "ours", TARGET), make_table(tmp_path / "oracle", TARGET)
    inserted = "named_struct('city', s.city, 'zip', NULL, 'geo', NULL)"
    spec = MergeSpec(
        ours,
        source(tmp_path),
        "t.id = s.id",
        (
            update({"t.addr.geo.lat": "s.lat"}, condition="s.city IS NOT NULL"),
            insert({"id": "s.id", "addr": inserted, "qty": "0"}),
            update_by_source({"t.addr.zip": "'closed'"}),
        ),
    )
    result = run_merge(spark, spec)
    rewritten = MergeSpec(
        oracle,
        spec.source,
        spec.condition,
        (
            update({"addr": whole_struct("t.addr.city", "s.lat")}, condition="s.city IS NOT NULL"),
            insert({"id": "s.id", "addr": inserted, "qty": "0"}),
            update_by_source(
                {"addr": "named_struct('city', t.addr.city, 'zip', 'closed', 'geo', t.addr.geo)"}
            ),
        ),
    )
    expected = merge_with_deltalake(oracle, rewritten, SOURCE)
    assert sorted_rows(ours) == sorted_rows(oracle)
    by_id = {row["id"]: row for row in sorted_rows(ours)}
    assert by_id[4]["addr"] == {"city": "Lima", "zip": "closed", "geo": {"lat": -12.0, "lon": -77.0}}
    assert by_id[5]["addr"] == {"city": "Quito", "zip": None, "geo": None}
    assert by_id[3]["addr"] == TARGET["addr"][2].as_py()  # its clause condition is false: unchanged
    for ours_name, oracle_name in (
        (m.NUM_TARGET_ROWS_UPDATED, "num_target_rows_updated"),
        (m.NUM_TARGET_ROWS_INSERTED, "num_target_rows_inserted"),
        (m.NUM_TARGET_ROWS_COPIED, "num_target_rows_copied"),
    ):
        assert result.metrics[ours_name] == expected[oracle_name]


@pytest.mark.parametrize(
    ("assignments", "error_class", "text"),
    [
        (
            {"t.addr.town": "s.city"},
            "FIELD_NOT_FOUND",
            "No such struct field `town` in `city`, `zip`, `geo`. (clause 2, WHEN MATCHED UPDATE)",
        ),
        (
            {"t.addr.geo.alt": "s.lat"},
            "FIELD_NOT_FOUND",
            "No such struct field `alt` in `lat`, `lon`. (clause 2, WHEN MATCHED UPDATE)",
        ),
        (
            {"t.qty.high": "s.lat"},
            "INVALID_EXTRACT_BASE_FIELD_TYPE",
            'Can\'t extract a value from "qty". Need a complex type [STRUCT, ARRAY, MAP] but got "INT". '
            "(clause 2, WHEN MATCHED UPDATE) Assign `qty` as a whole instead.",
        ),
    ],
    ids=["unknown-field", "unknown-deep-field", "non-struct"],
)
def test_bad_field_assignment_names_the_clause_and_changes_nothing(
    spark, tmp_path, assignments, error_class, text
):
    target = make_table(tmp_path / "t", TARGET)
    state = table_state(target)
    spec = MergeSpec(
        target,
        source(tmp_path),
        "t.id = s.id",
        (update({"qty": "1"}, condition="s.lat > 0"), update(assignments)),
    )
    with pytest.raises(ClauseResolutionError, match="clause 2, WHEN MATCHED UPDATE") as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == error_class
    assert text in str(raised.value)
    assert table_state(target) == state


@pytest.mark.parametrize(
    ("column", "when_case_sensitive", "when_ignoring_case"),
    [
        ("t.ADDR.city", "DELTA_MERGE_UNRESOLVED_EXPRESSION", None),
        ("t.addr.CITY", "FIELD_NOT_FOUND", None),
        ("t.addr.GEO.lat", "FIELD_NOT_FOUND", None),
        ("t.addr.town", "FIELD_NOT_FOUND", "FIELD_NOT_FOUND"),
        ("t.addr.geo.alt", "FIELD_NOT_FOUND", "FIELD_NOT_FOUND"),
        # the long run's seed 20261215, statement 50: pre-flight called it an unresolved name
        ("t.ADDR.town", "DELTA_MERGE_UNRESOLVED_EXPRESSION", "FIELD_NOT_FOUND"),
    ],
    ids=["column", "field", "field-above-a-field", "no-such-field", "no-such-deep-field", "column-no-field"],
)
@pytest.mark.parametrize("case_sensitive", [True, False], ids=["case-sensitive", "ignoring-case"])
def test_a_field_path_resolves_as_delta_resolves_it_under_the_sessions_case_rule(
    spark, tmp_path, column, when_case_sensitive, when_ignoring_case, case_sensitive
):
    # Given: a field assigned through a column or field name in another case than the table's, or a field
    # the struct lacks
    specs = [
        MergeSpec(
            make_table(tmp_path / name, TARGET),
            source(tmp_path),
            "t.id = s.id",
            (update({column: "CAST(s.lat AS DOUBLE)" if column.endswith("lat") else "s.city"}),),
        )
        for name in ("delta", "engine")
    ]
    before = [table_state(spec.target) for spec in specs]
    # When: Delta's own MERGE, and the engine after the operator's pre-flight checks, under the session's
    # spark.sql.caseSensitive
    outcomes = _delta_and_engine_outcomes(
        spark, specs, {"spark.sql.caseSensitive": str(case_sensitive).lower()}
    )
    # Then: the same outcome: a name the session cannot resolve refused with Delta's class and both tables
    # unchanged, else the same rows updated
    expected = when_case_sensitive if case_sensitive else when_ignoring_case
    assert outcomes == [expected, expected]
    if expected is not None:
        assert [table_state(spec.target) for spec in specs] == before
    else:
        assert sorted_rows(specs[0].target) == sorted_rows(specs[1].target) != before[1][1]


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        # Delta resolves a MATCHED UPDATE's target name the table lacks on the source (its message lost to
        # Spark's error catalogue, its class kept: tests/engine/delta_outcomes.py)
        (update({"t.addr.town": "s.city"}), "DELTA_MERGE_UNRESOLVED_EXPRESSION"),
        (update({"t.addr.geo.alt": "1.0"}), "DELTA_MERGE_UNRESOLVED_EXPRESSION"),
        # NOT MATCHED BY SOURCE clauses take no name from the source: Spark's error, as without evolution
        (update_by_source({"t.addr.town": "'x'"}), "FIELD_NOT_FOUND"),
    ],
    ids=["matched", "matched-deep", "not-matched-by-source"],
)
def test_under_schema_evolution_a_field_neither_side_has_is_refused_as_delta_refuses_it(
    spark, tmp_path, clause, expected
):
    # Given: schema evolution on, and a field that neither the table's struct nor the source has (the long
    # run's seed 20261217, statement 95: the engine said FIELD_NOT_FOUND)
    specs = [
        MergeSpec(
            make_table(tmp_path / name, TARGET),
            source(tmp_path),
            "t.id = s.id",
            (clause,),
            schema_evolution=True,
        )
        for name in ("delta", "engine")
    ]
    before = [table_state(spec.target) for spec in specs]
    # When
    outcomes = _delta_and_engine_outcomes(spark, specs, {})
    # Then: Delta's class on both sides, and both tables unchanged
    assert outcomes == [expected, expected]
    assert [table_state(spec.target) for spec in specs] == before


def _delta_and_engine_outcomes(spark, specs: list[MergeSpec], conf: dict[str, str]) -> list[str | None]:
    """The error class of Delta's own MERGE of ``specs[0]`` and of the engine's of ``specs[1]`` (after the
    operator's pre-flight checks), None where one succeeds, under the session confs ``conf``."""
    outcomes: list[str | None] = []
    with session_confs_set(spark, conf):
        try:
            spark.sql(to_merge_sql(specs[0])).collect()
            outcomes.append(None)
        except (PySparkException, Py4JJavaError) as err:
            outcomes.append(delta_error_classes(jvm_errors(err))[0])
        try:
            run_preflight(specs[1], read_target_schema=read_table_schema, conf=conf)
            run_merge(spark, specs[1])
            outcomes.append(None)
        except ClauseResolutionError as err:
            outcomes.append(err.error_class)
    return outcomes
