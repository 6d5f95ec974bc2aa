"""Pre-flight checks: column references against real schemas, read from Delta logs and parquet footers."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltamerge.delta.log.log_schema import read_path_schema, read_table_schema
from airflow_provider_deltamerge.exceptions import ClauseResolutionError, SourceError, TargetTableError
from airflow_provider_deltamerge.spec import (
    MergeClause,
    MergeSpec,
    PathSource,
    QuerySource,
    TableColumns,
    delete,
    delete_by_source,
    insert,
    insert_all,
    preflight_problems,
    run_preflight,
    update,
    update_all,
    update_by_source,
)
from airflow_provider_deltamerge.spec.preflight import AUTO_MERGE_CONF

TARGET = TableColumns.from_paths("id", "name", "qty", "addr.city", "addr.zip", "active")
SOURCE = TableColumns.from_paths("id", "name", "qty", "city", "op", "ts")


def merge(*clauses: MergeClause, **fields: Any) -> MergeSpec:
    defaults = {"target": "/lake/orders", "source": PathSource("/in/orders"), "condition": "t.id = s.id"}
    return MergeSpec(**{**defaults, **fields}, clauses=clauses)


def messages(spec: MergeSpec, source: TableColumns | None = SOURCE) -> list[str]:
    return [p.message for p in preflight_problems(spec, TARGET, source)]


def test_a_spec_that_resolves_has_no_problems() -> None:
    spec = merge(
        delete(condition="s.op = 'D'"),
        update(
            {"t.addr.city": "s.city", "qty": "t.qty + s.qty", "NAME": "upper(s.name)"}, condition="s.ts > 0"
        ),
        insert({"id": "s.id", "name": "s.name", "addr": "named_struct('city', s.city, 'zip', NULL)"}),
        update_by_source({"active": "false"}, condition="t.active AND t.addr.zip IS NOT NULL"),
        delete_by_source(),
        condition="t.id = s.id AND op <> 'X' AND transform(array(1), x -> x + 1) IS NOT NULL",
        deduplicate_source_by=("id",),
        deduplicate_order_by=("ts",),
    )
    assert preflight_problems(spec, TARGET, SOURCE) == []


def test_unknown_target_column_with_suggestions() -> None:
    [message] = messages(merge(delete(), condition="t.idd = s.id"))
    assert message == (
        "Cannot resolve t.idd in search condition given columns t.id, t.name, t.qty, t.addr, t.active, "
        "s.id, s.name, s.qty, s.city, s.op, s.ts. (ON condition) Did you mean t.id or t.addr?"
    )


def test_unknown_nested_field() -> None:
    [message] = messages(merge(update({"qty": "1"}, condition="t.addr.cty = s.city")))
    assert message.startswith("Cannot resolve t.addr.cty in UPDATE condition given columns t.id,")
    assert "(clause 1, WHEN MATCHED UPDATE) Did you mean t.addr.city or" in message


@pytest.mark.parametrize(
    ("condition", "told"),
    [
        ("t.id = s.id", ["FIELD_NOT_FOUND"]),
        # a name in another case, which the session may not resolve: Delta resolves ON first, so the job tells
        ("t.ID = s.id", []),
        ("t.id = s.ID", []),
    ],
    ids=["as-spelled", "target-name-in-another-case", "source-name-in-another-case"],
)
def test_in_a_case_sensitive_session_nothing_after_a_name_in_another_case_is_told(
    condition: str, told: list[str]
) -> None:
    spec = merge(update({"t.addr.town": "s.city"}), condition=condition)
    problems = preflight_problems(spec, TARGET, SOURCE, case_sensitive=True)
    assert [p.error_class for p in problems] == told


@pytest.mark.parametrize("case_sensitive", [True, False], ids=["case-sensitive", "ignoring-case"])
def test_a_source_name_pre_flight_cannot_check_defers_what_follows_only_in_a_case_sensitive_session(
    case_sensitive: bool,
) -> None:
    # The source is a query: its schema is not known before the job. In a case-sensitive session any of its
    # names may fail as Delta resolves it, before the field below; ignoring case, the field is told (a
    # deliberate difference in which error comes first, docs/semantics.md).
    spec = merge(update({"t.addr.town": "s.city"}), source=QuerySource("SELECT * FROM orders"))
    problems = preflight_problems(spec, TARGET, None, case_sensitive=case_sensitive)
    assert [p.error_class for p in problems] == ([] if case_sensitive else ["FIELD_NOT_FOUND"])


@pytest.mark.parametrize(
    ("clause", "text"),
    [
        (
            insert({"id": "s.id"}, condition="t.active"),
            "Cannot resolve t.active in INSERT condition given columns s.id, s.name, s.qty, s.city, s.op, "
            "s.ts. (clause 1, WHEN NOT MATCHED INSERT) WHEN NOT MATCHED clauses see only the source (s)",
        ),
        (
            insert({"id": "s.id", "qty": "t.qty"}),
            "Cannot resolve t.qty in INSERT clause given columns s.id,",
        ),
        (
            insert({"id": "s.id"}, condition="active"),
            "(clause 1, WHEN NOT MATCHED INSERT) WHEN NOT MATCHED clauses see only the source (s): there "
            "is no target row.",
        ),
        (
            update_by_source({"qty": "s.qty"}),
            "Cannot resolve s.qty in UPDATE clause given columns t.id, t.name, t.qty, t.addr, t.active. "
            "(clause 1, WHEN NOT MATCHED BY SOURCE UPDATE) WHEN NOT MATCHED BY SOURCE clauses see only the "
            "target (t): there is no source row.",
        ),
        (
            delete_by_source(condition="op = 'D'"),
            "Cannot resolve op in DELETE condition given columns t.id,",
        ),
    ],
)
def test_references_a_clause_cannot_see(clause: MergeClause, text: str) -> None:
    [message] = messages(merge(clause))
    assert text in message


def test_unknown_alias() -> None:
    [message] = messages(merge(delete(condition="src.op = 'D'")))
    assert "Cannot resolve src.op in DELETE condition" in message
    assert "`src` is neither a column nor an alias: the target is t and the source s." in message


def test_ambiguous_unqualified_reference() -> None:
    [problem] = preflight_problems(merge(delete(condition="qty > 0")), TARGET, SOURCE)
    assert problem.error_class == "AMBIGUOUS_REFERENCE"
    assert problem.message.startswith("Reference `qty` is ambiguous, could be: [`t`.`qty`, `s`.`qty`].")


@pytest.mark.parametrize(
    ("clause", "evolution", "text"),
    [
        (update({"extra": "s.op"}), False, "Cannot resolve extra in UPDATE clause given columns t.id,"),
        (insert({"id": "s.id", "nmae": "s.name"}), False, "Did you mean name? To add it from the source"),
        (update({"op": "s.op"}), True, None),
        (update({"extra": "s.op"}), True, "Schema evolution adds only columns the source has."),
        (update_by_source({"op": "'x'"}), True, "WHEN NOT MATCHED BY SOURCE clauses cannot add columns."),
    ],
)
def test_assignment_to_a_column_the_target_lacks(
    clause: MergeClause, evolution: bool, text: str | None
) -> None:
    found = messages(merge(clause, schema_evolution=evolution))
    assert found == [] if text is None else text in found[0]


def test_star_needs_every_target_column_in_the_source_without_evolution() -> None:
    [message] = messages(merge(update_all()))
    assert (
        message.startswith("Cannot resolve s.addr, active in UPDATE clause")
        or "lacks addr, active" in message
    )
    assert messages(merge(update_all(except_columns=["addr", "active"]))) == []
    assert messages(merge(insert_all(), schema_evolution=True)) == []


@pytest.mark.parametrize(
    ("conf", "refused"),
    [
        ({}, True),
        ({AUTO_MERGE_CONF: "true"}, False),
        ({AUTO_MERGE_CONF: "TRUE "}, False),
        ({AUTO_MERGE_CONF: "false"}, True),
    ],
)
def test_the_job_s_auto_merge_conf_evolves_as_with_schema_evolution(
    conf: dict[str, str], refused: bool
) -> None:
    # Given: an UPDATE SET * whose source lacks target columns, and a new source column assigned by name,
    # run with Delta's autoMerge in the job's conf (Delta's canEvolveSchema: WITH SCHEMA EVOLUTION or it)
    spec = merge(update_all(condition="s.qty > 0"), update({"op": "s.op"}))
    schemas = {
        "target": {
            "type": "struct",
            "fields": [
                {"name": n, "type": "long", "nullable": True, "metadata": {}} for n in ("id", "qty", "total")
            ],
        },
        "source": {
            "type": "struct",
            "fields": [
                {"name": n, "type": "long", "nullable": True, "metadata": {}} for n in ("id", "qty", "op")
            ],
        },
    }

    # When / Then: refused without it, as Delta refuses; checked as an evolving merge with it
    def check() -> None:
        run_preflight(
            spec,
            read_target_schema=lambda _: schemas["target"],
            read_source_schema=lambda *_: schemas["source"],
            conf=conf,
        )

    if refused:
        with pytest.raises(ClauseResolutionError, match="DELTA_MERGE_UNRESOLVED_EXPRESSION"):
            check()
    else:
        check()


def test_star_needs_generated_columns_in_the_source_too() -> None:
    # Given: a target whose "total" is generated from qty; Delta 4.4's * still takes it from the source
    field = {"type": "integer", "nullable": True}
    target = TableColumns.from_delta_schema(
        {
            "fields": [
                {"name": "id", **field, "metadata": {}},
                {"name": "qty", **field, "metadata": {}},
                {"name": "total", **field, "metadata": {"delta.generationExpression": "qty * 10"}},
            ]
        }
    )
    [problem] = preflight_problems(merge(insert_all()), target, TableColumns.from_paths("id", "qty"))
    assert "lacks total." in problem.message
    # ... and * EXCEPT leaves it out
    assert (
        preflight_problems(
            merge(insert_all(except_columns=["total"])), target, TableColumns.from_paths("id", "qty")
        )
        == []
    )


def test_except_names_a_target_column() -> None:
    [message] = messages(merge(update_all(except_columns=["adr", "addr", "active"])))
    assert "Cannot resolve adr in UPDATE clause" in message and "Did you mean addr?" in message


def test_deduplication_columns_are_source_columns() -> None:
    [message] = messages(
        merge(
            update_all(except_columns=["addr", "active"]),
            deduplicate_source_by=("id",),
            deduplicate_order_by=("tss",),
        )
    )
    assert "Cannot resolve tss in source de-duplication" in message and "Did you mean ts?" in message


def test_source_checks_are_skipped_when_its_schema_is_unknown() -> None:
    spec = merge(update_all(), update_by_source({"active": "false"}), condition="t.id = s.anything")
    assert messages(spec, source=None) == []


def test_expression_syntax_error_names_the_clause_and_position() -> None:
    [problem] = preflight_problems(merge(delete(condition="s.op = = 'D'")), TARGET, SOURCE)
    assert problem.error_class == "PARSE_SYNTAX_ERROR"
    assert (
        "(clause 1, WHEN MATCHED DELETE) Fix the DELETE condition \"s.op = = 'D'\" at line 1, column 8"
        in (problem.message)
    )


# Against real tables on disk.


def test_run_preflight_reads_the_target_log_and_a_parquet_source(
    make_delta_table: Callable[..., str], tmp_path: Path
) -> None:
    target = make_delta_table()
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(pa.table({"id": [1], "name": ["a"], "city": ["x"]}), source / "part-0.parquet")
    spec = merge(
        update({"t.addr.city": "s.city", "name": "s.nam"}),
        insert_all(),
        target=target,
        source=PathSource(str(source)),
    )
    with pytest.raises(ClauseResolutionError) as info:
        run_preflight(spec, read_target_schema=read_table_schema, read_source_schema=read_path_schema)
    assert info.value.error_class == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
    message = str(info.value)
    assert "2 problems in the merge spec" in message
    assert "Cannot resolve s.nam in UPDATE clause" in message and "Did you mean s.name?" in message
    assert "INSERT * takes every target column from the source, which lacks qty, addr, active." in message


def test_run_preflight_with_a_delta_source_passes(make_delta_table: Callable[..., str]) -> None:
    spec = merge(
        update({"t.addr.city": "s.addr.city"}),
        insert_all(),
        target=make_delta_table("target"),
        source=PathSource(make_delta_table("source"), "delta"),
    )
    run_preflight(spec, read_target_schema=read_table_schema, read_source_schema=read_path_schema)


def test_missing_target_table_names_the_path(tmp_path: Path) -> None:
    spec = merge(update_all(), target=str(tmp_path / "nowhere"))
    with pytest.raises(TargetTableError) as info:
        run_preflight(spec, read_target_schema=read_table_schema, read_source_schema=read_path_schema)
    assert info.value.error_class == "DELTA_TABLE_NOT_FOUND"
    assert f"Delta table {tmp_path / 'nowhere'} doesn't exist." in str(info.value)


def test_missing_parquet_source_names_the_path(make_delta_table: Callable[..., str], tmp_path: Path) -> None:
    spec = merge(update_all(), target=make_delta_table(), source=PathSource(str(tmp_path / "no-files")))
    with pytest.raises(SourceError, match=r"Path does not exist: .*no-files"):
        run_preflight(spec, read_target_schema=read_table_schema, read_source_schema=read_path_schema)


def test_a_query_source_is_not_read(make_delta_table: Callable[..., str]) -> None:
    spec = merge(update_all(), target=make_delta_table(), source=QuerySource("SELECT 1 AS id"))
    run_preflight(spec, read_target_schema=read_table_schema, read_source_schema=read_path_schema)


def write_source_files(folder: Path, file_format: str) -> Path:
    """One real ``file_format`` file of orders in ``folder``, written as an upstream extract would be."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = pa.table({"id": [1, 2], "qty": [3, 4]})
    path = folder / f"part-0.{file_format}"
    if file_format == "csv":
        pa_csv.write_csv(rows, path)
    elif file_format == "orc":
        pa_orc.write_table(rows, path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows.to_pylist()))
    return path


