"""Spark SQL text for names and types, for projections the engine hands to Spark as text.

A projection given as SQL text is parsed once on the JVM; the same projection built from PySpark Columns
costs several py4j round trips per column, which for a wide table is most of a small merge's driver time.
"""

from __future__ import annotations

from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from airflow_provider_deltamerge.spec.names import quote_name


def sql_name(name: str) -> str:
    """``name`` backquoted: one identifier whatever it holds (a keyword, a space, a backtick, a dot)."""
    return f"`{quote_name(name)}`"


def sql_type(data_type: DataType) -> str:
    """Spark SQL's name of an atomic type (``bigint``, ``decimal(9,2)``, ``timestamp_ntz``).

    Raises:
        TypeError: for a struct, array or map, whose simple string leaves field names unquoted.
    """
    if isinstance(data_type, StructType | ArrayType | MapType):
        raise TypeError(f"{data_type.simpleString()} is not an atomic type")
    return data_type.simpleString()
