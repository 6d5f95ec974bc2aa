"""Which Delta table features the engine honours and which it refuses (with what each requires and the way
out), and a table's protocol as its log holds it.

A table whose reader features ``deltalake`` cannot read fails to open (``delta/log/snapshot.py``); its
protocol then comes from the log itself (``read_protocol``) and the table is refused like one whose
features the engine does not write (``unsupported_features_error``), or sent to Delta's runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.newest_actions import newest_action
from airflow_provider_deltamerge.exceptions import UnsupportedFeaturesError

# Delta's texts (delta-error-classes.json) for a table with features a reader or writer does not support.
MESSAGES = {
    "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE": (
        'Unsupported Delta write feature: table "{table}" requires writer table feature(s) that are '
        'unsupported by Delta Lake "{version}": {features}.'
    ),
    "DELTA_UNSUPPORTED_FEATURES_FOR_READ": (
        'Unsupported Delta read feature: table "{table}" requires reader table feature(s) that are '
        'unsupported by Delta Lake "{version}": {features}.'
    ),
}

VARIANT_FEATURES = ("variantType", "variantType-preview")
VARIANT_SHREDDING_FEATURES = ("variantShredding", "variantShredding-preview")

# Who refuses, where Delta's message names its own version.
WRITER_NAME = f"airflow-provider-deltamerge {__version__}"

# Writer features the engine honours: it writes plain parquet files with stats, keeps appendOnly, checks
# invariants and CHECK constraints, writes in-commit timestamps (delta/commit/commit_actions.py), leaves
# domain metadata alone, checkpoints as Delta does (delta/commit/checkpoints.py) and reads deletion
# vectors.
HONOURED_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "timestampNtz",
        "domainMetadata",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "inCommitTimestamp",
        "allowColumnDefaults",  # columns an INSERT omits get their defaults (engine/resolve/resolution.py)
        "generatedColumns",  # computed where a clause leaves them, checked where it assigns them
        # VARIANT columns are read and written as Spark writes them (a group of value and metadata
        # binaries), never shredded unless the table enables shredding (delta/files/writer.py), with a
        # nullCount and no bounds (delta/format/stats.py). The preview names share the GA features' spec.
        *VARIANT_FEATURES,
        *VARIANT_SHREDDING_FEATURES,
        # Read: a file's deleted rows are left out (delta/files/reader.py). Written: with
        # delta.enableDeletionVectors=true a touched file keeps its unchanged rows under a new vector
        # (delta/commit/deletion_vector_writes.py); otherwise it is rewritten whole and its vector dropped
        # with it, which the protocol allows either way.
        "deletionVectors",
        # Values from the high-water mark where an INSERT leaves the column out (engine/identity.py).
        "identityColumns",
        # A rewrite writes change data files too (delta/files/change_data_feed.py,
        # engine/execute/change_rows.py).
        "changeDataFeed",
        # Files are read and written under physical names and field ids (delta/format/column_mapping.py).
        "columnMapping",
        # Liquid clustering: a merge writes its files unclustered, as Delta's MERGE does without
        # auto-clustering, and leaves the delta.clustering domain (the clustering columns) as it is; Delta's
        # OPTIMIZE clusters them later. Stats cover the clustering columns (the first indexed columns).
        "clustering",
        # Row tracking: added files get row ids above the high-water mark, copied and updated rows keep
        # theirs in the materialized columns (delta/log/row_tracking.py); refused below when the table's
        # properties do not name those columns.
        "rowTracking",
        # Type widening: Spark's parquet reader reads a file written before a widening at the column's
        # current type (delta/files/reader.py asks every file for the table's schema), old files' stats are
        # cast to it (engine/plan/pruning.py); with schema evolution and delta.enableTypeWidening=true a
        # merge widens a column as Delta's MERGE does and records delta.typeChanges
        # (engine/resolve/type_widening.py). Tables with a type change Delta does not allow are refused
        # (check_type_changes).
        "typeWidening",
        "typeWidening-preview",
        # Checkpoints only from the protected version on, and no log cleanup (delta/commit/checkpoints.py).
        "checkpointProtection",
    }
)
# Highest protocol versions whose implied features are understood (3/7 list their features by name).
MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7

_ON_DELTA = (
    'Run the merge on Delta\'s own runtime: backend="delta-spark" (backend="auto" chooses it where the '
    "session has Delta's runtime)"
)
_ICEBERG = (
    "UniForm's Iceberg compatibility: every commit must keep the table readable as Iceberg (partition values "
    "in the data files, no deletion vectors, INT64 timestamps, Iceberg's types) and, with "
    "delta.universalFormat.enabledFormats, Delta converts each commit to Iceberg metadata. " + _ON_DELTA
)
_GEOSPATIAL = "GEOMETRY and GEOGRAPHY columns are Delta's preview, not written by this engine. " + _ON_DELTA
_NOT_IN_DELTA_SPARK = (
    "Delta Lake 4.4's runtime does not support this feature either (only Delta Kernel based writers do), "
    "so no backend of this provider writes the table. Write it with such a writer, or drop the feature"
)
# What to do about each feature the engine knows and refuses, in Delta's terms. Every feature of Delta 4.4
# is either honoured (HONOURED_FEATURES) or listed here (docs/table-features.md has the same list).
REFUSED_FEATURES = {
    "rowTracking": (
        "the table's properties do not name the columns that keep preserved row ids and commit versions "
        "(delta.rowTracking.materializedRowIdColumnName, ...RowCommitVersionColumnName), or row tracking is "
        "enabled on a protocol without the feature. Run the merge on Delta's own runtime: "
        'backend="delta-spark"'
    ),
    "materializePartitionColumns": (
        "every new data file must hold the partition columns' values too, which this engine's writer leaves "
        "to the folders. " + _ON_DELTA
    ),
    "icebergCompatV1": _ICEBERG,
    "icebergCompatV2": _ICEBERG,
    "icebergCompatV3": _ICEBERG,
    "catalogManaged": (
        "commits go through the table's catalog, not to the log directly, which only Delta's runtime (with "
        "the catalog's client) does; name the table as the catalog knows it. " + _ON_DELTA
    ),
    "coordinatedCommits-preview": (
        "commits go through the table's commit coordinator, which only Delta's runtime (with that "
        "coordinator registered) does. " + _ON_DELTA
    ),
    "geospatial": _GEOSPATIAL,
    "geospatial-dev": _GEOSPATIAL,
    "adaptiveMetadata-preview": (
        "Delta's preview of Iceberg-style metadata trees (only with its preview conf on), not written by "
        "this engine. " + _ON_DELTA
    ),
    "collations": _NOT_IN_DELTA_SPARK,
    "collations-preview": _NOT_IN_DELTA_SPARK,
    "icebergWriterCompatV1": _NOT_IN_DELTA_SPARK,
    "icebergWriterCompatV3": _NOT_IN_DELTA_SPARK,
}
# Refused features Delta 4.4's runtime cannot write either: backend="auto" does not send such a table there.
NOT_WRITABLE_BY_DELTA_SPARK = frozenset(
    f for f, remedy in REFUSED_FEATURES.items() if remedy is _NOT_IN_DELTA_SPARK
)
_UNKNOWN_REMEDY = (
    "this engine does not know what the feature requires of a writer, so it will not write the table. Run "
    'the merge on Delta\'s own runtime: backend="delta-spark"'
)


@dataclass(frozen=True)
class Protocol:
    """The table's protocol action: minimum reader/writer versions and, from 3/7 on, named features."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] = ()
    writer_features: tuple[str, ...] = ()


