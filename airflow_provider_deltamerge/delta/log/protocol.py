"""What a merge may do to a table: protocol features the engine honours, appendOnly, and constraints.

Checked before any work is done (``check_writable``), so a table the engine cannot write correctly is
refused with the feature named and the way out, never silently mis-read or mis-written. Constraints are
Delta's NOT NULL columns, CHECK constraints (``delta.constraints.*``) and legacy column invariants
(``delta.invariants`` field metadata); ``constraint_checks`` turns them into Spark expressions the writer
evaluates on every written row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltamerge import __version__
from airflow_provider_deltamerge.delta.log.row_tracking import FEATURE as ROW_TRACKING
from airflow_provider_deltamerge.delta.log.row_tracking import materialized_columns
from airflow_provider_deltamerge.delta.log.snapshot import Snapshot
from airflow_provider_deltamerge.exceptions import TargetTableError

APPEND_ONLY_KEY = "delta.appendOnly"
GENERATION_EXPRESSION_KEY = "delta.generationExpression"
# Identity columns' field metadata (PROTOCOL.md "Identity Columns").
IDENTITY_START_KEY = "delta.identity.start"
IDENTITY_STEP_KEY = "delta.identity.step"
IDENTITY_HIGH_WATER_MARK_KEY = "delta.identity.highWaterMark"
IDENTITY_ALLOW_EXPLICIT_INSERT_KEY = "delta.identity.allowExplicitInsert"
CONSTRAINT_PREFIX = "delta.constraints."
INVARIANTS_KEY = "delta.invariants"

# Delta's texts (delta-error-classes.json) for the storage-side errors.
MESSAGES = {
    "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE": (
        'Unsupported Delta write feature: table "{table}" requires writer table feature(s) that are '
        'unsupported by Delta Lake "{version}": {features}.'
    ),
    "DELTA_CANNOT_MODIFY_APPEND_ONLY": (
        "This table is configured to only allow appends. If you would like to permit updates or deletes, use "
        "'ALTER TABLE {table} SET TBLPROPERTIES ({config}=false)'."
    ),
    "DELTA_NOT_NULL_CONSTRAINT_VIOLATED": "NOT NULL constraint violated for column: {column}.",
    "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES": (
        "CHECK constraint {name} {expression} violated by row with values:\n{values}"
    ),
}

VARIANT_FEATURES = ("variantType", "variantType-preview")
VARIANT_SHREDDING_FEATURES = ("variantShredding", "variantShredding-preview")
# The table property that lets writers shred VARIANT columns (with a variantShredding feature).
VARIANT_SHREDDING_KEY = "delta.enableVariantShredding"

# Who refuses, where Delta's message names its own version.
WRITER_NAME = f"airflow-provider-deltamerge {__version__}"

# Writer features the engine honours: it writes plain parquet files with stats, keeps appendOnly, checks
# invariants and CHECK constraints, writes in-commit timestamps (delta/commit/commit_actions.py), leaves
# domain metadata alone, checkpoints classic tables only (delta/commit/checkpoints.py) and reads deletion
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
    'Run the merge on Delta\'s own runtime (the delta-spark backend; backend="auto" does where the session '
    "has it)"
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
        "enabled on a protocol without the feature. Run the merge on Delta's own runtime (the delta-spark "
        "backend)"
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
    "the merge on Delta's own runtime (the delta-spark backend)"
)


@dataclass(frozen=True)
class ConstraintCheck:
    """One row-level rule the written rows must satisfy, as Spark SQL, with Delta's error for a violation."""

    error_class: str
    name: str  # the constraint's name, or the column of a NOT NULL / invariant
    expression: str  # Spark SQL over the table's columns, true for a valid row


def refused_features(snapshot: Snapshot) -> list[str]:
    """The table features in use that the engine would not honour, by Delta's names, in a stable order."""
    protocol = snapshot.protocol
    found: list[str] = []
    if protocol.min_reader_version > MAX_READER_VERSION or protocol.min_writer_version > MAX_WRITER_VERSION:
        found.append(f"protocol {protocol.min_reader_version}/{protocol.min_writer_version}")
    listed = set(protocol.reader_features) | set(protocol.writer_features)
    found += sorted(f for f in listed if f not in HONOURED_FEATURES)
    # Legacy protocols (writer < 7) imply features; they matter only when the table actually uses them.
    # Row tracking is written only where the table names its materialized columns.
    tracked = ROW_TRACKING in protocol.writer_features
    implied = {
        ROW_TRACKING: (tracked and materialized_columns(dict(snapshot.configuration)) is None)
        or (not tracked and _is_true(snapshot.setting("delta.enableRowTracking"))),
    }
    found += [name for name, used in implied.items() if used and name not in found]
    return found


