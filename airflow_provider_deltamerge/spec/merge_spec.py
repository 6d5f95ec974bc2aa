"""``MergeSpec``: one MERGE, as a frozen value that travels from the DAG to the Spark job."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airflow_provider_deltamerge.spec.clauses import MergeClause
from airflow_provider_deltamerge.spec.source import MergeSource
from airflow_provider_deltamerge.spec.validation import check_clauses


@dataclass(frozen=True)
class MergeSpec:
    """MERGE INTO target AS t USING source AS s ON condition WHEN ... (clauses in evaluation order).

    Grammar rules, enforced when the spec is built (``validation.check_clauses``):

    * there is at least one WHEN clause;
    * within each group (MATCHED, NOT MATCHED, NOT MATCHED BY SOURCE) clauses are tried in order and the
      first whose condition holds acts; only the last clause of a group may omit its condition;
    * NOT MATCHED clauses see only the source, NOT MATCHED BY SOURCE clauses only the target.

    Conditions and expressions are Spark SQL text over the aliases ``target_alias`` and ``source_alias``.
    """

    target: str
    source: MergeSource
    condition: str
    clauses: tuple[MergeClause, ...]
    target_alias: str = "t"
    source_alias: str = "s"
    schema_evolution: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "clauses", tuple(self.clauses))
        check_clauses(self.clauses)

    def clauses_of(self, group: str) -> Sequence[tuple[int, MergeClause]]:
        """The clauses of one WHEN group with their 1-based positions in the spec."""
        return [(n, c) for n, c in enumerate(self.clauses, start=1) if c.group == group]

    def to_json(self) -> str:
        """The canonical JSON form (stable key order), the one ``spec_hash`` is taken over."""
        from airflow_provider_deltamerge.spec.json_form import spec_to_json

        return spec_to_json(self)

    @classmethod
    def from_json(cls, text: str) -> MergeSpec:
        """Read a spec written by ``to_json``; unknown versions and fields are refused."""
        from airflow_provider_deltamerge.spec.json_form import spec_from_json

        return spec_from_json(text)

    @property
    def spec_hash(self) -> str:
        """sha256 of the canonical JSON form: the identity of this merge in commits and retries."""
        from airflow_provider_deltamerge.spec.json_form import spec_hash

        return spec_hash(self)
