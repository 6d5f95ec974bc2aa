"""Where a merge's target lives: a path or URI is its own place; a catalog table name is looked up."""

from __future__ import annotations

from urllib.parse import urlparse

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.exceptions import TargetTableError
from airflow_provider_deltamerge.spec.bound_values import quote_string
from airflow_provider_deltamerge.spec.names import format_path, split_column_path
from airflow_provider_deltamerge.spec.sql_parse import is_path_like

_LOCATION = "Location: "


def table_location(spark: SparkSession, target: str) -> str:
    """The path or URI of the Delta table that ``target`` is or names.

    A catalog name (``orders``, ``shop.orders``, ``catalog.shop.orders``) is looked up with SHOW TABLE
    EXTENDED, which reads the catalog entry without loading the table: a session without Delta's runtime
    cannot load a ``USING delta`` table (DESCRIBE fails with DATA_SOURCE_NOT_FOUND), but its entry still
    holds the location, and the engine reads and commits the table there itself.

    Raises:
        TargetTableError: TABLE_OR_VIEW_NOT_FOUND when the catalog has no table of that name (a temporary
            view is no table), or its entry has no location.
    """
    if is_path_like(target):
        return target
    parts = split_column_path(target)
    if parts is None:
        raise TargetTableError(
            f"The merge target {target!r} is neither a path nor a table name. Give the Delta table's path "
            "or URI (with a '/'), or its catalog name (e.g. shop.orders).",
            error_class="TABLE_OR_VIEW_NOT_FOUND",
        )
    *namespace, name = parts
    in_namespace = f" IN {format_path(tuple(namespace))}" if namespace else ""
    pattern = quote_string(name)
    try:
        rows = spark.sql(f"SHOW TABLE EXTENDED{in_namespace} LIKE '{pattern}'").collect()
    except AnalysisException as err:
        raise _not_found(target, err.getMessage()) from err
    found = [r for r in rows if r["tableName"].lower() == name.lower() and not r["isTemporary"]]
    if not found:
        raise _not_found(target, "the catalog has no such table")
    information: str = found[0]["information"]
    lines = information.splitlines()
    location = next((line[len(_LOCATION) :] for line in lines if line.startswith(_LOCATION)), "")
    if not location:
        raise _not_found(target, "its catalog entry has no location")
    return _as_deltalake_uri(location)


def _as_deltalake_uri(location: str) -> str:
    """Spark's ``file:/x`` form of a local location as a plain path, which deltalake reads as such."""
    parsed = urlparse(location)
    return parsed.path if parsed.scheme in ("", "file") else location


def _not_found(target: str, reason: str) -> TargetTableError:
    return TargetTableError(
        f"The table or view {target} cannot be found ({reason}). Check the name and the Spark session's "
        "catalog settings, or give the Delta table's path or URI as the target.",
        error_class="TABLE_OR_VIEW_NOT_FOUND",
    )
