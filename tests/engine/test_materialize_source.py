"""Source materialization (Delta's MergeIntoMaterializeSource): the decision, the traits it reads from real
source plans, and real merges whose source gives different rows to every read unless materialized."""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.source import materialize as ms
from airflow_provider_deltamerge.engine.source.load import load_source
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, QuerySource, insert_all, update_all
from tests.conftest import make_table, table_state
from tests.oracle import sorted_rows

CLEAN = ms.SourceTraits(
    reads_only_delta=True, deterministic=True, ignores_unreadable_files=False, calls_udf=False
)
NON_DELTA = ms.SourceTraits(False, False, ignores_unreadable_files=True, calls_udf=True)


@pytest.mark.parametrize(
    ("mode", "read_once", "traits", "expected"),
    [
        ("all", True, CLEAN, (True, ms.MATERIALIZE_ALL)),
        ("ALL", False, CLEAN, (True, ms.MATERIALIZE_ALL)),
        ("none", False, NON_DELTA, (False, ms.NOT_MATERIALIZED_NONE)),
        ("always", False, CLEAN, (True, ms.INVALID_CONFIG)),
        ("auto", True, NON_DELTA, (False, ms.NOT_MATERIALIZED_AUTO_INSERT_ONLY)),
        ("auto", False, NON_DELTA, (True, ms.NON_DETERMINISTIC_SOURCE_NON_DELTA)),
        (
            "auto",
            False,
            ms.SourceTraits(True, False, ignores_unreadable_files=True, calls_udf=True),
            (True, ms.NON_DETERMINISTIC_SOURCE_OPERATORS),
        ),
        (
            "auto",
            False,
            ms.SourceTraits(True, True, ignores_unreadable_files=True, calls_udf=True),
            (True, ms.IGNORE_UNREADABLE_FILES_CONFIGS_ARE_SET),
        ),
        (
            "auto",
            False,
            ms.SourceTraits(True, True, ignores_unreadable_files=False, calls_udf=True),
            (True, ms.NON_DETERMINISTIC_SOURCE_WITH_DETERMINISTIC_UDF),
        ),
        ("auto", False, CLEAN, (False, ms.NOT_MATERIALIZED_AUTO)),
    ],
)
def test_decision_follows_delta_rules_in_order(mode, read_once, traits, expected):
    assert ms.should_materialize(mode, read_once=read_once, traits=traits) == expected


@pytest.fixture(scope="module")
def udfs(spark: SparkSession) -> None:
    """Python UDFs for sources, ``noisy()`` non-deterministic (the engine never runs Python on executors)."""
    spark.udf.register("noisy", F.udf(lambda: random.random(), "double").asNondeterministic())
    spark.udf.register("plus_one", lambda x: x + 1, "bigint")


@pytest.fixture
def conf(spark: SparkSession) -> Iterator[dict[str, str]]:
    """Spark confs set for one test, unset afterwards."""
    given: dict[str, str] = {}
    yield given
    for key in given:
        spark.conf.unset(key)


