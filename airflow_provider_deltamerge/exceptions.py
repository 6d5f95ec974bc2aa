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


class UnsupportedFeaturesError(TargetTableError):
    """The target uses table features this engine does not write (DELTA_UNSUPPORTED_FEATURES_FOR_WRITE)."""

    def __init__(self, message: str, *, features: tuple[str, ...]) -> None:
        super().__init__(message, error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
        self.features = features  # by Delta's names: what sends the table to Delta's runtime


class MergeExecutionError(DeltaMergeError):
    """The merge failed while its files were computed (e.g. multiple source rows matched a target row)."""

    phase = "execution"


class MergeCommitError(DeltaMergeError):
    """The merge's files could not be committed to the Delta log."""

    phase = "commit"


class MergeGuardError(DeltaMergeError):
    """The merge's metrics broke its declared bounds before the commit: nothing was committed."""

    phase = "guard"


class DeltaRuntimeError(DeltaMergeError):
    """The Spark session lacks Delta Lake's own runtime, which the delta-spark backend needs."""

    phase = "delta_runtime"


class MetricBoundsError(DeltaMergeError):
    """Declared metric bounds or commit criteria of a check or sensor are not valid (a DAG-parse error)."""

    phase = "bounds"


class StorageCredentialsError(DeltaMergeError):
    """The storage connection's credentials could not be obtained (e.g. a role could not be assumed)."""

    phase = "credentials"


class StorageConnectorError(DeltaMergeError):
    """Spark has no Hadoop connector for a path's object store (S3A, ABFS, GCS)."""

    phase = "connector"


class StorageAccessError(DeltaMergeError):
    """An object store refused the connection's credentials, has no such bucket, or did not answer."""

    phase = "storage"


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
        MergeGuardError,
        DeltaRuntimeError,
        StorageConnectorError,
        StorageAccessError,
    )
}


# Errors that another try of the same task may not meet: the store or the cluster failed, a concurrent
# writer kept winning, credentials could not be had (a role service down, a key being rotated), or what the
# merge reads is not there yet. Every other error (the spec, a column, a multiple match, a cast, a
# constraint, a table feature) comes back on every try.
_TRANSIENT_PHASES = frozenset({"merge", "commit", "credentials"})
_TRANSIENT_CLASSES = frozenset(
    {"PATH_NOT_FOUND", "DELTA_TABLE_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND", "DELTAMERGE_STORAGE_UNAVAILABLE"}
)
_TRANSIENT_CLASS_PREFIXES = ("FAILED_READ_FILE",)


def is_final(error: DeltaMergeError) -> bool:
    """Whether ``error`` will come back on every retry, so the task should fail without retrying.

    Transient: commit failures (``DELTA_CONCURRENT_MODIFICATION``, storage), a source or target that is not
    there yet, a file that could not be read, and any execution failure Spark gave no class (a lost
    executor, say). Final: everything else.
    """
    if error.phase in _TRANSIENT_PHASES or error.error_class in _TRANSIENT_CLASSES:
        return False
    if error.error_class is None:
        return error.phase not in ("execution", "source")
    return not error.error_class.startswith(_TRANSIENT_CLASS_PREFIXES)