def preflight_of(target: str, path: str, file_format: str) -> None:
    spec = merge(update_all(), target=target, source=PathSource(path, file_format))
    run_preflight(spec, read_target_schema=read_table_schema, read_source_schema=read_path_schema)


@pytest.mark.parametrize("file_format", ["csv", "json", "orc"])
def test_a_missing_source_of_any_format_is_found_before_spark(
    make_delta_table: Callable[..., str], tmp_path: Path, file_format: str
) -> None:
    # Given: the day's extract folder exists, but today's file was never written
    target = make_delta_table()
    write_source_files(tmp_path / "staging", file_format)
    missing = f"{tmp_path}/staging/2024-01-03.{file_format}"
    # When / Then: pre-flight names the path and the fix, as Spark's PATH_NOT_FOUND would much later
    with pytest.raises(
        SourceError, match=rf"Path does not exist: {re.escape(missing)}\. Check the source path"
    ) as info:
        preflight_of(target, missing, file_format)
    assert info.value.error_class == "PATH_NOT_FOUND"


@pytest.mark.parametrize("file_format", ["csv", "json", "orc"])
def test_existing_sources_of_any_format_pass(
    make_delta_table: Callable[..., str], tmp_path: Path, file_format: str
) -> None:
    target, written = make_delta_table(), write_source_files(tmp_path / "staging", file_format)
    for path in (str(written), str(written.parent), f"{written.parent}/*.{file_format}", written.as_uri()):
        preflight_of(target, path, file_format)


