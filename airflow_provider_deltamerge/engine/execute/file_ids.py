"""A long that names each table file in phase 1's shuffles, instead of Spark's URI of the file.

Where phase 1 counts matches per target row (the multiple-match count), it shuffles every row by its file
and index, through the count and, for a source too big to broadcast (a full sync: 10M rows each side),
through the join too. Spark's URI of a file is a string of a hundred bytes or more; a long is 8. The id is
Spark's ``xxhash64`` of the URI, salted until no two of the scanned files share one, so it names a file
exactly; the ids of the files are worked out on the driver (a local relation: no Spark job) and map the
rows phase 1 collects back to their files. Where nothing is counted per row, rows keep the URI.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from airflow_provider_deltamerge.delta.files.reader import FILE_COLUMN
from airflow_provider_deltamerge.exceptions import MergeExecutionError
from airflow_provider_deltamerge.spec.names import hidden_name

FILE_ID = hidden_name("file_id")


@dataclass(frozen=True)
class FileIds:
    """The id of each scanned file (``column`` computes it from a row's ``FILE_COLUMN``)."""

    salt: int
    uris: Mapping[int, str]  # by id

    def column(self) -> Column:
        """The id of the row's file, from its ``FILE_COLUMN``."""
        return _id_of(F.col(FILE_COLUMN), self.salt)

    def uri(self, file_id: int) -> str:
        """Spark's URI of the file with ``file_id``.

        Raises:
            MergeExecutionError: no scanned file has that id (never expected: rather fail than rewrite a
                file without its rows).
        """
        try:
            return self.uris[file_id]
        except KeyError:
            raise MergeExecutionError(
                f"Spark read a file the engine cannot find in the table's log (file id {file_id})",
                error_class="DELTAMERGE_FILE_NOT_IN_LOG",
            ) from None


def file_ids(spark: SparkSession, uris: Collection[str]) -> FileIds:
    """Ids for the files Spark names ``uris``, distinct among them (a 64-bit hash: the first salt almost
    always does)."""
    listed = list(uris)
    names = spark.createDataFrame(pa.table({"uri": pa.array(listed, pa.string())}))
    salt = 0
    while True:
        ids = [row[0] for row in names.select(_id_of(F.col("uri"), salt)).collect()]
        if len(set(ids)) == len(ids):
            return FileIds(salt, dict(zip(ids, listed, strict=True)))
        salt += 1


def _id_of(uri: Column, salt: int) -> Column:
    return F.xxhash64(uri, F.lit(salt))
