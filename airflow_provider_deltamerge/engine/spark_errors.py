"""Spark's errors cut down to what a person reads: the error class and first sentence, never the JVM stack.

A Spark failure reaches Python as a ``PySparkException`` or, where PySpark does not convert it, as a
``Py4JJavaError`` whose text is the whole Java cause chain (60 to 200 lines). The useful part is the
outermost error's class and first line, plus the innermost Spark error when it names something else (a
read of a file fails because a CSV record is malformed): that is what the task shows. The full chain
goes to the debug log.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

log = logging.getLogger("airflow_provider_deltamerge")
# Spark prefixes a message with its class ("[FAILED_READ_FILE.NO_HINT] Encountered ...") and ends it with the
# SQLSTATE and, for analysis errors, the plan: both are noise in a task's error.
_CLASS_PREFIX = re.compile(r"^\s*(?:[\w.]+(?:Exception|Error):\s*)?\[([A-Z0-9_.]+)\]\s*")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+;?.*$", re.DOTALL)
_MAX_CHAIN = 10


@dataclass(frozen=True)
class SparkFailure:
    """What a Spark error says: its class (``None`` if it has none) and its first sentence(s)."""

    error_class: str | None
    message: str

    def __str__(self) -> str:
        return self.message


def summarize(err: PySparkException | Py4JJavaError) -> SparkFailure:
    """The class and first line of ``err``, with its innermost Spark cause when that says more."""
    log.debug("Spark error in full", exc_info=err)
    chain = _chain(err)
    outer_class, outer = chain[0]
    inner = next(((c, m) for c, m in reversed(chain[1:]) if c is not None and c != outer_class), None)
    message = outer if inner is None else f"{outer} Caused by [{inner[0]}] {inner[1]}"
    return SparkFailure(outer_class, message)


def _chain(err: PySparkException | Py4JJavaError) -> list[tuple[str | None, str]]:
    """(class, first line) of ``err`` and of each Java cause under it.

    A PySpark exception converted from the JVM keeps the Java throwable (``_origin``): its own message is
    the one to read, because PySpark's ``getMessage()`` re-renders the text from Spark's error catalogue,
    which lacks the classes of libraries on the classpath (Delta's ``DELTA_*`` come out as
    ``[INTERNAL_ERROR] Cannot find main error class``).
    """
    throwable = err.java_exception if isinstance(err, Py4JJavaError) else getattr(err, "_origin", None)
    found: list[tuple[str | None, str]] = []
    while throwable is not None and len(found) < _MAX_CHAIN:
        found.append(_first_line(str(throwable.getMessage() or throwable.toString())))
        throwable = throwable.getCause()
    if found:
        return found
    if isinstance(err, Py4JJavaError):
        return [_first_line(str(err))]
    return [(err.getCondition(), _first_line(err.getMessage())[1])]


def _first_line(text: str) -> tuple[str | None, str]:
    """The class a Spark message starts with, and the message's first line without class and SQLSTATE."""
    line = next((part.strip() for part in text.strip().splitlines() if part.strip()), "")
    prefix = _CLASS_PREFIX.match(line)
    error_class = prefix.group(1) if prefix else None
    line = line[prefix.end() :] if prefix else line
    return error_class, _SQLSTATE.sub("", line).strip()
