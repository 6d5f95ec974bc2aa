"""The test oracle: ``deltalake``'s own MERGE run with the same spec, and table comparison helpers."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from airflow_provider_deltamerge.spec import (
    MatchedDelete,
    MatchedUpdate,
    MergeSpec,
    NotMatchedBySourceDelete,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
)


def merge_with_deltalake(
    table_path: str, spec: MergeSpec, source: pa.Table, *, streamed_exec: bool = True
) -> dict[str, Any]:
    """Run ``spec``'s clauses with delta-rs on ``table_path``; returns delta-rs's metrics dict.

    ``spec.schema_evolution`` becomes delta-rs's ``merge_schema``; ``streamed_exec`` is delta-rs's own
    (its default streams the source; off, it collects the source's stats to prune target files first).
    """
    merger = DeltaTable(table_path).merge(
        source,
        spec.condition,
        source_alias=spec.source_alias,
        target_alias=spec.target_alias,
        merge_schema=spec.schema_evolution,
        streamed_exec=streamed_exec,
    )
    for clause in spec.clauses:
        match clause:
            case MatchedUpdate(star=True):
                merger = merger.when_matched_update_all(
                    clause.condition, except_cols=list(clause.except_columns)
                )
            case MatchedUpdate():
                merger = merger.when_matched_update(dict(clause.set), clause.condition)
            case MatchedDelete():
                merger = merger.when_matched_delete(clause.condition)
            case NotMatchedInsert(star=True):
                merger = merger.when_not_matched_insert_all(
                    clause.condition, except_cols=list(clause.except_columns)
                )
            case NotMatchedInsert():
                merger = merger.when_not_matched_insert(dict(clause.values), clause.condition)
            case NotMatchedBySourceUpdate():
                merger = merger.when_not_matched_by_source_update(dict(clause.set), clause.condition)
            case NotMatchedBySourceDelete():
                merger = merger.when_not_matched_by_source_delete(clause.condition)
    return merger.execute()  # type: ignore[no-any-return]


def sorted_rows(table_path: str) -> list[dict[str, Any]]:
    """Every row of the Delta table, in a stable order, read by delta-rs (an independent reader)."""
    table = DeltaTable(table_path)
    mapped = (table.metadata().configuration.get("delta.columnMapping.mode") or "none") != "none"
    if mapped or "deletionVectors" in (table.protocol().reader_features or ()):
        # deltalake's pyarrow reader refuses deletion vectors and reads mapped columns as NULLs; its
        # DataFusion scan handles both.
        rows = pa.RecordBatchReader.from_stream(table.scan()).read_all().to_pylist()
    else:
        rows = table.to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda row: [(v is None, str(v)) for v in row.values()])
