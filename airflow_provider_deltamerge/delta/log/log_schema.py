"""Schemas read without Spark for pre-flight checks: a Delta table's from its log, parquet's from a footer;
and whether a local path source of any other format is there at all.

Both come back in the Delta protocol's JSON schema form, so the spec layer can read them without
importing deltalake or pyarrow (``TableColumns.from_delta_schema``).
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

import pyarrow as pa

from airflow_provider_deltamerge.delta.log.log_reader import LogReader
from airflow_provider_deltamerge.delta.log.newest_actions import newest_action
from airflow_provider_deltamerge.delta.log.parquet_source_schema import parquet_source_schema
from airflow_provider_deltamerge.delta.log.snapshot import open_table
from airflow_provider_deltamerge.exceptions import SourceError, TargetTableError, UnsupportedFeaturesError
from airflow_provider_deltamerge.spec.delta_messages import delta_message

# Wildcards Python's glob reads as Hadoop's globbing (which Spark's paths use) does.
_GLOB = re.compile(r"[*?\[]")
# Hadoop glob syntax Python's glob does not know: such a path is left to the job rather than misjudged.
_HADOOP_ONLY_GLOB = re.compile(r"[{}\\]|\[\^")


def read_table_schema(
    path: str, *, storage_options: dict[str, str] | None = None, refuse_unsupported: bool = False
) -> dict[str, Any]:
    """The current schema of the Delta table at ``path``, from its log (last checkpoint and later commits).

    A table ``deltalake`` cannot open (reader features such as geospatial or catalogManaged, which send a
    merge to Delta's runtime) gives the schema of the log's newest metadata action instead, unless
    ``refuse_unsupported`` (the merge can only run on this engine, which refuses such a table).

    Raises:
        TargetTableError: ``DELTA_TABLE_NOT_FOUND`` when there is no Delta table at ``path``.
        UnsupportedFeaturesError: ``refuse_unsupported`` and ``deltalake`` cannot open the table.
    """
    try:
        table = open_table(path, storage_options=storage_options)
    except UnsupportedFeaturesError:
        if refuse_unsupported:
            raise
        reader = LogReader(path, storage_options)
        metadata = newest_action(reader, reader.latest_version(), "metaData")
        if metadata is None:  # no schema to check against: the refusal is all there is to say
            raise
        return dict(json.loads(metadata["schemaString"]))
    return json.loads(table.schema().to_json())


def read_path_schema(
    path: str, file_format: str, *, storage_options: dict[str, str] | None = None
) -> dict[str, Any] | None:
    """The schema of a path source when it is cheap to know: a Delta table's log or a parquet footer.

    Returns:
        The schema in Delta's JSON form, or ``None`` for formats whose schema needs a scan (csv, json, orc)
        or for a path on remote storage.

    Raises:
        SourceError: ``PATH_NOT_FOUND`` when a local path (or glob) of any format names nothing.
    """
    if file_format == "delta":
        try:
            return read_table_schema(path, storage_options=storage_options)
        except TargetTableError as err:
            raise SourceError(
                f"Delta table {path} doesn't exist. Check the source path.",
                error_class="DELTA_TABLE_NOT_FOUND",
            ) from err
    local = local_path(path)
    if local is None or storage_options:
        return None
    # Whether the path is there is one stat: a missing extract fails here in a second, not minutes later in
    # a started Spark job.
    check_path_exists(path, local)
    if file_format != "parquet" or _GLOB.search(local):
        # Spark infers a csv, json or orc schema with a scan of the data.
        return None
    try:
        # One footer and the directories' names; no row is read.
        return parquet_source_schema(local)
    except FileNotFoundError as err:
        raise path_not_found(path) from err
    except pa.ArrowInvalid as err:
        # Spark's words for the same file, so pre-flight and the job say one thing.
        raise SourceError(
            f"Encountered error while reading file {path}. Could not read footer: {err}. Check that the "
            "source files are complete parquet files (a truncated upload, or another format?).",
            error_class="FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER",
        ) from err


def local_path(path: str) -> str | None:
    """``path`` as a path of this machine (a ``file:`` URI's path), or None for remote storage."""
    if path.startswith("file:"):
        return url2pathname(urlparse(path).path)
    return None if "://" in path else path


def check_path_exists(path: str, local: str) -> None:
    """Raise ``PATH_NOT_FOUND`` unless ``local`` (``path`` on this machine) exists, or, as a glob, matches.

    Raises:
        SourceError: ``PATH_NOT_FOUND``, naming ``path``.
    """
    if _HADOOP_ONLY_GLOB.search(local):
        return
    if not (glob.glob(local) if _GLOB.search(local) else os.path.exists(local)):
        raise path_not_found(path)


def path_not_found(path: str) -> SourceError:
    """Spark's error for a source path that names nothing, with what to check."""
    return SourceError(
        delta_message("PATH_NOT_FOUND", path=path) + " Check the source path after templating (is the "
        "upstream extract for this date written?); a glob must match at least one file.",
        error_class="PATH_NOT_FOUND",
    )
