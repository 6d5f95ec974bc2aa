"""Resolve a spec's clauses against the real target and source schemas: ``*`` expansion and assignments.

Every UPDATE and INSERT clause comes out as a full map from target column to a Spark SQL expression, so
the executors only evaluate; they never need to know how a clause was written. ``check_expressions`` then
analyses every condition and assignment with Spark against the columns its clause may see, and
``pin_current_time`` gives the whole merge one current time.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from airflow_provider_deltamerge.delta.log.protocol import GENERATION_EXPRESSION_KEY
from airflow_provider_deltamerge.engine.identity import identities
from airflow_provider_deltamerge.engine.resolve.plan_text import (
    has_subquery,
    projection_plan,
    top_node,
)
from airflow_provider_deltamerge.engine.resolve.struct_fields import assign_struct_fields
from airflow_provider_deltamerge.engine.resolve.unresolved import unresolved
from airflow_provider_deltamerge.engine.spark_errors import summarize
from airflow_provider_deltamerge.exceptions import ClauseResolutionError
from airflow_provider_deltamerge.session_kind import is_connect
from airflow_provider_deltamerge.spec import (
    MatchedUpdate,
    MergeClause,
    MergeSpec,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
)
from airflow_provider_deltamerge.spec.clauses import ClauseKind, MatchGroup, describe_clause
from airflow_provider_deltamerge.spec.names import format_path, quote_part, split_column_path, unqualified
from airflow_provider_deltamerge.spec.validation import as_error, problem

NULL = "NULL"
# The field metadata key holding a column's default as SQL (Spark's ResolveDefaultColumns; Delta's
# allowColumnDefaults feature).
CURRENT_DEFAULT = "CURRENT_DEFAULT"


@dataclass(frozen=True)
class ResolvedClause:
    """A clause ready to evaluate: its position, kind, condition, and target column -> SQL expression."""

    position: int
    kind: ClauseKind
    group: MatchGroup
    condition: str | None
    assignments: Mapping[str, str]  # empty for DELETE; for INSERT every target column but ``generated``
    # Generated columns the clause leaves to their expression, computed over the row it writes.
    generated: tuple[str, ...] = ()
    # Identity columns an INSERT leaves out, which get new values (engine/identity.py).
    identity: tuple[str, ...] = ()

    @property
    def is_delete(self) -> bool:
        return self.kind in ("matched_delete", "not_matched_by_source_delete")

    @property
    def is_insert(self) -> bool:
        return self.kind == "not_matched_insert"


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def resolve_clauses(
    spec: MergeSpec,
    target: StructType,
    source: StructType,
    *,
    case_sensitive: bool = False,
    resolved_first: Callable[[Sequence[ResolvedClause]], None] | None = None,
) -> tuple[ResolvedClause, ...]:
    """Expand and check every clause of ``spec`` against the target and source schemas; assignments of
    struct fields become one assignment of their column (``struct_fields``). Names match ignoring case
    unless ``case_sensitive`` (Spark's ``spark.sql.caseSensitive``).

    Args:
        resolved_first: where a clause does not resolve, called with the clauses before it before the
            error is raised: Delta resolves the ON condition and those clauses first, and reports an error of
            theirs (``check_resolution``) rather than this clause's.

    Raises:
        ClauseResolutionError: with Delta's wording, naming the clause and the columns it could use.
    """
    defaults = {
        f.name: f"({f.metadata[CURRENT_DEFAULT]})" for f in target.fields if CURRENT_DEFAULT in f.metadata
    }
    generated = frozenset(f.name for f in target.fields if GENERATION_EXPRESSION_KEY in f.metadata)
    identity = {name: i.allow_explicit_insert for name, i in identities(target).items()}
    names = _Names(
        [f.name for f in target.fields],
        [f.name for f in source.fields],
        case_sensitive,
        defaults,
        generated,
        identity,
    )
    resolved: list[ResolvedClause] = []
    for position, clause in enumerate(spec.clauses, start=1):
        try:
            with_fields = assign_struct_fields(
                clause,
                position,
                target,
                target_alias=spec.target_alias,
                case_sensitive=case_sensitive,
                evolving_from=_evolving_from(spec, source),
            )
            resolved.append(_resolve(spec, position, with_fields, names))
        except ClauseResolutionError:
            if resolved_first is not None:
                resolved_first(resolved)
            raise
    return tuple(resolved)


def _evolving_from(spec: MergeSpec, source: StructType) -> tuple[str, StructType] | None:
    """The source (alias and schema) that schema evolution resolves an assigned name on where the target
    cannot: Delta's MERGE tries the source for an UPDATE or INSERT clause's target column
    (``DeltaMergeActionResolver.resolveSingleTargetColumn``); None without schema evolution."""
    return (spec.source_alias, source) if spec.schema_evolution else None


@dataclass(frozen=True)
class _Names:
    """The target's and the source's column names, compared as the session compares names."""

    target: Sequence[str]
    source: Sequence[str]
    case_sensitive: bool
    defaults: Mapping[str, str]  # target column -> its default's SQL, for the columns that have one
    generated: frozenset[str] = frozenset()  # generated columns of the target
    # Identity columns of the target, each with whether an INSERT may give it a value (BY DEFAULT).
    identity: Mapping[str, bool] = field(default_factory=dict)

    def inserted(self, column: str) -> str:
        """What an INSERT writes to a target column it does not assign: the column's default, else NULL."""
        return self.defaults.get(column, NULL)

    def key(self, name: str) -> str:
        return name if self.case_sensitive else name.lower()

    def new_columns(self) -> list[str]:
        """Source columns the target lacks, which schema evolution may add. Compared ignoring case even in
        a case-sensitive session: a Delta table cannot hold two columns that differ only in case."""
        known = {name.lower() for name in self.target}
        return [name for name in self.source if name.lower() not in known]


def _resolve(spec: MergeSpec, position: int, clause: MergeClause, names: _Names) -> ResolvedClause:
    # With schema evolution, WHEN MATCHED / NOT MATCHED clauses may assign source columns the target lacks.
    evolve = spec.schema_evolution and clause.group != "not_matched_by_source"
    assignable = [*names.target, *names.new_columns()] if evolve else names.target
    assignments: dict[str, str] = {}
    match clause:
        case MatchedUpdate(star=True) | NotMatchedInsert(star=True):
            assignments = _star(spec, position, clause, names)
        case MatchedUpdate() | NotMatchedBySourceUpdate():
            assignments = _explicit(spec, position, clause, clause.set, assignable, names)
        case NotMatchedInsert():
            given = _explicit(spec, position, clause, clause.values, assignable, names)
            left_out = names.generated | names.identity.keys()
            omitted = [c for c in names.target if c not in given and c not in left_out]
            assignments = {column: names.inserted(column) for column in omitted} | given
    _check_identity_assignments(position, clause, assignments, names)
    # As Delta does, a generated column an INSERT or UPDATE does not assign is computed from its expression
    # over the row written; an assigned value must equal it (a constraint, delta/log/protocol.py).
    generated = () if clause.kind.endswith("delete") else tuple(sorted(names.generated - set(assignments)))
    identity = (
        tuple(sorted(set(names.identity) - set(assignments))) if clause.kind == "not_matched_insert" else ()
    )
    return ResolvedClause(
        position, clause.kind, clause.group, clause.condition, assignments, generated, identity
    )


def _check_identity_assignments(
    position: int, clause: MergeClause, assignments: Mapping[str, str], names: _Names
) -> None:
    """Delta's IdentityColumn.blockIdentityColumnUpdate / blockExplicitIdentityColumnInsert: no UPDATE may
    assign an identity column, and no INSERT a GENERATED ALWAYS one (``*`` clauses included).

    Raises:
        ClauseResolutionError: DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED or
            DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED.
    """
    inserting = clause.kind == "not_matched_insert"
    for column in assignments:
        if column not in names.identity or (inserting and names.identity[column]):
            continue
        error_class = (
            "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"
            if inserting
            else "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED"
        )
        statement = "INSERT" if inserting else "UPDATE"
        fix = f"Leave the identity column out of the {statement} (with *, EXCEPT it or list the columns)" + (
            ": its value is generated." if inserting else "."
        )
        raise as_error(
            problem(error_class, describe_clause(position, clause), fix, colName=column),
            ClauseResolutionError,
        )


def _star(
    spec: MergeSpec, position: int, clause: MatchedUpdate | NotMatchedInsert, names: _Names
) -> dict[str, str]:
    """``*`` as Delta expands it: over the target's columns, from same-named source columns, each of which
    the source must have (``ResolveDeltaMergeInto``: else DELTA_MERGE_UNRESOLVED_EXPRESSION naming the
    column, given the source's columns). With schema evolution, over the source's columns instead:
    target-only columns keep their values (UPDATE) or get their default, else NULL (INSERT)."""
    by_key = {names.key(name): name for name in names.source}
    excluded = {names.key(name) for name in clause.except_columns}
    is_insert = isinstance(clause, NotMatchedInsert)
    target = names.target
    if spec.schema_evolution:
        target = [*(c for c in target if names.key(c) in by_key or is_insert), *names.new_columns()]
    out: dict[str, str] = {}
    for column in target:
        if names.key(column) in excluded:
            continue
        source_column = by_key.get(names.key(column))
        if source_column is not None:
            out[column] = f"{spec.source_alias}.{quote(source_column)}"
        elif spec.schema_evolution:
            # Over the source's columns (Delta's resolveStar): a generated column the source lacks is
            # computed from its expression and an identity column gets a new value, as an INSERT that leaves
            # them out. Without schema evolution Delta 4.4 refuses both, as any other column the source lacks.
            if column not in names.identity and column not in names.generated:
                out[column] = names.inserted(column)
        else:
            raise unresolved(
                position,
                clause,
                quote_part(column),
                [f"{quote_part(spec.source_alias)}.{quote_part(c)}" for c in names.source],
                f"{'INSERT' if is_insert else 'UPDATE'} clause",
                "The source has no column of this name: add it to the source, list the columns instead of "
                "*, or enable schema evolution.",
            )
    return out


def _explicit(
    spec: MergeSpec,
    position: int,
    clause: MergeClause,
    pairs: Sequence[tuple[str, str]],
    target: Sequence[str],
    names: _Names,
) -> dict[str, str]:
    by_key = {names.key(name): name for name in target}
    in_target = {names.key(name) for name in names.target}
    out: dict[str, str] = {}
    for raw_column, expression in pairs:
        path, qualified = unqualified(raw_column, spec.target_alias)
        column = ".".join(path)
        resolved = by_key.get(names.key(column))
        if resolved is not None and names.key(resolved) not in in_target and qualified:
            # A column only the source has, named with the target's alias: Delta resolves a name the target
            # lacks on the source (DeltaMergeActionResolver), where the target's alias names nothing.
            raise unresolved(
                position,
                clause,
                raw_column,
                [f"{quote_part(spec.source_alias)}.{quote_part(c)}" for c in names.source],
                "INSERT clause" if clause.kind == "not_matched_insert" else "UPDATE clause",
                f"Schema evolution adds a column named as the source names it: write `{column}` without "
                f"`{spec.target_alias}.`.",
            )
        if resolved is None:
            clause_name = "INSERT clause" if clause.kind == "not_matched_insert" else "UPDATE clause"
            raise unresolved(
                position,
                clause,
                raw_column,
                [f"{quote_part(spec.target_alias)}.{quote_part(c)}" for c in target],
                clause_name,
                "Fix the column name; WHEN NOT MATCHED BY SOURCE clauses cannot add columns."
                if clause.group == "not_matched_by_source"
                else "Fix the column name; schema evolution adds only columns the source has."
                if spec.schema_evolution
                else "Fix the column name, or enable schema evolution to add a source column to the table.",
            )
        out[resolved] = expression
    return out


# Delta's texts for conditions Delta refuses (delta-error-classes.json). They live here rather than in
# spec/delta_messages.py because only the engine, with Spark's analyser, can tell these cases apart.
CONDITION_MESSAGES: Mapping[str, str] = {
    "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED": (
        "Non-deterministic functions are not supported in the {operation} (condition = {condition})."
    ),
    "DELTA_AGGREGATION_NOT_SUPPORTED": (
        "Aggregate functions are not supported in the {operation} (condition = {condition})."
    ),
    "DELTA_UNSUPPORTED_SUBQUERY": (
        "Subqueries are not supported in the {operation} (condition = {condition})."
    ),
}


@dataclass(frozen=True)
class _Checked:
    """One SQL text of the merge, where it stands and which columns it may see."""

    text: str
    where: str  # "clause 2, WHEN MATCHED UPDATE" or "the ON condition"
    clause_name: str  # Delta's name for the place: "search condition", "UPDATE clause", ...
    sees: tuple[str, ...]  # the aliases visible there
    is_condition: bool
    assigns: tuple[int, str] | None = None  # (clause position, target column) of an assignment


@dataclass(frozen=True)
class ValueType:
    """What Spark's analysis says of an assigned value: its type, and whether it is deterministic."""

    data_type: DataType
    deterministic: bool


def check_expressions(
    spark: SparkSession,
    spec: MergeSpec,
    condition: str,
    clauses: Sequence[ResolvedClause],
    target: StructType,
    source: StructType,
) -> dict[tuple[int, str], ValueType]:
    """Analyse every condition and assignment against the columns its clause may see, as Delta does.

    The ON condition and MATCHED clauses see target and source, NOT MATCHED clauses only the source, NOT
    MATCHED BY SOURCE clauses only the target. Conditions must be deterministic and free of aggregates
    and subqueries; assignments may be non-deterministic. Only empty frames are analysed: no Spark job.

    Returns:
        The type of every assigned value, by (clause position, target column).

    Raises:
        ClauseResolutionError: naming the clause, with Delta's (or Spark's) error class and wording.
    """
    schemas = {spec.target_alias: target, spec.source_alias: source}
    frame = _empty_frames(spark, schemas)
    batched: set[tuple[str, ...]] = set()
    analysed: dict[tuple[tuple[str, ...], str], ValueType] = {}
    types: dict[tuple[int, str], ValueType] = {}
    expressions = list(_expressions(spec, condition, clauses))
    for checked in expressions:
        if checked.sees not in batched:
            batched.add(checked.sees)
            seen = [c for c in expressions if c.sees == checked.sees]
            assigned = [c.text for c in seen if not c.is_condition]
            conditions = [c.text for c in seen if c.is_condition]
            analysed |= _value_types(frame(checked.sees), checked.sees, assigned, conditions)
        key = (checked.sees, checked.text)
        if key not in analysed:
            analysed[key] = _check(frame(checked.sees), checked, schemas)
        if checked.assigns is not None:
            types[checked.assigns] = analysed[key]
    return types


def check_resolution(
    spark: SparkSession,
    spec: MergeSpec,
    clauses: Sequence[ResolvedClause],
    target: StructType,
    source: StructType,
) -> None:
    """Raise the first of the ON condition and ``clauses``' conditions and assignments that does not
    resolve, as ``check_expressions`` reports it. Resolution alone: Delta's refusals of what resolves (a
    non-deterministic condition, say) keep the order ``check_expressions`` gives them after every clause has
    resolved. Only empty frames are analysed.

    Raises:
        ClauseResolutionError: naming the expression's clause, with Delta's (or Spark's) error class.
    """
    schemas = {spec.target_alias: target, spec.source_alias: source}
    frame = _empty_frames(spark, schemas)
    for checked in _expressions(spec, spec.condition, clauses):
        try:
            # Connect analyses lazily: asking for the schema is the analysis.
            frame(checked.sees).select(F.expr(checked.text)).schema  # noqa: B018
        except AnalysisException as err:
            raise _analysis_error(checked, err, schemas) from err


def _value_types(
    frame: DataFrame, sees: tuple[str, ...], texts: Sequence[str], conditions: Sequence[str]
) -> dict[tuple[tuple[str, ...], str], ValueType]:
    """The types of the assigned values ``texts``, from one analysis of them all (a wide table's ``*``
    clauses assign hundreds of values: one round trip to Spark each would cost seconds); on a Connect
    session, the ``conditions`` too, where that analysis shows each passes ``_check``.

    Empty when that analysis fails or is not a plain projection (an aggregate among them): each value is
    then checked on its own, in the merge's order, so the error names the first bad one.
    """
    if is_connect(frame.sparkSession):
        return _value_types_on_connect(frame, sees, list(dict.fromkeys([*texts, *conditions])), conditions)
    distinct = list(dict.fromkeys(texts))
    if not distinct:
        return {}
    try:
        # As SQL text: one parse on the JVM (Columns would cost round trips per value); read by position.
        selected = frame.selectExpr(*distinct)
        analyzed = selected._jdf.queryExecution().analyzed()
    except AnalysisException:
        return {}
    if analyzed.getClass().getSimpleName() != "Project":
        return {}
    projected = analyzed.expressions()
    return {
        (sees, text): ValueType(selected.schema.fields[n].dataType, bool(projected.apply(n).deterministic()))
        for n, text in enumerate(distinct)
    }


def _expressions(spec: MergeSpec, condition: str, clauses: Sequence[ResolvedClause]) -> Iterator[_Checked]:
    # Target first: Delta lists the columns a clause can see as target's, then source's.
    both = (spec.target_alias, spec.source_alias)
    sees = {"matched": both, "not_matched": both[1:], "not_matched_by_source": both[:1]}
    yield _Checked(condition, "the ON condition", "search condition", both, is_condition=True)
    for clause in clauses:
        where = describe_clause(clause.position, spec.clauses[clause.position - 1])
        action = "INSERT" if clause.is_insert else "DELETE" if clause.is_delete else "UPDATE"
        if clause.condition:
            yield _Checked(
                clause.condition, where, f"{action} condition", sees[clause.group], is_condition=True
            )
        for column, expression in clause.assignments.items():
            yield _Checked(
                expression,
                where,
                f"{action} clause",
                sees[clause.group],
                is_condition=False,
                assigns=(clause.position, column),
            )


def _empty_frames(
    spark: SparkSession, schemas: Mapping[str, StructType]
) -> Callable[[tuple[str, ...]], DataFrame]:
    """The empty join of the aliases an expression sees (``schemas`` by alias), made once per set of them."""

    @functools.cache
    def frame(sees: tuple[str, ...]) -> DataFrame:
        frames = [spark.createDataFrame([], schemas[alias]).alias(alias) for alias in sees]
        joined = frames[0]
        for other in frames[1:]:
            joined = joined.crossJoin(other)
        return joined

    return frame


def _value_types_on_connect(
    frame: DataFrame, sees: tuple[str, ...], distinct: list[str], conditions: Sequence[str]
) -> dict[tuple[tuple[str, ...], str], ValueType]:
    """``_value_types`` from the plan's text (``plan_text.py``): one analysis for the types, one for the
    plan and determinism (all of them at once; one non-deterministic value makes each count as one: the
    safe side).
    The conditions among ``distinct`` are given only when all of them are deterministic, with no aggregate
    and no subquery among them all (``_check``'s tests, each of which costs its own round trips); else each
    condition is checked on its own."""
    if not distinct:
        return {}
    try:
        plan, deterministic = projection_plan(frame, distinct)
    except AnalysisException:
        return {}
    if top_node(plan) != "Project":
        return {}
    cleared = deterministic and not has_subquery(plan)
    fields = frame.selectExpr(*distinct).schema.fields
    return {
        (sees, text): ValueType(fields[n].dataType, deterministic)
        for n, text in enumerate(distinct)
        if cleared or text not in conditions
    }


def _check(frame: DataFrame, checked: _Checked, schemas: Mapping[str, StructType]) -> ValueType:
    connect = is_connect(frame.sparkSession)
    try:
        selected = frame.select(F.expr(checked.text))
        # Connect analyses lazily: asking for the plan's text is the analysis.
        if connect:
            analyzed: Any
            analyzed, sortable_and_deterministic = projection_plan(frame, [checked.text])
        else:
            analyzed = selected._jdf.queryExecution().analyzed()
    except AnalysisException as err:
        raise _analysis_error(checked, err, schemas) from err
    if connect:
        # Neither an aggregate nor a subquery can be a sort key: each is refused for being one before its
        # determinism matters (a non-deterministic subquery is refused as a subquery, not as Delta refuses
        # it, for its non-determinism: refused all the same).
        aggregate = top_node(analyzed) == "Aggregate"
        in_subquery = has_subquery(analyzed)
        deterministic = aggregate or in_subquery or sortable_and_deterministic
        kind = lambda: "Aggregate" if aggregate else "Project"  # noqa: E731
        subquery = lambda: in_subquery  # noqa: E731
    else:
        deterministic = bool(analyzed.expressions().head().deterministic())
        kind, subquery = (
            (lambda: analyzed.getClass().getSimpleName()),
            (lambda: analyzed.subqueries().nonEmpty()),
        )
    value = ValueType(selected.schema.fields[0].dataType, deterministic)
    if not checked.is_condition:
        return value
    # Spark turns a projection with an aggregate into an Aggregate node; its first expression is ours.
    problem = (
        "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED"
        if not deterministic
        else "DELTA_AGGREGATION_NOT_SUPPORTED"
        if kind() == "Aggregate"
        else "DELTA_UNSUPPORTED_SUBQUERY"
        if subquery()
        else None
    )
    if problem is not None:
        raise _refused_condition(problem, checked)
    return value


def _refused_condition(error_class: str, checked: _Checked) -> ClauseResolutionError:
    operation = f"{checked.clause_name} of MERGE operation"
    return ClauseResolutionError(
        CONDITION_MESSAGES[error_class].format(operation=operation, condition=checked.text)
        + f" ({checked.where}) Compute the value in the source query instead, and compare with that column.",
        error_class=error_class,
    )


def _analysis_error(
    checked: _Checked, err: AnalysisException, schemas: Mapping[str, StructType]
) -> ClauseResolutionError:
    """Spark's analysis error as Delta reports it: an unknown column is DELTA_MERGE_UNRESOLVED_EXPRESSION
    naming that column (not the whole expression) and the columns the clause sees, an aggregate in a
    condition is DELTA_AGGREGATION_NOT_SUPPORTED; anything else keeps Spark's class and first sentence."""
    condition = err.getCondition() or ""
    if condition.startswith("UNRESOLVED_COLUMN"):
        written = str(dict(err.getMessageParameters() or {}).get("objectName", ""))
        return as_error(
            problem(
                "DELTA_MERGE_UNRESOLVED_EXPRESSION",
                checked.where,
                "Fix the column name; NOT MATCHED clauses see only the source, NOT MATCHED BY SOURCE clauses "
                "only the target.",
                sqlExpr=format_path(split_column_path(written) or (written,)),
                clause=checked.clause_name,
                cols=", ".join(
                    f"{quote_part(alias)}.{quote_part(f.name)}"
                    for alias in checked.sees
                    for f in schemas[alias].fields
                ),
            ),
            ClauseResolutionError,
        )
    if condition == "MISSING_GROUP_BY" and checked.is_condition:
        return _refused_condition("DELTA_AGGREGATION_NOT_SUPPORTED", checked)
    hint = " Qualify the column with its alias." if condition == "AMBIGUOUS_REFERENCE" else ""
    return ClauseResolutionError(
        f"{summarize(err).message} ({checked.where}, in {checked.text!r}){hint}",
        error_class=condition or None,
    )


# current_timestamp() and its kin, outside quoted text; a quoted literal or name matches the first branch
# and is kept as it is. now() and curdate() need their parentheses; the others may omit them.
_CURRENT_TIME = re.compile(
    r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`)"""
    r"|(?<![.\w])(?:(current_timestamp|current_date|localtimestamp)(?:\s*\(\s*\))?"
    r"|(now|curdate)\s*\(\s*\))(?!\w)",
    re.IGNORECASE,
)


def pin_current_time(
    condition: str, clauses: Sequence[ResolvedClause], now: datetime, *, time_zone: str
) -> tuple[str, tuple[ResolvedClause, ...]]:
    """The ON condition and clauses with ``current_timestamp()`` & co. replaced by literals of ``now``.

    Delta evaluates these once per merge; the engine runs several Spark queries (find touched files,
    rewrite), so without this a row could be judged at two different instants.
    """
    local = now.astimezone(zoneinfo.ZoneInfo(time_zone))
    literals = {
        "current_timestamp": f"TIMESTAMP '{now.astimezone(UTC).isoformat(sep=' ')}'",
        "now": f"TIMESTAMP '{now.astimezone(UTC).isoformat(sep=' ')}'",
        "localtimestamp": f"TIMESTAMP_NTZ '{local.replace(tzinfo=None).isoformat(sep=' ')}'",
        "current_date": f"DATE '{local.date().isoformat()}'",
        "curdate": f"DATE '{local.date().isoformat()}'",
    }

    def pin(text: str) -> str:
        return _CURRENT_TIME.sub(
            lambda hit: hit.group(1) or literals[(hit.group(2) or hit.group(3)).lower()], text
        )

    return pin(condition), tuple(
        replace(
            clause,
            condition=clause.condition and pin(clause.condition),
            assignments={column: pin(value) for column, value in clause.assignments.items()},
        )
        for clause in clauses
    )
