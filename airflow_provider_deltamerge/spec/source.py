"""Where a merge reads its source rows from: a path, a catalog table, or a Spark SQL query."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

SourceKind = Literal["path", "table", "query"]
PathFormat = Literal["parquet", "delta", "csv", "json", "orc"]
PATH_FORMATS: tuple[str, ...] = ("parquet", "delta", "csv", "json", "orc")


@dataclass(frozen=True)
class PathSource:
    """Files at a path or URI, read with Spark's reader for ``format`` and its ``options``."""

    path: str
    format: str = "parquet"
    options: tuple[tuple[str, str], ...] = ()
    kind: ClassVar[SourceKind] = "path"

    def __post_init__(self) -> None:
        pairs = self.options.items() if isinstance(self.options, Mapping) else self.options
        object.__setattr__(self, "options", tuple(sorted((str(k), str(v)) for k, v in pairs)))


@dataclass(frozen=True)
class TableSource:
    """A table known to the Spark session's catalog."""

    name: str
    kind: ClassVar[SourceKind] = "table"


@dataclass(frozen=True)
class QuerySource:
    """The rows of a Spark SQL query."""

    sql: str
    kind: ClassVar[SourceKind] = "query"


MergeSource = PathSource | TableSource | QuerySource
