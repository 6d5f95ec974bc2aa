"""Tables whose reader features ``deltalake`` 1.6.6 cannot open (catalogManaged, geospatial, geospatial-dev,
adaptiveMetadata-preview; issue 39, item 5): the protocol is read from the log itself, so ``backend="auto"``
sends the merge to Delta's runtime where the session has it, and otherwise the engine, the pre-flight and a
source read refuse with Delta's class, the feature named and the way out, never a raw ``DeltaError``.

Delta 4.4 makes the geospatial tables itself (``delta.feature.geospatial=supported``; a GEOMETRY column it
refuses, ``DELTA_GEOSPATIAL_NOT_SUPPORTED``) and merges into them. ``delta.feature.adaptiveMetadata-preview``
gives a table whose protocol Delta also fills with catalogManaged and their required features, which Delta
then refuses to read or write by path (``DELTA_PATH_BASED_ACCESS_TO_CATALOG_MANAGED_TABLE_BLOCKED``).
catalogManaged alone Delta refuses to create (``DELTA_UNSUPPORTED_CATALOG_MANAGED_TABLE_CREATION``: it needs
a catalog): that protocol is the feature and its required features as Delta's own ``TableFeature`` objects
give them (read through the JVM of the tests' session), written into a crafted log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.log_schema import read_path_schema, read_table_schema
from airflow_provider_deltamerge.delta.log.table_features import read_protocol
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.engine.backends import delta_spark as backend
from airflow_provider_deltamerge.exceptions import (
    ClauseResolutionError,
    DeltaMergeError,
    SourceError,
    UnsupportedFeaturesError,
)
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert_all, parse_merge_sql, update_all
from airflow_provider_deltamerge.spec.preflight import run_preflight
from tests.delta.helpers import (
    CHANGES,
    FIELDS,
    PLAIN_UPSERT,
    copy_of,
    craft_table,
    delta_merge,
    delta_rows,
    last_history,
    version_and_files,
)
from tests.delta.test_delta_reads_our_merges import delta_table, source
from tests.engine.test_delta_spark_backend import DeltaConfiguredSession

GEOSPATIAL = ("geospatial", "geospatial-dev")
FIRST_SENTENCE = (
    'Unsupported Delta write feature: table "{table}" requires writer table feature(s) that are unsupported '
    'by Delta Lake "airflow-provider-deltamerge '
)


COLUMNS = ["id", "qty", "region"]


def delta_made(spark: Any, path: Path, feature: str, *, rows: bool = True) -> str:
    """A table Delta's runtime creates with ``feature`` supported, with rows where Delta writes it (not a
    catalog-managed one by path)."""
    if rows:
        return delta_table(spark, path, {f"delta.feature.{feature}": "supported"})
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, qty INT, region STRING) USING delta "
        f"TBLPROPERTIES ('delta.feature.{feature}' = 'supported')"
    ).collect()
    return str(path)


def catalog_managed(spark: Any, path: Path) -> str:
    """A log declaring catalogManaged with the features Delta 4.4's ``TableFeature`` says it requires."""
    features = _with_required(spark, "catalogManaged")
    return craft_table(
        path,
        reader=3,
        writer=7,
        reader_features=sorted(name for name, reader_writer in features.items() if reader_writer),
        writer_features=sorted(features),
        fields=[*FIELDS, {"name": "region", "type": "string", "nullable": True, "metadata": {}}],
    )


def _with_required(spark: Any, name: str) -> dict[str, bool]:
    """Delta's feature ``name`` and every feature it requires, each with whether it is a reader-writer one."""
    jvm = spark.sparkContext._jvm
    found: dict[str, bool] = {}
    pending = [jvm.org.apache.spark.sql.delta.TableFeature.featureNameToFeature(name).get()]
    while pending:
        feature = pending.pop()
        found[feature.name()] = feature.isReaderWriterFeature()
        required = feature.requiredFeatures().iterator()
        while required.hasNext():
            pending.append(required.next())
    return found


def table(spark: Any, tmp_path: Path, kind: str) -> str:
    if kind == "catalogManaged":
        return catalog_managed(spark, tmp_path / "t")
    return delta_made(spark, tmp_path / "t", kind, rows=kind in GEOSPATIAL)


# What the log's protocol makes the engine refuse (and auto send to Delta's runtime), per table.
REFUSED = {
    "geospatial": ("geospatial",),
    "geospatial-dev": ("geospatial-dev",),
    # Delta adds catalogManaged with the preview (and deletion vectors, row tracking, column mapping, which
    # the engine honours)
    "adaptiveMetadata-preview": ("adaptiveMetadata-preview", "catalogManaged"),
    "catalogManaged": ("catalogManaged",),
}


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_the_engine_refuses_in_delta_s_words_naming_the_feature_and_the_way_out(spark, tmp_path, kind):
    target = table(spark, tmp_path, kind)
    before = version_and_files(target)
    with pytest.raises(UnsupportedFeaturesError) as raised:
        run_merge(spark, parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source(tmp_path))))
    error = raised.value
    assert error.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    assert str(error).startswith(
        "[DELTA_UNSUPPORTED_FEATURES_FOR_WRITE] " + FIRST_SENTENCE.format(table=target)
    )
    assert error.features == REFUSED[kind]
    for n, feature in enumerate(REFUSED[kind], start=1):
        assert f"  {n}. {feature}: " in str(error)
    assert 'backend="delta-spark"' in str(error)
    assert version_and_files(target) == before


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_the_protocol_comes_from_the_log_and_auto_sends_the_table_to_delta_s_runtime(spark, tmp_path, kind):
    target = table(spark, tmp_path, kind)
    protocol = read_protocol(target)
    assert kind in protocol.reader_features and kind in protocol.writer_features
    assert backend.needing_delta_runtime(target) == REFUSED[kind]
    spec = MergeSpec(target, PathSource(source(tmp_path), "parquet"), "t.id = s.id", (insert_all(),))
    assert backend.choose_backend(spark, spec, "auto") == "delta-spark"
    # Without Delta's runtime in the session, auto leaves the merge to the engine, which refuses it (above).
    without: Any = DeltaConfiguredSession({}, jvm=True)
    assert backend.choose_backend(without, spec, "auto") == "engine"


