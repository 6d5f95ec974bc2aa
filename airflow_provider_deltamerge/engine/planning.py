"""Plan a merge: resolve it against the snapshot, choose the executor, choose the target files to read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pyspark.sql.types import StructType

from airflow_provider_deltamerge.delta.reader import table_schema
from airflow_provider_deltamerge.delta.snapshot import DataFile, Snapshot
from airflow_provider_deltamerge.engine.resolution import ResolvedClause, resolve_clauses
from airflow_provider_deltamerge.exceptions import MergeSpecError, SchemaEvolutionError
from airflow_provider_deltamerge.spec import MergeSpec

ExecutorName = Literal["classic"]
EXECUTORS: tuple[ExecutorName, ...] = ("classic",)


@dataclass(frozen=True)
class MergePlan:
    """Everything an executor needs: the spec, the snapshot it reads, resolved clauses, candidate files."""

    spec: MergeSpec
    snapshot: Snapshot
    target_schema: StructType
    clauses: tuple[ResolvedClause, ...]
    candidate_files: tuple[DataFile, ...]
    executor: ExecutorName

    def of_group(self, group: str) -> tuple[ResolvedClause, ...]:
        return tuple(c for c in self.clauses if c.group == group)


def has_inserts(clauses: Sequence[ResolvedClause]) -> bool:
    """Some WHEN NOT MATCHED clause exists, so unmatched source rows matter."""
    return any(c.group == "not_matched" for c in clauses)


def has_not_matched_by_source(clauses: Sequence[ResolvedClause]) -> bool:
    """Some WHEN NOT MATCHED BY SOURCE clause exists, so every candidate target row matters."""
    return any(c.group == "not_matched_by_source" for c in clauses)


def is_matched_only(clauses: Sequence[ResolvedClause]) -> bool:
    """Only WHEN MATCHED clauses: files whose matches satisfy no clause condition need no rewrite."""
    return all(c.group == "matched" for c in clauses)


def is_only_unconditional_delete(clauses: Sequence[ResolvedClause]) -> bool:
    """The one MATCHED clause is an unconditional DELETE: Delta then allows multiple matches."""
    matched = [c for c in clauses if c.group == "matched"]
    return len(matched) == 1 and matched[0].kind == "matched_delete" and matched[0].condition is None


def make_plan(
    spec: MergeSpec, snapshot: Snapshot, source_schema: StructType, *, forced: ExecutorName | None = None
) -> MergePlan:
    """Resolve ``spec`` against ``snapshot`` and the source schema and pick the executor.

    Every file of the snapshot is a candidate: this engine version does not skip files yet.
    """
    if spec.schema_evolution:
        raise SchemaEvolutionError(
            "Schema evolution (MERGE WITH SCHEMA EVOLUTION) is not supported by this engine version yet. "
            "Add the new columns to the target table first, or merge without schema_evolution."
        )
    if forced is not None and forced not in EXECUTORS:
        raise MergeSpecError(f"Unknown executor {forced!r}; choose one of {', '.join(EXECUTORS)}.")
    target = table_schema(snapshot)
    clauses = resolve_clauses(spec, target, source_schema)
    return MergePlan(spec, snapshot, target, clauses, snapshot.files, forced or "classic")
