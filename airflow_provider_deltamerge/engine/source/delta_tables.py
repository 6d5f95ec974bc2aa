"""Delta tables a merge source names by path, read through the provider's Delta reader: a Delta path
source, and the ``delta.`path``` tables of a source query, which plain Spark (no Delta runtime) cannot read.

A query's ``delta.`path``` references are found among sqlglot's tokens (Spark dialect) and replaced in the
query text by the names of temporary views over our reader's rows, by character positions: the rest of the
text reaches Spark as the author wrote it (sqlglot's printer would rewrite it, e.g. CAST as TRY_CAST).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from airflow_provider_deltamerge.delta.files.reader import read_table
from airflow_provider_deltamerge.delta.log.snapshot import read_snapshot
from airflow_provider_deltamerge.delta.log.table_features import MESSAGES, WRITER_NAME
from airflow_provider_deltamerge.exceptions import SourceError, TargetTableError, UnsupportedFeaturesError
from airflow_provider_deltamerge.spec.delta_messages import delta_message
from airflow_provider_deltamerge.spec.sql_parse import is_path_like

# Names of the temporary views over Delta tables of source queries; materialize_source.py recognizes the
# prefix in a source's plan as a read of one pinned snapshot, like a Delta path source.
VIEW_PREFIX = "__deltamerge_delta_"
_NAME_TOKENS = (TokenType.VAR, TokenType.IDENTIFIER)
_TEMPORAL_WORDS = ("VERSION", "SYSTEM_VERSION", "TIMESTAMP", "SYSTEM_TIME")


@dataclass(frozen=True)
class DeltaTableReference:
    """One ``delta.`path``` in a query: the path, and the characters ``[start, end)`` it spans."""

    path: str
    start: int
    end: int


def read_delta_table(spark: SparkSession, path: str, *, where: str = "the source path") -> DataFrame:
    """The rows of the latest version of the Delta table at ``path`` (its table columns only).

    Raises:
        SourceError: DELTA_TABLE_NOT_FOUND naming ``path``, which ``where`` says where to fix;
            DELTA_UNSUPPORTED_FEATURES_FOR_READ for a table with reader features ``deltalake`` cannot read.
    """
    try:
        snapshot = read_snapshot(path)
    except UnsupportedFeaturesError as err:
        raise SourceError(
            MESSAGES["DELTA_UNSUPPORTED_FEATURES_FOR_READ"].format(
                table=path, version=WRITER_NAME, features=", ".join(err.features)
            )
            + f" This provider reads {where} with deltalake, which cannot read these features. Register the "
            "table in the session's catalog and name it as the source: Spark reads a table source, with "
            "Delta's runtime where the session has it.",
            error_class="DELTA_UNSUPPORTED_FEATURES_FOR_READ",
        ) from err
    except TargetTableError as err:
        raise SourceError(
            delta_message("DELTA_TABLE_NOT_FOUND", tableName=path)
            + f" Check {where} (after templating); to read files that are not a Delta table, name their "
            f"format instead, e.g. parquet.`{path}`.",
            error_class="DELTA_TABLE_NOT_FOUND",
        ) from err
    return read_table(spark, snapshot)


def delta_table_references(sql: str) -> list[DeltaTableReference]:
    """The ``delta.`path``` table references of ``sql``, in text order.

    ``delta`` may be in any case or backtick-quoted; the path must look like a path or URI (contain ``/`` or
    ``\\``), which tells it from a column ``delta.`name``` of a relation aliased ``delta``. Names inside
    strings and comments, and longer dotted names (``cat.delta.`/x```, ``delta.`/x`.col``), are not
    references. SQL that sqlglot cannot tokenize has none: Spark then reports the syntax error itself.

    Raises:
        SourceError: a reference asks for an older version (``VERSION AS OF``, ``TIMESTAMP AS OF``).
    """
    try:
        tokens = Spark().tokenize(sql)
    except TokenError:
        return []
    found = [i for i in range(len(tokens) - 2) if _is_reference(tokens, i)]
    for i in found:
        if _time_travels(tokens, i + 3):
            raise SourceError(
                f"delta.`{tokens[i + 2].text}` in the source query asks for an older version of the table "
                "(... AS OF), which the provider's reader does not read there: it reads the latest version. "
                "Remove the AS OF clause.",
                error_class="DELTAMERGE_SOURCE_TIME_TRAVEL_REFUSED",
            )
    return [DeltaTableReference(tokens[i + 2].text, tokens[i].start, tokens[i + 2].end + 1) for i in found]


def _is_reference(tokens: Sequence[Token], i: int) -> bool:
    db, dot, name = tokens[i : i + 3]
    return (
        db.token_type in _NAME_TOKENS
        and db.text.lower() == "delta"
        and dot.token_type == TokenType.DOT
        and name.token_type == TokenType.IDENTIFIER
        and is_path_like(name.text)
        and not _is_dot(tokens, i - 1)
        and not _is_dot(tokens, i + 3)
    )


def _time_travels(tokens: Sequence[Token], i: int) -> bool:
    """Whether Spark's temporal clause (``[FOR] VERSION|TIMESTAMP|SYSTEM_... AS OF``) starts at ``i``."""
    words = [t.text.upper() for t in tokens[i : i + 4]]
    if words[:1] == ["FOR"]:
        words = words[1:]
    return len(words) >= 3 and words[0] in _TEMPORAL_WORDS and words[1:3] == ["AS", "OF"]


def _is_dot(tokens: Sequence[Token], i: int) -> bool:
    return 0 <= i < len(tokens) and tokens[i].token_type == TokenType.DOT


def replace_references(sql: str, references: Sequence[DeltaTableReference], names: Mapping[str, str]) -> str:
    """``sql`` with each reference replaced by ``names[reference.path]``, every other character kept."""
    pieces, done = [], 0
    for reference in references:
        pieces += [sql[done : reference.start], names[reference.path]]
        done = reference.end
    return "".join(pieces) + sql[done:]


def run_source_query(spark: SparkSession, sql: str) -> DataFrame:
    """The rows of the Spark SQL query ``sql``, its ``delta.`path``` tables read by the provider's reader.

    Each distinct path is read once, at its latest version, so a query naming a table twice (a self-join)
    sees one snapshot. Its view's name is unique to this call, and the view is dropped as soon as Spark has
    analyzed the query: the DataFrame keeps the analyzed plan, so nothing is left in the session and two
    merges in one session (e.g. in threads) can never see each other's views.

    Raises:
        SourceError: a referenced path holds no Delta table.
        AnalysisException: Spark cannot analyze the query (the caller words it).
    """
    references = delta_table_references(sql)
    views = {path: f"{VIEW_PREFIX}{uuid.uuid4().hex}" for path in dict.fromkeys(r.path for r in references)}
    try:
        for path, view in views.items():
            read_delta_table(spark, path, where=f"delta.`{path}` in the source query").createTempView(view)
        return spark.sql(replace_references(sql, references, views))
    finally:
        for view in views.values():
            spark.catalog.dropTempView(view)