def apply(spark: SparkSession, confs: dict[str, str], **values: str) -> None:
    for key, value in values.items():
        spark.conf.set(key, value)
        confs[key] = value


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("delta", ms.NOT_MATERIALIZED_AUTO),
        ("parquet", ms.NON_DETERMINISTIC_SOURCE_NON_DELTA),
        (QuerySource("SELECT id FROM range(3)"), ms.NON_DETERMINISTIC_SOURCE_NON_DELTA),
        (QuerySource("SELECT 1 AS id"), ms.NOT_MATERIALIZED_AUTO),
        (QuerySource("SELECT 1 AS id, rand() AS r"), ms.NON_DETERMINISTIC_SOURCE_OPERATORS),
        (QuerySource("SELECT plus_one(1) AS id"), ms.NON_DETERMINISTIC_SOURCE_WITH_DETERMINISTIC_UDF),
        (QuerySource("SELECT 1 AS id WHERE noisy() < 2"), ms.NON_DETERMINISTIC_SOURCE_OPERATORS),
    ],
    ids=["delta-path", "parquet-path", "range", "one-row", "rand", "udf", "noisy-udf"],
)
def test_traits_of_real_sources(spark, tmp_path, udfs, source, reason):
    if isinstance(source, str):  # a path source of that format
        table = make_table(tmp_path / "src", pa.table({"id": pa.array([1, 2], pa.int64())}))
        source = PathSource(table, format="delta") if source == "delta" else PathSource(f"{table}/*.parquet")
    traits = ms.source_traits(spark, source, load_source(spark, source))
    assert ms.should_materialize("auto", read_once=False, traits=traits).reason == reason


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("SELECT id, id * 2 AS twice FROM delta.`{a}` WHERE id > 0", ms.NOT_MATERIALIZED_AUTO),
        ("SELECT id FROM delta.`{a}` x UNION SELECT id FROM DELTA.`{b}`", ms.NOT_MATERIALIZED_AUTO),
        (
            "SELECT x.id FROM delta.`{a}` x JOIN delta.`{b}` y ON x.id = y.id",
            ms.NON_DETERMINISTIC_SOURCE_OPERATORS,
        ),
        ("SELECT id FROM delta.`{a}` WHERE rand() < 2", ms.NON_DETERMINISTIC_SOURCE_OPERATORS),
        (
            "SELECT id FROM delta.`{a}` UNION ALL SELECT id FROM parquet.`{a}/*.parquet`",
            ms.NON_DETERMINISTIC_SOURCE_NON_DELTA,
        ),
    ],
    ids=["filter", "union", "join", "rand", "with-parquet"],
)
def test_delta_paths_in_a_query_count_as_delta_scans(spark, tmp_path, query, reason):
    # A delta.`path` read through our reader is a join of its files with the log's file table; like a Delta
    # path source (and Delta's own scan) it counts as one deterministic Delta leaf.
    a, b = make_table(tmp_path / "a"), make_table(tmp_path / "b")
    source = QuerySource(query.format(a=a, b=b))
    traits = ms.source_traits(spark, source, load_source(spark, source))
    assert ms.should_materialize("auto", read_once=False, traits=traits).reason == reason


def test_delta_source_is_materialized_when_spark_skips_unreadable_files(spark, tmp_path, conf):
    source = PathSource(make_table(tmp_path / "src"), format="delta")
    apply(spark, conf, **{"spark.sql.files.ignoreMissingFiles": "true"})
    traits = ms.source_traits(spark, source, load_source(spark, source))
    assert ms.should_materialize("auto", read_once=False, traits=traits).reason == (
        ms.IGNORE_UNREADABLE_FILES_CONFIGS_ARE_SET
    )
    apply(spark, conf, **{ms.FORCE_WITH_UNREADABLE_FILES: "false"})
    traits = ms.source_traits(spark, source, load_source(spark, source))
    assert not ms.should_materialize("auto", read_once=False, traits=traits).materialize


# --- real merges -----------------------------------------------------------------------------------------

KEYS = 32


def persistent_rdds(spark: SparkSession) -> set[int]:
    return {int(k) for k in spark.sparkContext._jsc.getPersistentRDDs()}


def one_file_per_key(spark: SparkSession, path: str) -> str:
    """Target ids 0..KEYS-1, value 0, one file (partition) per id: a file is touched by its one key."""
    data = pa.table({"id": pa.array(range(KEYS), pa.int64()), "value": pa.array([0] * KEYS, pa.int64())})
    return make_table(path, data, partition_by=["id"])  # type: ignore[arg-type]


def noisy_upsert(target: str) -> MergeSpec:
    """Each read of the source keeps a fresh random half of the ids, all of which the target has."""
    return MergeSpec(
        target,
        QuerySource(f"SELECT id, 1 AS value FROM range({KEYS}) WHERE noisy() < 0.5"),
        "t.id = s.id",
        (update_all(), insert_all()),
    )


