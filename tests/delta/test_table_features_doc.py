"""docs/table-features.md lists every table feature of Delta Lake 4.4, each with what the engine does, and
the engine knows exactly those (issue 39, item 5).

The doc's table against ``delta/log/table_features.py`` (honoured natively, or refused with a reason) and
against the features Delta's own runtime reports (``TableFeature.allSupportedFeaturesMap``, read through the
JVM of the tests' session, which has Delta 4.4).
"""

from __future__ import annotations

import re
from pathlib import Path

from airflow_provider_deltamerge.delta.log.table_features import (
    HONOURED_FEATURES,
    NOT_WRITABLE_BY_DELTA_SPARK,
    REFUSED_FEATURES,
)

DOC = Path(__file__).parents[2] / "docs" / "table-features.md"
ROW = re.compile(r"^\| `([^`]+)` \| [a-z+]+ \| ([^|]+) \|")
# Features whose line another change owns: listed, and still refused until that change lands.
BOTH_WAYS = {"rowTracking"}  # native where the table names its materialized columns, else Delta's runtime


def doc_rows() -> dict[str, str]:
    """Feature name -> what the engine does, from the doc's table."""
    rows = {}
    for line in DOC.read_text().splitlines():
        found = ROW.match(line)
        if found:
            rows[found.group(1)] = found.group(2).strip()
    return rows


def test_the_doc_lists_exactly_the_features_the_engine_knows_with_what_it_does():
    rows = doc_rows()
    assert set(rows) == set(HONOURED_FEATURES) | set(REFUSED_FEATURES)
    for feature, does in rows.items():
        if feature in BOTH_WAYS:
            assert feature in HONOURED_FEATURES and feature in REFUSED_FEATURES
        elif does.startswith("native"):
            assert feature in HONOURED_FEATURES and feature not in REFUSED_FEATURES, feature
        elif does.startswith("Delta's runtime"):
            assert feature in set(REFUSED_FEATURES) - NOT_WRITABLE_BY_DELTA_SPARK, feature
        else:
            assert does.startswith("refused") and feature in NOT_WRITABLE_BY_DELTA_SPARK, feature


def test_the_doc_lists_every_feature_of_deltas_runtime(spark):
    jvm = spark.sparkContext._jvm
    features = jvm.org.apache.spark.sql.delta.TableFeature.allSupportedFeaturesMap().values().iterator()
    delta_features = set()
    while features.hasNext():
        delta_features.add(features.next().name())
    assert len(delta_features) >= 30
    rows = doc_rows()
    # Every one of Delta's; beyond them only the ones Delta's runtime cannot write (Delta Kernel's)
    assert delta_features <= set(rows)
    assert set(rows) - delta_features == NOT_WRITABLE_BY_DELTA_SPARK