@pytest.mark.parametrize(
    ("pattern", "found"),
    [("*.csv", True), ("part-?.csv", True), ("part-[0-9].csv", True), ("*.tsv", False), ("{a,b}.csv", True)],
)
def test_a_glob_must_match_a_file(
    make_delta_table: Callable[..., str], tmp_path: Path, pattern: str, found: bool
) -> None:
    # ``{a,b}`` is Hadoop glob syntax Python's glob cannot judge: it is left to the job, never refused.
    target, written = make_delta_table(), write_source_files(tmp_path / "staging", "csv")
    path = f"{written.parent}/{pattern}"
    if found:
        preflight_of(target, path, "csv")
    else:
        with pytest.raises(SourceError, match="PATH_NOT_FOUND"):
            preflight_of(target, path, "csv")


def test_a_missing_file_uri_is_found_too(make_delta_table: Callable[..., str], tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"Path does not exist: file://.*nothing\.json"):
        preflight_of(make_delta_table(), (tmp_path / "nothing.json").as_uri(), "json")


def test_target_schema_of_nested_types(make_delta_table: Callable[..., str]) -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("tags", pa.list_(pa.struct([("k", pa.string())]))),
            ("attrs", pa.map_(pa.string(), pa.string())),
        ]
    )
    columns = TableColumns.from_delta_schema(read_table_schema(make_delta_table("nested", schema)))
    assert columns.resolves(("tags", "k")) and columns.resolves(("attrs", "any_key"))
    assert not columns.resolves(("tags", "v")) and not columns.resolves(("id", "x"))


