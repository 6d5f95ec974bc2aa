"""What resolution asks of an analyzed plan, answered on a Spark Connect session from the plan's text.

A classic session walks the JVM's analyzed plan through py4j; a Connect client gets only Spark's explained
text. Analysing a projection gives its top node and any subquery; ordering by the expressions tells whether
they are deterministic, because Spark's analyzer pulls a non-deterministic sort key out into a projection
column named ``_nondeterministic`` (``PullOutNondeterministic``). Only empty frames are analysed: no job.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

_ANALYZED = "== Analyzed Logical Plan =="
# The name PullOutNondeterministic gives a non-deterministic sort key's projected column
_NONDETERMINISTIC = "_nondeterministic"
_OPTIMIZED = "== Optimized Logical Plan =="
# How Spark prints a scalar, EXISTS or IN subquery in a plan: scalar-subquery#12, exists#12, list#12.
_SUBQUERY = re.compile(r"\b(?:scalar-subquery|exists|list|lateral-subquery)#\d+")


def analyzed_plan(frame: DataFrame) -> str:
    """``frame``'s analyzed plan as Spark prints it, without its schema line.

    Raises:
        AnalysisException: the frame does not analyse.
    """
    connect_frame: Any = frame  # a Connect DataFrame; classic ones have no _explain_string
    text = str(connect_frame._explain_string(extended=True))
    return text.split(_ANALYZED, 1)[1].split(_OPTIMIZED, 1)[0].strip().split("\n", 1)[1]


def top_node(plan: str) -> str:
    """The name of the plan's top node (``Project``, ``Aggregate``)."""
    return plan.split(None, 1)[0]


def has_subquery(plan: str) -> bool:
    return _SUBQUERY.search(plan) is not None


def projection_plan(frame: DataFrame, texts: Sequence[str]) -> tuple[str, bool]:
    """The analyzed plan of the SQL expressions ``texts`` over ``frame``, and whether all of them are
    deterministic: one analysis of them over the frame ordered by them, where Spark can order by them all;
    else them alone, with False: the safe answer (a value is then evaluated once, not twice).

    Raises:
        AnalysisException: the expressions do not analyse over ``frame``.
    """
    try:
        plan = analyzed_plan(frame.orderBy(*(F.expr(text) for text in texts)).selectExpr(*texts))
    except AnalysisException:
        return analyzed_plan(frame.selectExpr(*texts)), False
    return plan, _NONDETERMINISTIC not in plan