def test_changing_source_is_read_once_when_materialized(spark, tmp_path, udfs, caplog):
    target = one_file_per_key(spark, str(tmp_path / "t"))
    before = persistent_rdds(spark)
    with caplog.at_level(logging.INFO, logger=ms.__name__):
        result = run_merge(spark, noisy_upsert(target))  # auto: a range is no Delta scan
    assert f"Source materialized ({ms.NON_DETERMINISTIC_SOURCE_NON_DELTA})" in caplog.text
    ids = Counter(row["id"] for row in sorted_rows(target))
    updated = sum(row["value"] for row in sorted_rows(target))
    assert set(ids.values()) == {1}, "every source row updates its own target row: nothing inserted twice"
    metrics = result.metrics
    assert metrics[m.NUM_SOURCE_ROWS] == metrics[m.NUM_SOURCE_ROWS_IN_SECOND_SCAN] == updated
    assert metrics[m.NUM_TARGET_ROWS_UPDATED] == updated
    assert metrics[m.NUM_TARGET_ROWS_INSERTED] == 0
    assert metrics[m.MATERIALIZE_SOURCE_TIME_MS] >= 1
    assert persistent_rdds(spark) == before


def test_changing_source_read_again_gives_an_inconsistent_merge(spark, tmp_path, udfs, conf, caplog):
    target = one_file_per_key(spark, str(tmp_path / "t"))
    apply(spark, conf, **{ms.MATERIALIZE_SOURCE: "none"})
    with caplog.at_level(logging.INFO, logger=ms.__name__):
        run_merge(spark, noisy_upsert(target))
    assert f"Source not materialized ({ms.NOT_MATERIALIZED_NONE})" in caplog.text
    # Pruning, finding touched files and rewriting each drew another half: a key drawn by the rewrite but
    # not before is "not matched" there and inserted next to its target row (chance of none: (5/8)**32).
    assert max(Counter(row["id"] for row in sorted_rows(target)).values()) == 2


def test_materialized_source_is_released_after_a_failed_merge(spark, tmp_path, conf, caplog):
    target = make_table(tmp_path / "t")
    state = table_state(target)
    apply(spark, conf, **{ms.MATERIALIZE_SOURCE: "all", ms.STORAGE_LEVEL: "memory_and_disk"})
    twice = QuerySource("SELECT 1L AS id, 5 AS qty, 'eu' AS region UNION ALL SELECT 1L, 6, 'us'")
    before = persistent_rdds(spark)
    with caplog.at_level(logging.INFO, logger=ms.__name__), pytest.raises(MergeExecutionError):
        run_merge(spark, MergeSpec(target, twice, "t.id = s.id", (update_all(),)))  # multiple matches
    assert f"Source materialized ({ms.MATERIALIZE_ALL})" in caplog.text
    assert persistent_rdds(spark) == before
    assert table_state(target) == state


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ("t.id <=> s.id", ms.NOT_MATERIALIZED_AUTO_INSERT_ONLY),
        # Pruning reads the source's key range first: two reads, so Delta's rules apply.
        ("t.id = s.id", ms.NON_DETERMINISTIC_SOURCE_NON_DELTA),
    ],
)
def test_insert_only_merge_reads_the_source_once_unless_pruning_reads_it(
    spark, tmp_path, caplog, condition, reason
):
    target = make_table(tmp_path / "t")
    extract = tmp_path / "extract.parquet"
    pq.write_table(
        pa.table(
            {
                "id": pa.array([9, 10, 11], pa.int64()),
                "qty": pa.array([1, 2, 3], pa.int32()),
                "region": pa.array(["eu"] * 3),
            }
        ),
        extract,
    )
    spec = MergeSpec(target, PathSource(str(extract)), condition, (insert_all(),))
    with caplog.at_level(logging.INFO, logger=ms.__name__):
        metrics = run_merge(spark, spec).metrics
    assert f"({reason})" in caplog.text
    assert (metrics[m.NUM_SOURCE_ROWS], metrics[m.NUM_TARGET_ROWS_INSERTED]) == (3, 2)
    assert metrics[m.NUM_SOURCE_ROWS_IN_SECOND_SCAN] == 0