def test_set_of_a_field_needs_a_struct_field_that_exists(make_delta_table: Callable[..., str]) -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("addr", pa.struct([("city", pa.string()), ("geo", pa.struct([("lat", pa.float64())]))])),
            ("tags", pa.list_(pa.struct([("k", pa.string())]))),
            ("attrs", pa.map_(pa.string(), pa.string())),
        ]
    )
    target = TableColumns.from_delta_schema(read_table_schema(make_delta_table("nested", schema)))
    spec = merge(
        update({"t.addr.geo.lat": "1.5", "addr.city": "s.city"}),
        update_by_source({"t.tags.k": "'x'", "attrs.a": "'y'", "id.x": "1", "t.addr.geo.lon": "2.0"}),
    )
    found = [(p.error_class, p.message) for p in preflight_problems(spec, target, SOURCE)]
    non_struct = (
        "Updating nested fields is only supported for StructType, but you are trying to update a field of"
    )
    assert found == [
        (
            "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT",
            f"{non_struct} `tags`, which is of type: array. "
            "(clause 2, WHEN NOT MATCHED BY SOURCE UPDATE) Assign `tags` as a whole instead.",
        ),
        (
            "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT",
            f"{non_struct} `attrs`, which is of type: map. "
            "(clause 2, WHEN NOT MATCHED BY SOURCE UPDATE) Assign `attrs` as a whole instead.",
        ),
        (
            # Spark's analysis refuses to extract a field from a scalar before Delta looks at the SET.
            "INVALID_EXTRACT_BASE_FIELD_TYPE",
            'Can\'t extract a value from "id". Need a complex type [STRUCT, ARRAY, MAP] but got "BIGINT". '
            "(clause 2, WHEN NOT MATCHED BY SOURCE UPDATE) Assign `id` as a whole instead.",
        ),
        (
            # Spark's analysis of the assignment's target, as Delta reports it (checked against Delta's
            # runtime in tests/engine/test_struct_fields.py)
            "FIELD_NOT_FOUND",
            "No such struct field `lon` in `lat`. (clause 2, WHEN NOT MATCHED BY SOURCE UPDATE) "
            "`addr.geo` has no field `lon`; UPDATE SET assigns only fields the struct already has.",
        ),
    ]
