"""Identity columns (PROTOCOL.md "Identity Columns"; Delta's ``IdentityColumn`` and
``GenerateIdentityValues``): an INSERT that leaves such a column out gets a new value from the column's
high-water mark, and the commit records the new mark in the column's metadata.

Values are ``base + step * n`` with ``base`` one step past the high-water mark (the start when there is
none) and ``n`` Spark's ``monotonically_increasing_id()``: the row's index in its task, above the task's
partition index in the upper bits. So values are unique across a write, on the column's grid, and beyond the
mark, as the protocol asks; like Delta's they are not contiguous (Delta interleaves the tasks, this leaves a
gap of 2^33 steps between them). An overflow fails the merge, as in Delta.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from airflow_provider_deltamerge.delta.commit.added_files import WrittenFile
from airflow_provider_deltamerge.delta.files.physical_schema import physical_name
from airflow_provider_deltamerge.delta.files.reader import file_location
from airflow_provider_deltamerge.delta.log.protocol import (
    IDENTITY_ALLOW_EXPLICIT_INSERT_KEY,
    IDENTITY_HIGH_WATER_MARK_KEY,
    IDENTITY_START_KEY,
    IDENTITY_STEP_KEY,
)
from airflow_provider_deltamerge.delta.log.snapshot import Snapshot
from airflow_provider_deltamerge.spec.names import hidden_name, quote_part


@dataclass(frozen=True)
class Identity:
    """One identity column's definition and high-water mark."""

    column: str
    stored: str  # the name the files and stats use (the physical name under column mapping)
    start: int
    step: int
    high_water_mark: int | None
    allow_explicit_insert: bool

    @property
    def base(self) -> int:
        """The first value a write may generate."""
        return self.start if self.high_water_mark is None else self.high_water_mark + self.step


def value_column(column: str) -> str:
    """The hidden column that carries each row's generated value of ``column`` into the output projection."""
    return hidden_name(f"identity_{column}")


def identities(schema: StructType) -> dict[str, Identity]:
    """The identity columns of ``schema`` (top-level only: Delta allows no nested ones), by name."""
    found = {}
    for field in schema.fields:
        metadata = field.metadata
        if IDENTITY_START_KEY in metadata and IDENTITY_STEP_KEY in metadata:
            mark = metadata.get(IDENTITY_HIGH_WATER_MARK_KEY)
            found[field.name] = Identity(
                column=field.name,
                stored=physical_name(field),
                start=int(metadata[IDENTITY_START_KEY]),
                step=int(metadata[IDENTITY_STEP_KEY]),
                high_water_mark=None if mark is None else int(mark),
                allow_explicit_insert=bool(metadata.get(IDENTITY_ALLOW_EXPLICIT_INSERT_KEY, False)),
            )
    return found


def generated_values(identity: Identity) -> Column:
    """Each row's new value; one evaluation per row (``coalesce`` reads the value once), failing with
    Delta's overflow when it leaves the LONG range."""
    raw = F.try_add(
        F.lit(identity.base), F.try_multiply(F.lit(identity.step), F.monotonically_increasing_id())
    )
    overflow = F.raise_error(
        F.lit(f"[ARITHMETIC_OVERFLOW] long overflow: IDENTITY column {identity.column} ran out of values.")
    )
    return F.coalesce(raw, overflow.cast("long"))


def high_water_marks(
    spark: SparkSession, snapshot: Snapshot, added: Sequence[WrittenFile], generated: Sequence[Identity]
) -> dict[str, int]:
    """The new high-water mark of each column in ``generated`` from the files the merge wrote, as Delta's
    identity stats tracker takes it (the max, or min for a negative step, of every written value, rounded
    up to the column's grid, never behind the old mark or before the start); columns whose mark stays are
    left out.

    The written files' own stats give the extremes when the column is indexed (it usually is: a key comes
    first); only otherwise does one Spark job read the column back from the new files.
    """
    if not added or not generated:
        return {}
    extremes = {i.column: _extreme_in_stats(i, added) for i in generated}
    unindexed = [i for i in generated if extremes[i.column] is _UNINDEXED]
    if unindexed:
        extremes |= _extremes_read_back(spark, snapshot, added, unindexed)
    marks = {}
    for identity in generated:
        candidate = extremes[identity.column]
        mark = None if candidate is None else _valid_mark(identity, int(candidate))
        if mark is not None:
            marks[identity.column] = mark
    return marks


_UNINDEXED = object()  # the column has no stats in some written file


def _extreme_in_stats(identity: Identity, added: Sequence[WrittenFile]) -> Any:
    """The written values' max (min for a negative step) from the files' stats: None when every value is
    NULL, ``_UNINDEXED`` when a file has no stats for the column."""
    bound = "maxValues" if identity.step > 0 else "minValues"
    found = []
    for file in added:
        stats = json.loads(file.stats)
        if identity.stored in stats.get(bound, {}):
            found.append(int(stats[bound][identity.stored]))
        elif stats.get("nullCount", {}).get(identity.stored) != stats.get("numRecords"):
            return _UNINDEXED
    if not found:
        return None
    return max(found) if identity.step > 0 else min(found)


def _extremes_read_back(
    spark: SparkSession, snapshot: Snapshot, added: Sequence[WrittenFile], identities: Sequence[Identity]
) -> dict[str, int | None]:
    """The written values' extremes of ``identities``, read back from the new files in one Spark job."""
    rows = spark.read.parquet(*[file_location(snapshot, f) for f in added])
    aggregates = [
        (F.max if i.step > 0 else F.min)(F.col(quote_part(i.stored))).alias(str(n))
        for n, i in enumerate(identities)
    ]
    found = rows.agg(*aggregates).first()
    return {i.column: None if found is None else found[str(n)] for n, i in enumerate(identities)}


def with_high_water_marks(schema: StructType, marks: Mapping[str, int]) -> StructType:
    """``schema`` with the given columns' high-water marks in their metadata."""
    return StructType(
        [
            StructField(
                f.name, f.dataType, f.nullable, {**f.metadata, IDENTITY_HIGH_WATER_MARK_KEY: marks[f.name]}
            )
            if f.name in marks
            else f
            for f in schema.fields
        ]
    )


def _valid_mark(identity: Identity, candidate: int) -> int | None:
    """Delta's ``updateToValidHighWaterMark``: the candidate rounded to the next value on the grid, kept
    only if it is not before the start and moves the mark forward."""
    forward = 1 if identity.step > 0 else -1
    if (candidate - identity.start) * forward < 0:
        return None  # before the start: an explicitly inserted value the generator will never reach
    offset = candidate - identity.start
    steps, remainder = divmod(offset, identity.step)
    rounded = candidate if remainder == 0 else identity.start + identity.step * (steps + 1)
    old = identity.high_water_mark
    if old is not None and (rounded - old) * forward <= 0:
        return None
    return rounded
