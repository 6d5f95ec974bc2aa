"""Schemas read without Spark for pre-flight checks: a Delta table's from its log, parquet's from a footer.

Both come back in the Delta protocol's JSON schema form, so the spec layer can read them without
importing deltalake or pyarrow (``TableColumns.from_delta_schema``).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import Schema

from airflow_provider_deltamerge.delta.snapshot import open_table
from airflow_provider_deltamerge.exceptions import SourceError, TargetTableError


def read_table_schema(path: str, *, storage_options: dict[str, str] | None = None) -> dict[str, Any]:
    """The current schema of the Delta table at ``path``, from its log (last checkpoint and later commits).

    Raises:
        TargetTableError: ``DELTA_TABLE_NOT_FOUND`` when there is no Delta table at ``path``.
    """
    table = open_table(path, storage_options=storage_options)
    return json.loads(table.schema().to_json())


def read_path_schema(
    path: str, file_format: str, *, storage_options: dict[str, str] | None = None
) -> dict[str, Any] | None:
    """The schema of a path source when it is cheap to know: a Delta table's log or a parquet footer.

    Returns:
        The schema in Delta's JSON form, or ``None`` for formats whose schema needs a scan (csv, json, orc)
        or for a parquet path on remote storage.

    Raises:
        SourceError: ``PATH_NOT_FOUND`` when a local parquet path does not exist.
    """
    if file_format == "delta":
        try:
            return read_table_schema(path, storage_options=storage_options)
        except TargetTableError as err:
            raise SourceError(
                f"Delta table {path} doesn't exist. Check the source path.",
                error_class="DELTA_TABLE_NOT_FOUND",
            ) from err
    if file_format != "parquet" or storage_options or "://" in path:
        return None
    try:
        # Dataset discovery lists the files and reads one footer; no row is read.
        arrow_schema = ds.dataset(path, format="parquet", partitioning="hive").schema
    except FileNotFoundError as err:
        raise SourceError(
            f"Path does not exist: {path}. Check the source path (after templating).",
            error_class="PATH_NOT_FOUND",
        ) from err
    except pa.ArrowInvalid as err:
        # Spark's words for the same file, so pre-flight and the job say one thing.
        raise SourceError(
            f"Encountered error while reading file {path}. Could not read footer: {err}. Check that the "
            "source files are complete parquet files (a truncated upload, or another format?).",
            error_class="FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER",
        ) from err
    return json.loads(Schema.from_arrow(arrow_schema).to_json())
