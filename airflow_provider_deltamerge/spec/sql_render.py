"""A ``MergeSpec`` written as Delta Lake ``MERGE INTO`` text, the inverse of ``parse_merge_sql``."""

from __future__ import annotations

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec.clauses import (
    GROUP_SQL_NAMES,
    MatchedDelete,
    MatchedUpdate,
    MergeClause,
    NotMatchedBySourceDelete,
    NotMatchedInsert,
)
from airflow_provider_deltamerge.spec.merge_spec import MergeSpec
from airflow_provider_deltamerge.spec.names import quote_part
from airflow_provider_deltamerge.spec.source import MergeSource, PathSource, TableSource
from airflow_provider_deltamerge.spec.sql_parse import is_path_like

# Delta's SQL accepts the WHEN groups only in this order; within a group the spec's order is kept.
_GROUP_ORDER = {"matched": 0, "not_matched": 1, "not_matched_by_source": 2}


def _path(path: str) -> str:
    return "`" + path.replace("`", "``") + "`"


def _target(target: str) -> str:
    return f"delta.{_path(target)}" if is_path_like(target) else target


def _source(source: MergeSource) -> str:
    if isinstance(source, PathSource):
        if source.options:
            raise MergeSpecError(
                "A path source with reader options cannot be written as MERGE INTO: Spark SQL's "
                f"{source.format}.`path` takes no options. Keep the spec in its JSON form, or read the files "
                "in a QuerySource instead.",
                error_class="DELTAMERGE_NO_MERGE_INTO_FORM",
            )
        return f"{source.format}.{_path(source.path)}"
    if isinstance(source, TableSource):
        return source.name
    return f"(\n{source.sql}\n)"


def _action(clause: MergeClause) -> str:
    if isinstance(clause, MatchedDelete | NotMatchedBySourceDelete):
        return "DELETE"
    if isinstance(clause, NotMatchedInsert):
        if clause.star:
            return "INSERT *"
        columns = ", ".join(c for c, _ in clause.values)
        return f"INSERT ({columns}) VALUES ({', '.join(e for _, e in clause.values)})"
    if isinstance(clause, MatchedUpdate) and clause.star:
        return "UPDATE SET *"
    return "UPDATE SET " + ", ".join(f"{c} = {e}" for c, e in clause.set)


def _clause_sql(clause: MergeClause) -> str:
    """One WHEN clause as SQL, e.g. ``WHEN MATCHED AND s.op = 'D' THEN DELETE``."""
    condition = f" AND {clause.condition}" if clause.condition is not None else ""
    return f"{GROUP_SQL_NAMES[clause.group]}{condition} THEN {_action(clause)}"


def to_merge_sql(spec: MergeSpec) -> str:
    """``spec`` as one Delta Lake ``MERGE INTO`` statement.

    Clauses are grouped MATCHED, NOT MATCHED, NOT MATCHED BY SOURCE (the order Delta's SQL requires),
    keeping their order within each group, which is all that decides how they act. Conditions and
    expressions are written verbatim.

    Raises:
        MergeSpecError: when the spec has something MERGE INTO cannot say: reader options on a path
            source, source de-duplication, or ``* EXCEPT``.
    """
    if spec.deduplicate_source_by:
        raise MergeSpecError(
            "Source de-duplication (deduplicate_source_by) has no MERGE INTO form. Keep the spec in its "
            "JSON form, or de-duplicate in a QuerySource (ROW_NUMBER() OVER (PARTITION BY ...) = 1).",
            error_class="DELTAMERGE_NO_MERGE_INTO_FORM",
        )
    excepting = [n for n, c in enumerate(spec.clauses, start=1) if getattr(c, "except_columns", ())]
    if excepting:
        raise MergeSpecError(
            f"* EXCEPT (clause {excepting[0]}) has no MERGE INTO form: Spark's SQL parser, which Delta uses, "
            "refuses it. Keep the spec in its Python or JSON form, or list the columns.",
            error_class="DELTAMERGE_NO_MERGE_INTO_FORM",
        )
    evolution = " WITH SCHEMA EVOLUTION" if spec.schema_evolution else ""
    clauses = sorted(spec.clauses, key=lambda c: _GROUP_ORDER[c.group])
    lines = [
        f"MERGE{evolution} INTO {_target(spec.target)} AS {quote_part(spec.target_alias)}",
        f"USING {_source(spec.source)} AS {quote_part(spec.source_alias)}",
        f"ON {spec.condition}",
        *(_clause_sql(c) for c in clauses),
    ]
    return "\n".join(lines)
