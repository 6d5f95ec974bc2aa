"""Tables with writer features deltalake cannot write (column defaults, generated columns): the log is
crafted by hand (``tests/delta/helpers.craft_table``) and the first rows written by the engine itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.spec import MergeSpec, PathSource, insert
from tests.delta.helpers import craft_table


def parquet_source(tmp_path: Path, name: str, **columns: pa.Array) -> str:
    """A parquet file of ``columns`` to merge from."""
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table(columns), path)
    return str(path)


def feature_table(
    spark: SparkSession, tmp_path: Path, feature: str, fields: Sequence[Mapping[str, Any]], **rows: pa.Array
) -> str:
    """A table whose protocol lists writer ``feature`` (writer version 7), holding ``rows`` (inserted into
    their columns only: the others get their defaults or generated values)."""
    target = craft_table(tmp_path / "t", writer=7, writer_features=[feature], fields=fields)
    first = parquet_source(tmp_path, "first", **rows)
    spec = MergeSpec(
        target=target,
        source=PathSource(first),
        condition="t.id = s.id",
        clauses=(insert({name: f"s.{name}" for name in rows}),),
    )
    run_merge(spark, spec)
    return target
