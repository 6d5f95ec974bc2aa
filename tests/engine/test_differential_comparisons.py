"""What the differential suite compares (tests/engine/delta_differential.py), each shown to catch a planted
difference: one real statement run by Delta's runtime and by our engine, whose outcomes agree; then our table
with one fact of its merge commit changed (a property dropped, a metric or a change-feed row wrong, a feature
or domain added, a clause's action changed, a checkpoint written) reads as a different outcome, which no
deliberate difference explains, and so does a log cleanup; and a failed merge of ours that leaves a commit
behind differs from Delta's failure. Identity values the merge generated compare as "fresh" only where the
protocol's rules hold (on the column's grid, beyond the old high-water mark, unique; the new mark the furthest
of them).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.spec import PathSource
from tests.engine import delta_differential
from tests.engine.delta_differences import explained_by
from tests.engine.delta_differential import Case, Outcome, run_case, table_outcome

Actions = list[dict[str, Any]]
Plant = Callable[[Actions, Path], None]  # changes a commit's actions; the table's folder

UPSERT = Case(
    target_columns=("id", "v"),
    source_columns=("id", "v"),
    target_rows=tuple({"id": k, "v": k} for k in range(1, 6)),
    source_rows=tuple({"id": k, "v": k * 3} for k in range(3, 8)),
    statement=(
        "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
        "WHEN MATCHED AND t.v > 3 THEN DELETE\n"
        "WHEN MATCHED THEN UPDATE SET *\n"
        "WHEN NOT MATCHED THEN INSERT *"
    ),
    properties={"delta.enableChangeDataFeed": "true", "delta.logRetentionDuration": "interval 60 days"},
    features=("rowTracking",),
)


@pytest.fixture(scope="module")
def agreeing(spark, tmp_path_factory) -> tuple[Outcome, Outcome, Path]:
    """The upsert's outcomes on Delta and on our engine, and our table's folder."""
    folder = tmp_path_factory.mktemp("agreeing")
    delta, ours = run_case(spark, UPSERT, folder)
    return delta, ours, folder / "engine"


def _newest_commit(table: Path) -> Path:
    return max((table / "_delta_log").glob("*.json"))


def _edit_commit(table: Path, edit: Plant) -> None:
    """Change the actions of ``table``'s newest commit in place."""
    commit = _newest_commit(table)
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    edit(actions, table)
    commit.write_text("".join(json.dumps(action) + "\n" for action in actions))


def _commit_info(actions: Actions) -> dict[str, Any]:
    return next(a["commitInfo"] for a in actions if "commitInfo" in a)


