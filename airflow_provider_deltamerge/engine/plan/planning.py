"""Plan a merge: resolve it against the snapshot, choose the executor, choose the target files to read."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from airflow_provider_deltamerge.delta.commit.deletion_vector_writes import writes_deletion_vectors
from airflow_provider_deltamerge.delta.files.change_data_feed import (
    check_reserved_columns,
    writes_change_data,
)
from airflow_provider_deltamerge.delta.files.physical_schema import with_new_columns_mapped
from airflow_provider_deltamerge.delta.files.reader import table_schema
from airflow_provider_deltamerge.delta.format.column_mapping import maps_columns, max_column_id
from airflow_provider_deltamerge.delta.log.snapshot import DataFile, Snapshot
from airflow_provider_deltamerge.engine.resolve.casting import StoreAssignment, store_assignment_policy
from airflow_provider_deltamerge.engine.resolve.resolution import (
    ResolvedClause,
    ValueType,
    check_expressions,
    check_resolution,
    pin_current_time,
    quote,
    resolve_clauses,
)
from airflow_provider_deltamerge.engine.resolve.schema_evolution import evolved_schema
from airflow_provider_deltamerge.engine.resolve.type_widening import (
    AUTOMATIC_CONF,
    PREVIEW_FEATURE,
    check_dependent_expressions,
    check_type_changes,
    widening_mode,
    with_type_changes,
)
from airflow_provider_deltamerge.engine.session_confs import case_sensitive, optimize_insert_only
from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec import MatchedUpdate, MergeSpec, NotMatchedInsert
from airflow_provider_deltamerge.spec.clauses import CLAUSE_SQL_NAMES, describe_clause
from airflow_provider_deltamerge.spec.names import split_column_path, strip_alias

ExecutorName = Literal["insert_only", "matched_only", "classic"]


@dataclass(frozen=True)
class MergePlan:
    """Everything an executor needs: the spec, the snapshot it reads, resolved clauses, candidate files.

    ``condition`` is the ON condition as the executors evaluate it (the spec's, with the merge's one
    current time pinned in), so it is read from here, never from ``spec``.
    """

    spec: MergeSpec
    snapshot: Snapshot
    target_schema: StructType  # the table's schema as read (before any schema evolution)
    # The source's schema, read once: every frame of the source rows the executors get has it (held,
    # checkpointed or as loaded), and on Connect each frame's first schema read is a round trip.
    source_schema: StructType
    condition: str
    clauses: tuple[ResolvedClause, ...]
    candidate_files: tuple[DataFile, ...]
    executor: ExecutorName
    # The schema the merge writes: ``target_schema``, evolved when schema evolution adds columns or fields.
    final_schema: StructType
    # Every assigned value, cast to its column's final type, by (clause position, column).
    values: Mapping[tuple[int, str], Column]
    # Modified rows are hidden by deletion vectors, not copied away (delta/commit/deletion_vector_writes.py).
    writes_deletion_vectors: bool = False
    # A rewrite writes change data files too (delta/files/change_data_feed.py).
    writes_change_data: bool = False
    # The source's rows when counted before the phases (while it was materialized); None when unknown.
    source_rows: int | None = None
    # No target row can match two source rows, known from the source's keys (``Pruning.source_keys_unique``).
    source_keys_unique: bool = False

    @property
    def evolves_schema(self) -> bool:
        """The merge commits a new table schema together with its files."""
        return self.final_schema != self.target_schema

    def of_group(self, group: str) -> tuple[ResolvedClause, ...]:
        return tuple(c for c in self.clauses if c.group == group)


def has_inserts(clauses: Sequence[ResolvedClause]) -> bool:
    """Some WHEN NOT MATCHED clause exists, so unmatched source rows matter."""
    return any(c.group == "not_matched" for c in clauses)


def has_not_matched_by_source(clauses: Sequence[ResolvedClause]) -> bool:
    """Some WHEN NOT MATCHED BY SOURCE clause exists, so every candidate target row matters."""
    return any(c.group == "not_matched_by_source" for c in clauses)


def is_insert_only(clauses: Sequence[ResolvedClause]) -> bool:
    """Only WHEN NOT MATCHED clauses: no target row can change, so no file is rewritten."""
    return all(c.group == "not_matched" for c in clauses)


def is_matched_only(clauses: Sequence[ResolvedClause]) -> bool:
    """Only WHEN MATCHED clauses: files whose matches satisfy no clause condition need no rewrite."""
    return all(c.group == "matched" for c in clauses)


def is_only_unconditional_delete(clauses: Sequence[ResolvedClause]) -> bool:
    """The one MATCHED clause is an unconditional DELETE: Delta then allows multiple matches."""
    matched = [c for c in clauses if c.group == "matched"]
    return len(matched) == 1 and matched[0].kind == "matched_delete" and matched[0].condition is None


def is_any_clause_mix(clauses: Sequence[ResolvedClause]) -> bool:
    """Any clauses at all: the classic executor serves every mix."""
    return True


# Which clause mixes each executor can serve; the first that can serve a merge is chosen.
SERVES: Mapping[ExecutorName, Callable[[Sequence[ResolvedClause]], bool]] = {
    "insert_only": is_insert_only,
    "matched_only": is_matched_only,
    "classic": is_any_clause_mix,
}

_SERVES_WHAT = {
    "insert_only": "only WHEN NOT MATCHED clauses",
    "matched_only": "only WHEN MATCHED clauses",
}


def make_plan(
    spark: SparkSession,
    spec: MergeSpec,
    snapshot: Snapshot,
    source_schema: StructType,
    *,
    forced: ExecutorName | None = None,
) -> MergePlan:
    """Resolve ``spec`` against ``snapshot`` and the source schema and pick the executor.

    Every file of the snapshot is a candidate: this engine version does not skip files yet. With schema
    evolution, the final schema adds the source columns the clauses assign (``schema_evolution``); every
    assignment is cast to its column's final type (``casting``).

    Raises:
        MergeSpecError: ``forced`` names an unknown executor or one that cannot serve the clauses.
        ClauseResolutionError: a condition or assignment does not resolve or is not allowed where it is, or a
            value cannot be stored in its column.
        SchemaEvolutionError: a source column's type does not merge into the target's.
    """
    if forced is not None and forced not in SERVES:
        raise MergeSpecError(
            f"Unknown executor {forced!r}; choose one of {', '.join(SERVES)}.",
            error_class="DELTAMERGE_INVALID_EXECUTOR",
        )
    features = snapshot.protocol.writer_features
    check_type_changes(snapshot.schema, features)
    target = table_schema(snapshot)
    resolved = resolve_clauses(
        spec,
        target,
        source_schema,
        case_sensitive=case_sensitive(spark),
        resolved_first=lambda before: check_resolution(spark, spec, before, target, source_schema),
    )
    if forced is not None and not SERVES[forced](resolved):
        raise MergeSpecError(_cannot_serve(forced, resolved), error_class="DELTAMERGE_EXECUTOR_CANNOT_SERVE")
    condition, clauses = pin_current_time(
        spec.condition,
        resolved,
        datetime.now(UTC),
        time_zone=spark.conf.get("spark.sql.session.timeZone") or "UTC",
    )
    types = check_expressions(spark, spec, condition, clauses, target, source_schema)
    final = target
    if spec.schema_evolution:
        final = evolved_schema(
            spark,
            target,
            source_schema,
            _assigned_paths(spec, clauses),
            features=features,
            widening=widening_mode(
                dict(snapshot.configuration), features, spark.conf.get(AUTOMATIC_CONF, None)
            ),
        )
        # Delta records each widening in the field's delta.typeChanges (the commit version only for
        # preview readers).
        check_dependent_expressions(target, final, dict(snapshot.configuration))
        preview = PREVIEW_FEATURE in features
        final = with_type_changes(final, target, table_version=snapshot.version + 1 if preview else None)
    values = _cast_values(spark, spec, clauses, types, target, final)
    # With optimizeInsertOnlyMerge off, Delta runs insert-only merges the classic way (multiple-match check
    # included).
    choices = [n for n in SERVES if n != "insert_only" or optimize_insert_only(spark)]
    executor = forced if forced is not None else next(n for n in choices if SERVES[n](clauses))
    if maps_columns(dict(snapshot.configuration)):
        # Columns schema evolution adds get ids and physical names before any file is written with them.
        final, _ = with_new_columns_mapped(
            final, max_column_id(dict(snapshot.configuration), snapshot.schema_json)
        )
    change_data = writes_change_data(snapshot)
    if change_data:
        check_reserved_columns(final.names)
    return MergePlan(
        spec,
        snapshot,
        target,
        source_schema,
        condition,
        clauses,
        snapshot.files,
        executor,
        final,
        values,
        writes_deletion_vectors=executor != "insert_only" and writes_deletion_vectors(snapshot),
        # As Delta's InsertOnlyMergeExecutor: a commit of added files only is read as inserts.
        writes_change_data=executor != "insert_only" and change_data,
    )


def _assigned_paths(spec: MergeSpec, clauses: Sequence[ResolvedClause]) -> set[tuple[str, ...]]:
    """The paths schema evolution takes from the source: each column a ``*`` clause assigns, and each path an
    UPDATE or INSERT of a WHEN MATCHED / WHEN NOT MATCHED clause writes (``SET t.addr.city``: the field
    alone, not the source's whole ``addr``), without the target's alias."""
    paths: set[tuple[str, ...]] = set()
    for clause in clauses:
        if clause.group == "not_matched_by_source":
            continue
        written = spec.clauses[clause.position - 1]
        if isinstance(written, MatchedUpdate | NotMatchedInsert) and written.star:
            paths.update((column,) for column in clause.assignments)
        elif isinstance(written, MatchedUpdate | NotMatchedInsert):
            pairs = written.set if isinstance(written, MatchedUpdate) else written.values
            paths.update(
                strip_alias(split_column_path(name) or (name,), spec.target_alias) for name, _ in pairs
            )
    return paths


def _cast_values(
    spark: SparkSession,
    spec: MergeSpec,
    clauses: Sequence[ResolvedClause],
    types: Mapping[tuple[int, str], ValueType],
    target: StructType,
    final: StructType,
) -> dict[tuple[int, str], Column]:
    """Each assignment as a value of its column's final type (``casting``), ready for the executors."""
    store = StoreAssignment(
        spark,
        store_assignment_policy(spark),
        evolve=spec.schema_evolution,
        aliases=frozenset({spec.target_alias.lower(), spec.source_alias.lower()}),
    )
    columns = {f.name: f.dataType for f in final.fields}
    in_target = {f.name for f in target.fields}
    # Delta aligns a clause's assignments with the table's columns before casting them, so of two columns
    # whose casts fail, the first in the table's order is the one an error names
    order = {name: i for i, name in enumerate(columns)}
    values = {}
    for clause in clauses:
        written = spec.clauses[clause.position - 1]
        # UPDATE * with evolution updates the source's leaves: target-only nested fields keep their values.
        keeps = spec.schema_evolution and isinstance(written, MatchedUpdate) and written.star
        for column, expression in sorted(clause.assignments.items(), key=lambda item: order[item[0]]):
            value = types[(clause.position, column)]
            current = F.col(f"{spec.target_alias}.{quote(column)}") if column in in_target else None
            values[(clause.position, column)] = store.cast(
                F.expr(expression),
                value.data_type,
                columns[column],
                column=column,
                where=describe_clause(clause.position, written),
                deterministic=value.deterministic,
                keep=current if keeps else None,
                expression=expression,
            )
    store.raise_refused_casts()
    return values


def _cannot_serve(executor: ExecutorName, clauses: Sequence[ResolvedClause]) -> str:
    wanted = _SERVES_WHAT[executor]
    other = next(c for c in clauses if not SERVES[executor]([c]))
    return (
        f"The {executor} executor serves merges with {wanted}, but clause {other.position} is "
        f"{CLAUSE_SQL_NAMES[other.kind]}. Leave executor unset (the engine picks one that fits) "
        "or use executor='classic', which serves every clause mix."
    )
