"""The merge spec: clauses, validation, JSON form, MERGE INTO text, pre-flight checks (stdlib, sqlglot)."""

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
from airflow_provider_deltamerge.spec.json_form import SPEC_VERSION, spec_from_json, spec_hash, spec_to_json
from airflow_provider_deltamerge.spec.merge_spec import MergeSpec
from airflow_provider_deltamerge.spec.preflight import (
    ColumnSchema,
    TableColumns,
    preflight_problems,
    run_preflight,
)
from airflow_provider_deltamerge.spec.source import MergeSource, PathSource, QuerySource, TableSource
from airflow_provider_deltamerge.spec.sql_parse import parse_merge_sql
from airflow_provider_deltamerge.spec.sql_render import to_merge_sql
from airflow_provider_deltamerge.spec.validation import Problem, check_clauses

__all__ = [
    "SPEC_VERSION",
    "ColumnSchema",
    "MatchedDelete",
    "MatchedUpdate",
    "MergeClause",
    "MergeSource",
    "MergeSpec",
    "NotMatchedBySourceDelete",
    "NotMatchedBySourceUpdate",
    "NotMatchedInsert",
    "PathSource",
    "Problem",
    "QuerySource",
    "TableColumns",
    "TableSource",
    "check_clauses",
    "delete",
    "delete_by_source",
    "insert",
    "insert_all",
    "parse_merge_sql",
    "preflight_problems",
    "run_preflight",
    "spec_from_json",
    "spec_hash",
    "spec_to_json",
    "to_merge_sql",
    "update",
    "update_all",
    "update_by_source",
]
