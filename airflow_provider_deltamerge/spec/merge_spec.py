"""``MergeSpec``: one MERGE, as a frozen value that travels from the DAG to the Spark job."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltamerge.spec.clauses import MergeClause
from airflow_provider_deltamerge.spec.source import MergeSource
from airflow_provider_deltamerge.spec.validation import Problem, merge_problems, raise_problems


@dataclass(frozen=True)
class MergeSpec:
    """MERGE INTO target AS t USING source AS s ON condition WHEN ... (clauses in evaluation order).

    Grammar rules, enforced when the spec is built (``validation.merge_problems``):

    * there is at least one WHEN clause;
    * within each group (MATCHED, NOT MATCHED, NOT MATCHED BY SOURCE) clauses are tried in order and the
      first whose condition holds acts; only the last clause of a group may omit its condition;
    * NOT MATCHED clauses see only the source, NOT MATCHED BY SOURCE clauses only the target;
    * one UPDATE assigns a column once, and not both a struct and one of its fields; an INSERT names each
      top-level column once; assignment lists are not empty, conditions not blank.

    Conditions and expressions are Spark SQL text over the aliases ``target_alias`` and ``source_alias``.
    ``deduplicate_source_by`` (source key columns) with ``deduplicate_order_by`` (source columns) keeps, per
    key, only the source row with the greatest ordering values before the merge: the latest change of a CDC
    feed. Both are empty (no de-duplication) by default.
    """

    target: str
    source: MergeSource
    condition: str
    clauses: tuple[MergeClause, ...]
    target_alias: str = "t"
    source_alias: str = "s"
    schema_evolution: bool = False
    deduplicate_source_by: tuple[str, ...] = ()
    deduplicate_order_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("clauses", "deduplicate_source_by", "deduplicate_order_by"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        raise_problems(_problems(self.clauses, vars(self)))

    def clauses_of(self, group: str) -> Sequence[tuple[int, MergeClause]]:
        """The clauses of one WHEN group with their 1-based positions in the spec."""
        return [(n, c) for n, c in enumerate(self.clauses, start=1) if c.group == group]


def _problems(clauses: Sequence[MergeClause | Problem], fields: dict[str, Any]) -> list[Problem]:
    return merge_problems(
        clauses,
        condition=fields["condition"],
        source=fields.get("source"),
        target_alias=fields["target_alias"],
        source_alias=fields["source_alias"],
        deduplicate_source_by=tuple(fields["deduplicate_source_by"]),
        deduplicate_order_by=tuple(fields["deduplicate_order_by"]),
    )


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(MergeSpec) if f.default is not dataclasses.MISSING}


def assemble_spec(clauses: Sequence[MergeClause | Problem], **fields: Any) -> MergeSpec:
    """Build a spec from a front door (JSON, SQL) that may have met clauses it could not build.

    Such a clause is passed as its ``Problem``, in its place, so that one error reports it together with
    every other problem, each at its right clause position.

    Raises:
        MergeSpecError: listing every problem.
    """
    if any(isinstance(c, Problem) for c in clauses):
        raise_problems(_problems(clauses, {**_DEFAULTS, **fields}))
    return MergeSpec(clauses=tuple(c for c in clauses if not isinstance(c, Problem)), **fields)