def shreds_variants(snapshot: Snapshot) -> bool:
    """Writers may shred VARIANT columns: the table supports a variantShredding feature and enables it
    (PROTOCOL.md "Variant Shredding"); otherwise files must hold them unshredded."""
    features = snapshot.protocol.writer_features
    return any(f in features for f in VARIANT_SHREDDING_FEATURES) and _is_true(
        snapshot.setting(VARIANT_SHREDDING_KEY)
    )


def check_writable(snapshot: Snapshot, *, modifies_rows: bool) -> None:
    """Refuse, before any work, a merge the engine cannot do correctly on this table.

    Args:
        snapshot: the target as read.
        modifies_rows: the merge has an UPDATE or DELETE clause (it may remove files).

    Raises:
        TargetTableError: DELTA_UNSUPPORTED_FEATURES_FOR_WRITE naming each refused feature and what to do,
            or DELTA_CANNOT_MODIFY_APPEND_ONLY for an update or delete on an append-only table.
    """
    refused = refused_features(snapshot)
    if refused:
        steps = "\n".join(
            f"  {n}. {feature}: {REFUSED_FEATURES.get(feature, _UNKNOWN_REMEDY)}."
            for n, feature in enumerate(refused, start=1)
        )
        raise TargetTableError(
            unsupported_features_message(snapshot.table_uri, refused)
            + f"\nThe merge into {snapshot.table_uri} was refused before reading any data:\n{steps}",
            error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE",
        )
    if modifies_rows and _is_true(snapshot.setting(APPEND_ONLY_KEY)):
        raise TargetTableError(
            MESSAGES["DELTA_CANNOT_MODIFY_APPEND_ONLY"].format(
                table=f"delta.`{snapshot.table_uri}`", config=APPEND_ONLY_KEY
            )
            + " This merge has UPDATE or DELETE clauses; an insert-only merge (only WHEN NOT MATCHED) is "
            "allowed.",
            error_class="DELTA_CANNOT_MODIFY_APPEND_ONLY",
        )


def unsupported_features_message(table_uri: str, features: Sequence[str]) -> str:
    """Delta's first sentence for a table whose writer features this engine will not write."""
    return MESSAGES["DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"].format(
        table=table_uri, version=WRITER_NAME, features=", ".join(features)
    )


def constraint_checks(snapshot: Snapshot) -> list[ConstraintCheck]:
    """Every row-level rule of the table: NOT NULL columns (nested ones only under a non-null parent),
    legacy column invariants, then CHECK constraints by name."""
    checks = [
        ConstraintCheck("DELTA_NOT_NULL_CONSTRAINT_VIOLATED", path, condition)
        for path, condition in _not_null_paths(snapshot.schema["fields"], prefix=(), guard=None)
    ]
    for field in _fields(snapshot.schema):
        raw = field["metadata"].get(INVARIANTS_KEY)
        if raw:
            expression = json.loads(raw)["expression"]["expression"]
            checks.append(ConstraintCheck("DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", field["name"], expression))
    checks += [
        ConstraintCheck("DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", key[len(CONSTRAINT_PREFIX) :], expression)
        for key, expression in snapshot.configuration
        if key.startswith(CONSTRAINT_PREFIX) and expression
    ]
    # Delta checks a generated column as the constraint (column <=> expression) named "Generated Column".
    checks += [
        ConstraintCheck(
            "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES",
            "Generated Column",
            f"(`{field['name'].replace('`', '``')}` <=> ({field['metadata'][GENERATION_EXPRESSION_KEY]}))",
        )
        for field in snapshot.schema["fields"]
        if GENERATION_EXPRESSION_KEY in field["metadata"]
    ]
    return checks


def violation_message(check: ConstraintCheck, values: str) -> str:
    """Delta's message for a row that broke ``check``; ``values`` shows the row's columns."""
    if check.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED":
        return MESSAGES[check.error_class].format(column=check.name)
    return MESSAGES[check.error_class].format(name=check.name, expression=check.expression, values=values)


def _not_null_paths(
    fields: Sequence[Mapping[str, Any]], *, prefix: tuple[str, ...], guard: str | None
) -> Iterator[tuple[str, str]]:
    """(dotted column, condition) per non-nullable field; a nested field is checked only where its parent
    struct is present, as Delta does."""
    for field in fields:
        path = (*prefix, field["name"])
        sql = ".".join("`" + p.replace("`", "``") + "`" for p in path)
        if not field.get("nullable", True):
            present = f"{sql} IS NOT NULL"
            yield ".".join(path), present if guard is None else f"({guard}) IS NOT TRUE OR {present}"
        data_type = field["type"]
        if isinstance(data_type, dict) and data_type.get("type") == "struct":
            inner_guard = f"{sql} IS NOT NULL" if guard is None else f"({guard}) AND {sql} IS NOT NULL"
            yield from _not_null_paths(data_type["fields"], prefix=path, guard=inner_guard)


def _fields(schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{**f, "metadata": f.get("metadata") or {}} for f in schema["fields"]]


def _is_true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"
