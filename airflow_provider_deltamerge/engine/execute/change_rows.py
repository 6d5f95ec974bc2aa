"""The change data feed's rows of a rewrite, next to its data rows (Delta's
``MergeOutputGeneration.generateCdcAndOutputRows``).

Each output row turns into an array of rows, exploded: an updated row into its pre-image, its post-image
and the data row; a deleted row into its pre-image as a ``delete``; an inserted row into an ``insert`` and
the data row; a copied row into the data row alone. Data rows have a NULL ``_change_type``, which is how
``writer.write_files`` tells them from change rows. The post-image and the data row are the same values,
computed once (identity values included).

When several source rows deleted one target row (Delta's multiple-match exemption for an unconditional
DELETE), each would give a ``delete``: Delta's ``DeduplicateCDFDeletes`` keeps one per target row, by its
file and row index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from airflow_provider_deltamerge.delta.files.change_data_feed import (
    CHANGE_TYPE_COLUMN,
    DELETE,
    INSERT,
    UPDATE_POSTIMAGE,
    UPDATE_PREIMAGE,
)
from airflow_provider_deltamerge.delta.files.reader import FILE_COLUMN, ROW_INDEX_COLUMN
from airflow_provider_deltamerge.engine.resolve.resolution import ResolvedClause, quote
from airflow_provider_deltamerge.spec.names import hidden_name

_PACKED = hidden_name("packed")
_SOURCE_ROW = hidden_name("source_row")


@dataclass(frozen=True)
class ChangeRows:
    """How a rewrite writes change data: whether duplicated deletes of one target row are collapsed."""

    deduplicate_deletes: bool

    def carried(self) -> list[str]:
        """The hidden columns the exploded rows need from the joined rows."""
        return [FILE_COLUMN, ROW_INDEX_COLUMN] if self.deduplicate_deletes else []


def preimage_column(position: int) -> str:
    """The hidden name of the target's value of the output column at ``position``."""
    return hidden_name(f"preimage_{position}")


def with_change_rows(
    written: DataFrame,
    columns: Sequence[str],
    clauses: Sequence[ResolvedClause],
    action: Column,
    how: ChangeRows,
) -> DataFrame:
    """The data and change rows of ``written``: the output ``columns``, each row's pre-image
    (``preimage_column``), ``action`` (the acting clause's position) and ``how.carried()``; deleted rows
    included, dropped ones not."""
    post = [F.col(quote(c)) for c in columns]
    pre = [F.col(preimage_column(i)) for i in range(len(columns))]

    def rows(values: Sequence[Column], change_type: str | None) -> Column:
        typed = F.lit(change_type).cast("string").alias(CHANGE_TYPE_COLUMN)
        return F.struct(*[v.alias(c) for v, c in zip(values, columns, strict=True)], typed)

    data = rows(post, None)
    kinds = (
        (
            [c.position for c in clauses if not c.is_delete and not c.is_insert],
            [rows(pre, UPDATE_PREIMAGE), rows(post, UPDATE_POSTIMAGE), data],
        ),
        ([c.position for c in clauses if c.is_delete], [rows(pre, DELETE)]),
        ([c.position for c in clauses if c.is_insert], [rows(post, INSERT), data]),
    )
    packed: Column | None = None
    for positions, produced in kinds:
        if positions:
            hit = action.isin(positions)
            packed = (
                F.when(hit, F.array(*produced)) if packed is None else packed.when(hit, F.array(*produced))
            )
    everything = F.array(data) if packed is None else packed.otherwise(F.array(data))
    carried = [F.col(c) for c in how.carried()]
    if how.deduplicate_deletes:
        # Unmatched source rows have no target row to be known by: each gets an id of its own.
        carried.append(
            F.when(F.col(FILE_COLUMN).isNull(), F.monotonically_increasing_id()).alias(_SOURCE_ROW)
        )
    exploded = written.select(F.explode(everything).alias(_PACKED), *carried)
    flat = exploded.select(f"{_PACKED}.*", *exploded.columns[1:])
    if not how.deduplicate_deletes:
        return flat
    keys = [FILE_COLUMN, ROW_INDEX_COLUMN, _SOURCE_ROW, CHANGE_TYPE_COLUMN]
    return flat.dropDuplicates(keys).drop(FILE_COLUMN, ROW_INDEX_COLUMN, _SOURCE_ROW)