def unsupported_features_error(table_uri: str, features: Sequence[str]) -> UnsupportedFeaturesError:
    """DELTA_UNSUPPORTED_FEATURES_FOR_WRITE for ``features``, each with what it requires and the way out."""
    steps = "\n".join(
        f"  {n}. {feature}: {REFUSED_FEATURES.get(feature, _UNKNOWN_REMEDY)}."
        for n, feature in enumerate(features, start=1)
    )
    return UnsupportedFeaturesError(
        unsupported_features_message(table_uri, features)
        + f"\nThe merge into {table_uri} was refused before reading any data:\n{steps}",
        features=tuple(features),
    )


def read_protocol(
    table_uri: str, version: int | None = None, *, storage_options: Mapping[str, str] | None = None
) -> Protocol:
    """The protocol in force at ``version`` (the newest by default), read from the log without ``deltalake``'s
    table open, which fails on reader features it does not know.

    Raises:
        TargetTableError: DELTA_TABLE_NOT_FOUND when there is no Delta log at ``table_uri``.
    """
    reader = LogReader(table_uri, storage_options)
    found = newest_action(reader, reader.latest_version() if version is None else version, "protocol") or {}
    return Protocol(
        int(found.get("minReaderVersion", 1)),
        int(found.get("minWriterVersion", 2)),
        tuple(found.get("readerFeatures") or ()),
        tuple(found.get("writerFeatures") or ()),
    )


def unreadable_features(protocol: Protocol) -> list[str]:
    """What the engine refuses of ``protocol`` when a reader feature is among it, else nothing: ``deltalake``,
    which reads the log and files for the engine, refuses to open a table with a reader feature the engine
    does not honour (1.6.6: catalogManaged, geospatial, geospatial-dev, adaptiveMetadata-preview, and any
    feature it does not know)."""
    if all(f in HONOURED_FEATURES for f in protocol.reader_features):
        return []
    return listed_refusals(protocol)


def listed_refusals(protocol: Protocol) -> list[str]:
    """A protocol above the versions the engine knows, then the features it lists and the engine does not
    honour, sorted."""
    found: list[str] = []
    if protocol.min_reader_version > MAX_READER_VERSION or protocol.min_writer_version > MAX_WRITER_VERSION:
        found.append(f"protocol {protocol.min_reader_version}/{protocol.min_writer_version}")
    listed = set(protocol.reader_features) | set(protocol.writer_features)
    return found + sorted(f for f in listed if f not in HONOURED_FEATURES)


def unsupported_features_message(table_uri: str, features: Sequence[str]) -> str:
    """Delta's first sentence for a table whose writer features this engine will not write."""
    return MESSAGES["DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"].format(
        table=table_uri, version=WRITER_NAME, features=", ".join(features)
    )
