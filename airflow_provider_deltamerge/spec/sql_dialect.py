"""The Spark SQL dialect every parse of the spec's SQL uses: sqlglot's Spark, reading what Spark 4 reads.

sqlglot 30's Spark dialect reads ``:`` only as a parameter marker, so Spark 4's VARIANT path extraction
(``t.v:a.b[0]::int``, the shorthand of ``variant_get``) fails to parse there. Parsed trees only find the
statement's structure and its column references; the text that reaches Spark is always the author's.
"""

from __future__ import annotations

from sqlglot.dialects.spark import Spark
from sqlglot.parsers.spark import SparkParser


class SparkSql(Spark):
    """sqlglot's Spark dialect with ``column:path`` read as a VARIANT path extraction, as Spark 4 does."""

    class Parser(SparkParser):
        # After a column, ``:key.key[0]['key']`` is a path into it (a JSONExtract node whose only column is
        # the VARIANT one); ``::type`` after it casts the extracted value; ``v:a:b`` is two extractions.
        COLON_IS_VARIANT_EXTRACT = True
        COLON_CHAIN_IS_SINGLE_EXTRACT = False