def test_the_protocol_is_read_from_a_checkpoint_too(spark, tmp_path):
    target = delta_made(spark, tmp_path / "t", "geospatial")
    spark.sql(f"ALTER TABLE delta.`{target}` SET TBLPROPERTIES ('delta.appendOnly' = 'false')").collect()
    log = spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, target)
    log.checkpoint()
    version = LogReader(target).latest_version()
    assert LogReader(target).last_checkpoint()["version"] == version  # nothing after it: read from it alone
    protocol = read_protocol(target)
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    assert "geospatial" in protocol.reader_features and "appendOnly" in protocol.writer_features
    assert read_table_schema(target)["fields"][0]["name"] == "id"


@pytest.mark.parametrize("feature", GEOSPATIAL)
@pytest.mark.parametrize("statement", ["classic", "insert_only"])
def test_auto_merges_on_delta_s_runtime_as_delta_s_own_merge(spark, tmp_path, feature, statement):
    target = delta_made(spark, tmp_path / "t", feature)
    text = (
        PLAIN_UPSERT
        if statement == "classic"
        else PLAIN_UPSERT.split(" WHEN MATCHED")[0] + " WHEN NOT MATCHED THEN INSERT *"
    )
    src = source(tmp_path)
    theirs = copy_of(target, "theirs")
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{target}`").first()
    spec = parse_merge_sql(text.format(target=target, source=src))
    assert backend.choose_backend(spark, spec, "auto") == "delta-spark"
    result = backend.run_with_delta_spark(spark, spec)
    delta_merge(spark, text, theirs, src)
    assert delta_rows(spark, target) == delta_rows(spark, theirs)
    expected = last_history(spark, theirs)["operationMetrics"]
    assert {k: result.metrics[k] for k in CHANGES} == {k: int(expected[k]) for k in CHANGES}
    assert result.committed and result.version == 1
    # The snapshot Delta read, sized from the log (deltalake cannot open the table) as Delta sizes it
    assert (
        result.metrics[m.NUM_TARGET_FILES_BEFORE_SKIPPING],
        result.metrics[m.NUM_TARGET_BYTES_BEFORE_SKIPPING],
    ) == (detail["numFiles"], detail["sizeInBytes"])


def test_delta_s_runtime_refuses_a_catalog_managed_table_by_path_in_its_own_words(spark, tmp_path):
    target = delta_made(spark, tmp_path / "t", "adaptiveMetadata-preview", rows=False)
    before = version_and_files(target)
    spec = parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source(tmp_path)))
    with pytest.raises(DeltaMergeError) as raised:
        backend.run_with_delta_spark(spark, spec)
    assert raised.value.error_class == "DELTA_PATH_BASED_ACCESS_TO_CATALOG_MANAGED_TABLE_BLOCKED"
    # Delta refuses at its commit: the log is as it was, but the data files its merge wrote are left behind
    # (unreferenced), which the engine's refusal, made before any work, never leaves.
    version, files = version_and_files(target)
    assert (version, [f for f in files if "/_delta_log/" in f]) == (before[0], before[1])


@pytest.mark.parametrize("kind", ["geospatial", "catalogManaged"])
def test_pre_flight_refuses_for_the_engine_and_checks_columns_from_the_log_otherwise(spark, tmp_path, kind):
    target = table(spark, tmp_path, kind)
    spec = parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source(tmp_path)))
    with pytest.raises(UnsupportedFeaturesError, match=kind):
        run_preflight(spec, read_target_schema=lambda path: read_table_schema(path, refuse_unsupported=True))
    # auto and delta-spark: the log's schema, so a wrong column is still caught before any Spark job
    assert [f["name"] for f in read_table_schema(target)["fields"]] == COLUMNS
    run_preflight(spec, read_target_schema=read_table_schema)
    wrong = parse_merge_sql(
        f"MERGE INTO delta.`{target}` AS t USING parquet.`{source(tmp_path)}` AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.nope = s.qty"
    )
    with pytest.raises(ClauseResolutionError, match="nope"):
        run_preflight(wrong, read_target_schema=read_table_schema)


def test_a_delta_source_deltalake_cannot_read_is_refused_in_delta_s_words(spark, tmp_path):
    extract = delta_made(spark, tmp_path / "source", "geospatial")
    target = craft_table(tmp_path / "t")
    assert [f["name"] for f in read_path_schema(extract, "delta")["fields"]] == COLUMNS
    spec = MergeSpec(target, PathSource(extract, "delta"), "t.id = s.id", (update_all(), insert_all()))
    with pytest.raises(SourceError) as raised:
        run_merge(spark, spec)
    assert raised.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_READ"
    assert str(raised.value).startswith(
        f'[DELTA_UNSUPPORTED_FEATURES_FOR_READ] Unsupported Delta read feature: table "{extract}" requires '
        "reader table feature(s) that are unsupported by Delta Lake"
    )
    assert "geospatial" in str(raised.value)
    assert LogReader(target).latest_version() == 0
