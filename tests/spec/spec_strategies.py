"""Hypothesis strategies for merge specs: valid by construction, in the forms both front doors can express."""

from __future__ import annotations

import dataclasses
import functools

from hypothesis import strategies as st
from sqlglot.dialects.spark import Spark

from airflow_provider_deltamerge.spec import (
    MatchedDelete,
    MatchedUpdate,
    MergeClause,
    MergeSpec,
    NotMatchedBySourceDelete,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
    PathSource,
    QuerySource,
    TableSource,
)
from airflow_provider_deltamerge.spec.names import folded, split_column_path, strip_alias

# Words the SQL tokenizer treats as keywords are no plain names (MATCHED, SOURCE, ... are not keywords).
KEYWORDS = {w.lower() for w in Spark.Tokenizer.KEYWORDS} | {"matched", "source", "target", "null", "true"}
names = (
    st.tuples(
        st.sampled_from("abcdefghijklmnopqrstuvwxyz"),
        st.text("abcdefghijklmnopqrstuvwxyz0123456789_", max_size=5),
    )
    .map("".join)
    .filter(lambda n: n not in KEYWORDS)
)
quoted_names = st.tuples(names, names).map(" ".join)
column_names = names | quoted_names.map(lambda n: f"`{n}`")


def qualified(alias: str) -> st.SearchStrategy[str]:
    return column_names.map(lambda c: f"{alias}.{c}")


@functools.cache
def expressions(aliases: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Spark SQL expressions over columns of ``aliases``: literals, calls, arithmetic, CASE; two levels deep.

    (``st.recursive`` would nest deeper but made each example cost most of a second.)
    """
    columns = st.one_of([qualified(a) for a in aliases])
    leaves = columns | st.integers(-5, 500).map(str) | names.map(lambda n: f"'{n}'")

    def around(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            inner,
            st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(" ".join),
            st.tuples(st.sampled_from(["coalesce", "greatest"]), inner, inner).map(
                lambda t: f"{t[0]}({t[1]}, {t[2]})"
            ),
            st.tuples(inner, inner, inner).map(lambda t: f"CASE WHEN {t[0]} > 0 THEN {t[1]} ELSE {t[2]} END"),
            inner.map(lambda e: f"({e})"),
        )

    return st.one_of(leaves, around(leaves), around(around(leaves)))


@functools.cache
def conditions(aliases: tuple[str, ...]) -> st.SearchStrategy[str]:
    comparison = st.tuples(
        expressions(aliases), st.sampled_from(["=", "<>", ">", "<=", "<=>"]), expressions(aliases)
    )
    return st.lists(comparison.map(" ".join), min_size=1, max_size=2).map(" AND ".join)


def _distinct_columns(min_size: int = 1) -> st.SearchStrategy[list[str]]:
    return st.lists(names, min_size=min_size, max_size=3, unique=True)


@functools.cache
def clauses_of(group: str, ta: str, sa: str) -> st.SearchStrategy[list[MergeClause]]:
    """One WHEN group: conditions on every clause, the last one's optional."""
    seen = {"matched": (ta, sa), "not_matched": (sa,), "not_matched_by_source": (ta,)}[group]
    condition = conditions(seen)

    assignments = st.lists(
        st.tuples(names, expressions(seen)), min_size=1, max_size=3, unique_by=lambda p: p[0]
    )
    # UPDATE may also assign struct fields (t.addr.city); one assignment per top-level column: no conflicts.
    fields = st.tuples(column_names, names)
    set_targets = names | fields.map(".".join) | fields.map(lambda f: f"{ta}.{f[0]}.{f[1]}")
    updates = st.lists(
        st.tuples(set_targets, expressions(seen)),
        min_size=1,
        max_size=3,
        unique_by=lambda p: folded(strip_alias(split_column_path(p[0]) or (p[0],), ta))[0],
    )

    if group == "matched":
        one = st.one_of(
            st.builds(
                lambda sets, c: MatchedUpdate(set=sets, condition=c),
                updates,
                condition,
            ),
            st.builds(
                lambda ex, c: MatchedUpdate(star=True, except_columns=ex, condition=c),
                _distinct_columns(0),
                condition,
            ),
            st.builds(lambda c: MatchedDelete(condition=c), condition),
        )
    elif group == "not_matched":
        one = st.one_of(
            st.builds(
                lambda v, c: NotMatchedInsert(values=v, condition=c),
                assignments,
                condition,
            ),
            st.builds(
                lambda ex, c: NotMatchedInsert(star=True, except_columns=ex, condition=c),
                _distinct_columns(0),
                condition,
            ),
        )
    else:
        one = st.one_of(
            st.builds(
                lambda s, c: NotMatchedBySourceUpdate(set=s, condition=c),
                updates,
                condition,
            ),
            st.builds(lambda c: NotMatchedBySourceDelete(condition=c), condition),
        )
    last_without_condition = st.booleans()

    def finish(items: list[MergeClause], drop_last: bool) -> list[MergeClause]:
        if items and drop_last:
            items[-1] = dataclasses.replace(items[-1], condition=None)
        return items

    return st.builds(finish, st.lists(one, max_size=2), last_without_condition)


@st.composite
def merge_specs(draw: st.DrawFn, *, sql_expressible: bool = False) -> MergeSpec:
    """Valid specs; with ``sql_expressible`` only what MERGE INTO can say, clauses in Delta's group order."""
    # A few fixed alias pairs, so the cached strategies over them are built once, not per example.
    ta, sa = draw(st.sampled_from([("t", "s"), ("tgt", "src"), ("old", "new")]))
    groups = [draw(clauses_of(g, ta, sa)) for g in ("matched", "not_matched", "not_matched_by_source")]
    clauses = [c for group in groups for c in group]
    if not sql_expressible:
        # Interleave the groups, keeping the order within each: only that order decides how clauses act.
        queues = {id(group): iter(group) for group in groups}
        labels = draw(st.permutations([id(group) for group in groups for _ in group]))
        clauses = [next(queues[label]) for label in labels]
    if sql_expressible:
        # Spark's SQL has no * EXCEPT.
        clauses = [
            dataclasses.replace(c, except_columns=()) if hasattr(c, "except_columns") else c for c in clauses
        ]
    clauses = clauses or [MatchedDelete()]
    path_source = st.builds(
        PathSource,
        path=names.map(lambda n: f"/data/{n}"),
        format=st.sampled_from(["parquet", "delta", "csv", "json", "orc"]),
        options=st.just(()) if sql_expressible else st.dictionaries(names, names, max_size=2),
    )
    source = draw(
        path_source
        | st.builds(TableSource, name=st.tuples(names, names).map(".".join))
        | st.builds(QuerySource, sql=names.map(lambda n: f"SELECT * FROM {n} WHERE ds = '2024-01-01'"))
    )
    dedup = (
        st.just(((), ()))
        if sql_expressible
        else st.tuples(_distinct_columns(), _distinct_columns()).map(tuple)
    )
    keys, order_by = draw(dedup | st.just(((), ())))
    return MergeSpec(
        target=draw(names.map(lambda n: f"s3://bucket/{n}") | st.tuples(names, names).map(".".join)),
        source=source,
        condition=draw(conditions((ta, sa))),
        clauses=tuple(clauses),
        target_alias=ta,
        source_alias=sa,
        schema_evolution=draw(st.booleans()),
        deduplicate_source_by=tuple(keys),
        deduplicate_order_by=tuple(order_by),
    )