def _first_action(table: Path, kind: str) -> dict[str, Any]:
    first = (table / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    return next(a[kind] for a in map(json.loads, first) if kind in a)


def _drops_a_property(actions: Actions, table: Path) -> None:
    # the merge commit carries no metaData: it drops a property by carrying one without it
    metadata = _first_action(table, "metaData")
    configuration = {k: v for k, v in metadata["configuration"].items() if k != "delta.logRetentionDuration"}
    actions.append({"metaData": {**metadata, "configuration": configuration}})


def _wrong_metric(actions: Actions, table: Path) -> None:
    metrics = _commit_info(actions)["operationMetrics"]
    metrics[m.NUM_TARGET_FILES_REMOVED] = str(int(metrics[m.NUM_TARGET_FILES_REMOVED]) + 1)


def _missing_metric(actions: Actions, table: Path) -> None:
    del _commit_info(actions)["operationMetrics"][m.SCAN_TIME_MS]


def _another_action(actions: Actions, table: Path) -> None:
    parameters = _commit_info(actions)["operationParameters"]
    clauses = json.loads(parameters["matchedPredicates"])
    clauses[0]["actionType"] = "update"
    parameters["matchedPredicates"] = json.dumps(clauses)


def _adds_a_feature(actions: Actions, table: Path) -> None:
    protocol = _first_action(table, "protocol")
    actions.append({"protocol": {**protocol, "writerFeatures": [*protocol["writerFeatures"], "appendOnly"]}})


def _moves_a_high_water_mark(actions: Actions, table: Path) -> None:
    domain = next(a["domainMetadata"] for a in actions if "domainMetadata" in a)
    mark = json.loads(domain["configuration"])
    domain["configuration"] = json.dumps({**mark, "rowIdHighWaterMark": mark["rowIdHighWaterMark"] + 1})


def _checkpoints_it(actions: Actions, table: Path) -> None:
    # a checkpoint of the merge's version that Delta did not write (its interval is the default 10)
    DeltaTable(str(table)).create_checkpoint()


# What each plant changes in our table, and the part of the outcome that must show it.
PLANTS: dict[str, tuple[Plant, str]] = {
    "a-commit-drops-a-property": (_drops_a_property, "table"),
    "a-metric-is-wrong": (_wrong_metric, "files"),
    "a-metric-is-missing": (_missing_metric, "commit"),
    "a-clause-has-another-action": (_another_action, "commit"),
    "a-feature-is-added": (_adds_a_feature, "table"),
    "a-domain-is-changed": (_moves_a_high_water_mark, "table"),
    "a-checkpoint-is-written": (_checkpoints_it, "table"),
}


def _tampered_copy(table: Path, into: Path, edit: Plant) -> Path:
    copy = into / "tampered"
    shutil.copytree(table, copy)
    _edit_commit(copy, edit)
    return copy


def _differing(delta: Outcome, ours: Outcome) -> set[str]:
    return {k for k, v in delta.observed().items() if ours.observed().get(k) != v}


def test_the_upsert_agrees_on_every_compared_fact(agreeing):
    delta, ours, _ = agreeing
    # the comparison covers the table's facts, the commit's, its file metrics and the feed's rows
    assert ours.table["properties"]["delta.enableChangeDataFeed"] == "true"
    assert "delta.rowTracking" in ours.table["domains"]
    assert ours.commit["operation"] == "MERGE" and ours.files[m.NUM_TARGET_FILES_REMOVED] == 1
    assert isinstance(ours.changes, list) and {r["_change_type"] for r in ours.changes} == {
        "insert",
        "delete",
        "update_preimage",
        "update_postimage",
    }
    assert delta.observed() == ours.observed()


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_difference_in_our_commit_is_caught(spark, agreeing, tmp_path, plant):
    delta, _, table = agreeing
    edit, part = PLANTS[plant]
    # When: our merge commit is changed as the plant says, and our table read again
    tampered = table_outcome(spark, str(_tampered_copy(table, tmp_path, edit)))
    # Then: the outcomes differ in that part only, and no deliberate difference explains it
    assert _differing(delta, tampered) == {part}
    assert explained_by(delta, tampered) is None


def test_a_wrong_change_feed_row_is_caught(spark, agreeing, tmp_path):
    delta, _, table = agreeing
    copy = tmp_path / "tampered"
    shutil.copytree(table, copy)
    # When: the merge's change file has one post-image value changed
    cdc = [a["cdc"] for a in map(json.loads, _newest_commit(copy).read_text().splitlines()) if "cdc" in a]
    path = copy / cdc[0]["path"]
    rows = pq.read_table(path)
    wrong = rows.set_column(rows.schema.get_field_index("v"), "v", pc.add(rows["v"], 1))
    pq.write_table(wrong, path)
    _edit_commit(copy, lambda actions, _: _resize(actions, cdc[0]["path"], path.stat().st_size))
    tampered = table_outcome(spark, str(copy))
    # Then: only the feed's rows differ
    assert _differing(delta, tampered) == {"changes"}
    assert explained_by(delta, tampered) is None


def test_a_log_cleanup_delta_did_not_make_is_caught(spark, agreeing, tmp_path):
    _, _, table = agreeing
    # Given: two copies of our table with a checkpoint of the merge's version
    checkpointed, cleaned = tmp_path / "checkpointed", tmp_path / "cleaned"
    for copy in (checkpointed, cleaned):
        shutil.copytree(table, copy)
        DeltaTable(str(copy)).create_checkpoint()
    # When: one of them loses the commits before the checkpoint, as a cleanup deletes them
    for old in sorted((cleaned / "_delta_log").glob("*.json"))[:-1]:
        old.unlink()
    # (the table before the merge as read before the cleanup: the suite reads it before each merge)
    before = delta_differential.before_merge(str(table), _version(table) - 1)
    kept, lost = (table_outcome(spark, str(copy), before) for copy in (checkpointed, cleaned))
    # Then: only the history the log keeps differs, and no deliberate difference explains it
    assert {k for k in kept.table if kept.table[k] != lost.table[k]} == {"history"}
    assert _differing(kept, lost) == {"table"}
    assert explained_by(kept, lost) is None


def _version(table: Path) -> int:
    return int(_newest_commit(table).name[:20])


def _resize(actions: Actions, path: str, size: int) -> None:
    for action in actions:
        if action.get("cdc", {}).get("path") == path:
            action["cdc"]["size"] = size


def test_a_failed_merge_that_leaves_a_commit_is_caught(spark, tmp_path, monkeypatch):
    # Given: a statement both refuse (two source rows match one target row), and an engine whose failed
    # merge commits first
    case = Case(
        ("id", "v"),
        ("id", "v"),
        ({"id": 1, "v": 1},),
        ({"id": 1, "v": 2}, {"id": 1, "v": 3}),
        "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
        "WHEN MATCHED THEN UPDATE SET *",
    )
    delta, ours = run_case(spark, case, tmp_path / "honest")
    assert delta.error_class == ours.error_class and delta.observed() == ours.observed()
    merge = delta_differential.run_merge

    def commits_then_fails(session, spec, **kwargs):
        merge(session, dataclasses.replace(spec, source=_one_row_source(tmp_path)))
        raise MergeExecutionError("planted", error_class=ours.error_class)

    monkeypatch.setattr(delta_differential, "run_merge", commits_then_fails)
    # When
    delta, ours = run_case(spark, case, tmp_path / "planted")
    # Then: the same error class, but our table moved on: the outcomes differ
    assert delta.error_class == ours.error_class and (delta.version, ours.version) == (0, 1)
    assert delta.observed() != ours.observed() and explained_by(delta, ours) is None


def _one_row_source(folder: Path) -> PathSource:
    path = folder / "one-row.parquet"
    pq.write_table(delta_differential.arrow_table(("id", "v"), ({"id": 1, "v": 9},)), path)
    return PathSource(str(path))


IDENTITY_UPSERT = dataclasses.replace(
    UPSERT,
    statement=(
        "MERGE INTO delta.`{target}` AS t USING parquet.`{source}` AS s ON t.id = s.id\n"
        "WHEN MATCHED THEN UPDATE SET t.v = s.v\n"
        "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)"
    ),
    properties={"delta.enableChangeDataFeed": "true"},
    features=("identity",),
)


def test_identity_values_agree_as_fresh_where_the_merge_generated_them(spark, tmp_path):
    delta, ours = run_case(spark, IDENTITY_UPSERT, tmp_path)
    # the five rows Delta inserted keep their values (10, 13, ...); the two the merge inserts get fresh ones
    kept = sorted(r["ident"] for r in ours.rows if r["ident"] != "fresh")
    assert kept == [10, 13, 16, 19, 22] and [r["id"] for r in ours.rows if r["ident"] == "fresh"] == [6, 7]
    assert '"delta.identity.highWaterMark": "fresh"' in ours.schema
    assert isinstance(ours.changes, list) and sum(r["ident"] == "fresh" for r in ours.changes) == 2
    assert delta.observed() == ours.observed()


IDENTITY = delta_differential.IdentityBefore(start=10, step=3, high_water_mark=22)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([10, 25, 31], [10, "fresh", "fresh"]),
        ([10, 26], [10, "invalid"]),  # off the column's grid
        ([25, 25], ["invalid", "invalid"]),  # two rows with one value
        ([19, None], [19, None]),
    ],
    ids=["kept-and-fresh", "off-the-grid", "repeated", "kept-and-null"],
)
def test_a_generated_identity_value_is_fresh_only_by_the_protocols_rules(values, expected):
    rows = [{"ident": value} for value in values]
    assert [r["ident"] for r in delta_differential.fresh_identities(rows, IDENTITY)] == expected


@pytest.mark.parametrize(("mark", "fresh"), [(31, True), (28, False), (22, False)])
def test_a_high_water_mark_is_fresh_only_at_the_furthest_generated_value(mark, fresh):
    schema = json.dumps({"fields": [{"metadata": {"delta.identity.highWaterMark": mark}, "name": "ident"}]})
    compared = delta_differential.fresh_high_water_mark(schema, IDENTITY, [{"ident": 25}, {"ident": 31}])
    assert ('"fresh"' in compared) is fresh
