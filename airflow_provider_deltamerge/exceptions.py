"""Errors of a merge, one class per phase, each carrying Delta's error class and a fix."""

from __future__ import annotations


class DeltaMergeError(Exception):
    """A merge could not be done; the Delta table is unchanged."""

    phase = "merge"

    def __init__(self, message: str, *, error_class: str | None = None) -> None:
        self.error_class = error_class
        self.message = message
        super().__init__(f"[{error_class}] {message}" if error_class else message)


class MergeSpecError(DeltaMergeError):
    """The merge spec is not a valid MERGE (clause grammar, JSON form, SQL text)."""

    phase = "spec"


class ClauseResolutionError(DeltaMergeError):
    """A condition or assignment does not resolve against the target and source schemas."""

    phase = "resolution"


class SchemaEvolutionError(DeltaMergeError):
    """The source schema cannot be merged into the target schema."""

    phase = "schema_evolution"


class SourceError(DeltaMergeError):
    """The merge source cannot be read."""

    phase = "source"


class TargetTableError(DeltaMergeError):
    """The target is not a Delta table the engine can merge into."""

    phase = "target"


class MergeExecutionError(DeltaMergeError):
    """The merge failed while its files were computed (e.g. multiple source rows matched a target row)."""

    phase = "execution"


class MergeCommitError(DeltaMergeError):
    """The merge's files could not be committed to the Delta log."""

    phase = "commit"


class DeltaRuntimeError(DeltaMergeError):
    """The Spark session lacks Delta Lake's own runtime, which the delta-spark backend needs."""

    phase = "delta_runtime"


class MetricBoundsError(DeltaMergeError):
    """Declared metric bounds or commit criteria of a check or sensor are not valid (a DAG-parse error)."""

    phase = "bounds"


ERRORS_BY_PHASE: dict[str, type[DeltaMergeError]] = {
    cls.phase: cls
    for cls in (
        DeltaMergeError,
        MergeSpecError,
        ClauseResolutionError,
        SchemaEvolutionError,
        SourceError,
        TargetTableError,
        MergeExecutionError,
        MergeCommitError,
        DeltaRuntimeError,
    )
}
