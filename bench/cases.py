"""The benchmark's merges: Delta Lake's 16 merge benchmark cases plus backfill, full sync and evolution.

The 16 cases, their names and how their sources are drawn follow delta-io/delta's
``benchmarks/src/main/scala/benchmark/MergeTestCases.scala`` and ``MergeDataLoad.scala``: a fraction of
the target's files is chosen, matched source rows are a Bernoulli sample of those files' rows, and
not-matched rows are another sample of them given new keys. Sources are drawn here, once per scale,
with pyarrow (no Spark), and come with what the draw implies: the counts every merge must report, the
files holding changed rows (what the floor rewrites) and the rows to insert.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

from airflow_provider_deltamerge.spec import (
    MergeClause,
    MergeSpec,
    PathSource,
    delete,
    delete_by_source,
    insert_all,
    update_all,
)
from bench.store_sales import DATE_COLUMN, FIRST_DATE_SK, ITEMS_PER_TICKET, NUM_DAYS, SCHEMA, TargetTables

KEY_CONDITION = "t.ss_ticket_number = s.ss_ticket_number AND t.ss_item_sk = s.ss_item_sk"
TICKET = "ss_ticket_number"
NEW_COLUMN = "ss_promo_code"  # the schema-evolution case's extra source column
SourceKind = Literal["sample", "backfill", "full_sync"]


@dataclass(frozen=True)
class SourceShape:
    """How a source is drawn from the target (``MergeSourceTable`` in Delta's benchmark)."""

    file_matched_fraction: float
    row_matched_fraction: float
    row_not_matched_fraction: float
    kind: SourceKind = "sample"
    new_column: bool = False

    @property
    def name(self) -> str:
        extra = "_new_column" if self.new_column else ""
        return (
            f"{self.kind}_files_{self.file_matched_fraction}_matched_{self.row_matched_fraction}"
            f"_not_matched_{self.row_not_matched_fraction}{extra}"
        )


@dataclass(frozen=True)
class Case:
    """One merge of the benchmark: its name, target table, source shape and clauses."""

    name: str
    shape: SourceShape
    clauses: tuple[MergeClause, ...]
    condition: str = KEY_CONDITION
    partitioned_target: bool = False
    from_delta_benchmark: bool = True
    # The flat target with delta.enableDeletionVectors=true: the merge hides changed rows in vectors.
    deletion_vectors: bool = False

    def spec(self, target: str, source: str) -> MergeSpec:
        return MergeSpec(
            target=target,
            source=PathSource(source),
            condition=self.condition,
            clauses=self.clauses,
            schema_evolution=self.shape.new_column,
        )


def _fraction_names(**fractions: float) -> str:
    """Delta's naming: ``_fileMatchedFraction_0.05_rowNotMatchedFraction_0.5`` (Scala prints 1.0, 0.0)."""
    return "".join(f"_{name}_{value!r}" for name, value in fractions.items())


def insert_only(files: float, not_matched: float, *, multiple: bool) -> Case:
    clauses = (insert_all(condition="s.ss_item_sk % 2 = 0"), insert_all()) if multiple else (insert_all(),)
    prefix = "multiple_insert_only" if multiple else "single_insert_only"
    return Case(
        prefix + _fraction_names(fileMatchedFraction=files, rowNotMatchedFraction=not_matched),
        SourceShape(files, 0.0, not_matched),
        clauses,
    )


def delete_only(files: float, matched: float) -> Case:
    return Case(
        "delete_only" + _fraction_names(fileMatchedFraction=files, rowMatchedFraction=matched),
        SourceShape(files, matched, 0.0),
        (delete(),),
    )


def upsert(files: float, matched: float, not_matched: float) -> Case:
    names = _fraction_names(
        fileMatchedFraction=files, rowMatchedFraction=matched, rowNotMatchedFraction=not_matched
    )
    return Case("upsert" + names, SourceShape(files, matched, not_matched), (update_all(), insert_all()))


DELTA_CASES: tuple[Case, ...] = (
    *(insert_only(0.05, n, multiple=False) for n in (0.05, 0.5, 1.0)),
    *(insert_only(0.05, n, multiple=True) for n in (0.05, 0.5, 1.0)),
    delete_only(0.05, 0.05),
    upsert(0.05, 0.1, 0.01),
    upsert(0.05, 0.0, 0.1),
    upsert(0.05, 0.01, 0.1),
    upsert(0.05, 0.1, 0.0),
    upsert(0.5, 0.01, 0.001),
    upsert(1.0, 0.01, 0.001),
    upsert(0.05, 0.5, 0.001),
    upsert(0.05, 0.99, 0.001),
    upsert(0.05, 1.0, 0.001),
)
EXTRA_CASES: tuple[Case, ...] = (
    # One day's extract into a 100-day table; only the ON condition ties it to its day (no literal).
    Case(
        "backfill_one_day_of_100",
        SourceShape(1.0, 0.1, 0.01, kind="backfill"),
        (update_all(), insert_all()),
        condition=f"{KEY_CONDITION} AND t.{DATE_COLUMN} = s.{DATE_COLUMN}",
        partitioned_target=True,
        from_delta_benchmark=False,
    ),
    # The whole upstream table: 5% of the files lost 5% of their rows and had 5% changed; 0.1% new rows.
    Case(
        "full_sync_not_matched_by_source_delete",
        SourceShape(0.05, 0.05, 0.001, kind="full_sync"),
        (update_all(condition="s.ss_quantity <> t.ss_quantity"), insert_all(), delete_by_source()),
        from_delta_benchmark=False,
    ),
    Case(
        "upsert_schema_evolution_new_column",
        SourceShape(0.05, 0.1, 0.01, new_column=True),
        (update_all(), insert_all()),
        from_delta_benchmark=False,
    ),
)


def with_deletion_vectors(case: Case) -> Case:
    """``case`` on the table that writes deletion vectors (its floor writes only the changed rows)."""
    return dataclasses.replace(
        case, name=f"{case.name}_deletionVectors", deletion_vectors=True, from_delta_benchmark=False
    )


# Upserts that change few rows of many files, or many rows of few: where vectors save the copying.
DELETION_VECTOR_CASES: tuple[Case, ...] = tuple(
    with_deletion_vectors(upsert(*fractions))
    for fractions in ((0.05, 0.1, 0.01), (0.5, 0.01, 0.001), (1.0, 0.01, 0.001), (0.05, 0.5, 0.001))
)
CASES: tuple[Case, ...] = DELTA_CASES + EXTRA_CASES + DELETION_VECTOR_CASES


def select_cases(names: Sequence[str] | None) -> tuple[Case, ...]:
    """The cases named (all when ``names`` is empty), in the benchmark's order.

    Raises:
        ValueError: naming the unknown cases and listing the known ones.
    """
    if not names:
        return CASES
    unknown = sorted(set(names) - {c.name for c in CASES})
    if unknown:
        raise ValueError(f"Unknown cases {unknown}; known: {[c.name for c in CASES]}")
    return tuple(c for c in CASES if c.name in names)


@dataclass(frozen=True)
class Counts:
    """What a merge did: rows inserted, updated and deleted, and the table's row count after it."""

    inserted: int
    updated: int
    deleted: int
    rows_after: int


@dataclass(frozen=True)
class CaseData:
    """A case's drawn source and what the draw implies.

    ``touched_files`` (log paths) hold every target row the merge changes: the files the floor rewrites.
    ``needed_bytes`` is their size, or for the backfill the size of the one partition the merge needs.
    ``inserts`` holds the rows the merge inserts (None when it inserts nothing).
    """

    source: str
    inserts: str | None
    touched_files: tuple[str, ...]
    touched_bytes: int
    needed_bytes: int
    expected: Counts


@dataclass
class _Draw:
    """Rows drawn so far: counts of matched rows a clause acts on, target rows absent from the source."""

    acted_on: int = 0
    vanished: int = 0
    inserted: int = 0


def prepare_source(case: Case, tables: TargetTables, folder: Path) -> CaseData:
    """Draw ``case``'s source from its target into ``folder`` (deterministic: same rows on every call)."""
    table_path = tables.by_date if case.partitioned_target else tables.flat
    adds = pa.table(DeltaTable(table_path).get_add_actions(flatten=True)).to_pydict()
    files = dict(zip(adds["path"], adds["size_bytes"], strict=True))
    total_rows = sum(adds["num_records"])
    rng = np.random.default_rng(zlib.crc32(case.shape.name.encode()))
    next_ticket = total_rows // ITEMS_PER_TICKET + 2
    folder.mkdir(parents=True, exist_ok=True)
    source, inserts = folder / "source.parquet", folder / "inserts.parquet"
    schema = _source_schema(case.shape)
    draw, touched = _Draw(), []
    with pq.ParquetWriter(source, schema) as source_out, pq.ParquetWriter(inserts, schema) as inserts_out:
        for path, target_rows, chosen in _rows_to_draw_from(case, table_path, adds):
            kept, changes_file, new = _draw(case.shape, target_rows, rng, draw, chosen=chosen)
            if changes_file:
                touched.append(path)
            if len(new):
                tickets = pa.array(np.arange(next_ticket, next_ticket + len(new), dtype=np.int32))
                next_ticket += len(new)
                new = new.set_column(
                    new.schema.get_field_index("ss_ticket_number"), "ss_ticket_number", tickets
                )
            for rows, out in ((kept, source_out), (new, source_out), (new, inserts_out)):
                if len(rows):
                    out.write_table(_as_source(rows, schema))
    kinds = {c.kind for c in case.clauses}
    inserted = draw.inserted if "not_matched_insert" in kinds else 0
    deleted = (draw.acted_on if "matched_delete" in kinds else 0) + (
        draw.vanished if "not_matched_by_source_delete" in kinds else 0
    )
    expected = Counts(
        inserted=inserted,
        updated=draw.acted_on if "matched_update" in kinds else 0,
        deleted=deleted,
        rows_after=total_rows + inserted - deleted,
    )
    touched_bytes = sum(files[p] for p in touched)
    backfill = case.shape.kind == "backfill"
    return CaseData(
        source=str(source),
        inserts=str(inserts) if inserted else None,
        touched_files=tuple(touched),
        touched_bytes=touched_bytes,
        needed_bytes=sum(files[p] for p in _day_files(adds)) if backfill else touched_bytes,
        expected=expected,
    )


BACKFILL_DAY = FIRST_DATE_SK + NUM_DAYS // 2


def _day_files(adds: dict[str, list[object]]) -> list[str]:
    days = adds[f"partition.{DATE_COLUMN}"]
    return [str(p) for p, day in zip(adds["path"], days, strict=True) if day == BACKFILL_DAY]


def _source_schema(shape: SourceShape) -> pa.Schema:
    return SCHEMA.append(pa.field(NEW_COLUMN, pa.string())) if shape.new_column else SCHEMA


def _as_source(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    rows = rows.select([name for name in SCHEMA.names])
    if NEW_COLUMN in schema.names:
        codes = pc.binary_join_element_wise("P", pc.cast(rows.column("ss_promo_sk"), pa.string()), "")
        rows = rows.append_column(NEW_COLUMN, codes)
    return rows.cast(schema)


def _rows_to_draw_from(
    case: Case, table_path: str, adds: dict[str, list[object]]
) -> Iterator[tuple[str, pa.Table, bool]]:
    """(file, its rows, whether it is chosen) for the files the source is drawn from, in a fixed order.

    Delta's benchmark picks files by a hash of their path; a fixed count (at least one) keeps small
    scales from drawing no file at all. The full sync reads every file; only chosen ones change.
    """
    if case.shape.kind == "backfill":
        for path in _day_files(adds):
            rows = pq.read_table(f"{table_path}/{path}")
            yield (
                path,
                rows.append_column(DATE_COLUMN, pa.array([BACKFILL_DAY] * len(rows), pa.int32())),
                True,
            )
        return
    ordered = sorted((str(p) for p in adds["path"]), key=lambda p: zlib.crc32(p.encode()))
    chosen = max(1, round(case.shape.file_matched_fraction * len(ordered)))
    for index, path in enumerate(ordered if case.shape.kind == "full_sync" else ordered[:chosen]):
        yield path, pq.read_table(f"{table_path}/{path}"), index < chosen


def _draw(
    shape: SourceShape, rows: pa.Table, rng: np.random.Generator, draw: _Draw, *, chosen: bool
) -> tuple[pa.Table, bool, pa.Table]:
    """Split one file's rows into (source rows with existing keys, whether the merge changes the file,
    rows to add with new keys), counting into ``draw``.

    A sampled source keeps its matched rows unchanged, as Delta's benchmark does. The full sync keeps all
    rows but the vanished ones, with a changed ``ss_quantity`` in the rows its UPDATE acts on.
    """
    n = len(rows)
    new = rows.filter(pa.array(rng.random(n) < shape.row_not_matched_fraction))
    draw.inserted += len(new)
    if shape.kind != "full_sync":
        matched = rows.filter(pa.array(rng.random(n) < shape.row_matched_fraction))
        draw.acted_on += len(matched)
        return matched, len(matched) > 0, new
    if not chosen:
        return rows, False, new
    u = rng.random(n)
    vanished, changed = u < shape.row_matched_fraction, u >= 1 - shape.row_matched_fraction
    draw.vanished += int(vanished.sum())
    draw.acted_on += int(changed.sum())
    quantity = rows.column("ss_quantity").to_numpy()
    bumped = pa.array(np.where(changed, quantity % 100 + 1, quantity).astype(np.int32))
    kept = rows.set_column(rows.schema.get_field_index("ss_quantity"), "ss_quantity", bumped)
    return kept.filter(pa.array(~vanished)), bool(vanished.any() or changed.any()), new
