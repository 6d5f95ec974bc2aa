"""The merge spec: clause model, validation, JSON form. Pure Python (stdlib and sqlglot only)."""

from __future__ import annotations

from airflow_provider_deltamerge.spec.clauses import (
    MatchedDelete,
    MatchedUpdate,
    MergeClause,
    NotMatchedBySourceDelete,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
    delete,
    delete_by_source,
    insert,
    insert_all,
    update,
    update_all,
    update_by_source,
)
from airflow_provider_deltamerge.spec.merge_spec import MergeSpec
from airflow_provider_deltamerge.spec.source import MergeSource, PathSource, QuerySource, TableSource

__all__ = [
    "MatchedDelete",
    "MatchedUpdate",
    "MergeClause",
    "MergeSource",
    "MergeSpec",
    "NotMatchedBySourceDelete",
    "NotMatchedBySourceUpdate",
    "NotMatchedInsert",
    "PathSource",
    "QuerySource",
    "TableSource",
    "delete",
    "delete_by_source",
    "insert",
    "insert_all",
    "update",
    "update_all",
    "update_by_source",
]
