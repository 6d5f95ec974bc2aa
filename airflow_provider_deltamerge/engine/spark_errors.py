"""Spark's errors cut down to what a person reads: the error class and first sentence, never the JVM stack.

A Spark failure reaches Python as a ``PySparkException`` or, where PySpark does not convert it, as a
``Py4JJavaError`` whose text is the whole Java cause chain (60 to 200 lines). The useful part is the
outermost classed error's class and first sentence, plus the innermost Spark error when it names something
else (a read of a file fails because a CSV record is malformed; a write task fails because Delta refused
a value): that is what the task shows. The full chain goes to the debug log.
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
# A line that ends a sentence: a period (! ?) at its end, or before the SQLSTATE or "; line" of analysis.
_SENTENCE_END = re.compile(r"[.!?]\s*(?:$|SQLSTATE|;)")
_MAX_SENTENCE_LINES = 4


@dataclass(frozen=True)
class SparkFailure:
    """What a Spark error says: its class (``None`` if it has none), its first sentence(s), and every error
    class of its cause chain, outermost first (Delta's class may sit under a wrapper of Spark's)."""

    error_class: str | None
    message: str
    classes: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.message


def summarize(err: PySparkException | Py4JJavaError) -> SparkFailure:
    """The class and first sentence of ``err``, with its innermost Spark cause when that says more.

    A wrapper without a class (the ``SparkException`` that aborted a job, whose first line is the first line
    of a task's stack trace) gives way to the first error under it that has one.
    """
    log.debug("Spark error in full", exc_info=err)
    chain = _chain(err)
    start = next((i for i, (error_class, _) in enumerate(chain) if error_class is not None), 0)
    outer_class, outer = chain[start]
    causes = reversed(chain[start + 1 :])
    inner = next(((c, m) for c, m in causes if c is not None and c != outer_class), None)
    message = outer if inner is None else f"{outer} Caused by [{inner[0]}] {inner[1]}"
    return SparkFailure(outer_class, message, tuple(c for c, _ in chain if c is not None))


def _chain(err: PySparkException | Py4JJavaError) -> list[tuple[str | None, str]]:
    """(class, first sentence) of ``err`` and of each Java cause under it, outermost first.

    Three shapes reach Python:

    * a ``Py4JJavaError``, where PySpark does not convert the JVM's class (a ``SparkException`` that aborted
      a job): its ``java_exception`` and the Java causes under it;
    * a PySpark exception converted from the JVM, which keeps the Java throwable (``_origin``): its own
      message is the one to read, because PySpark's ``getMessage()`` re-renders the text from Spark's error
      catalogue, which lacks the classes of libraries on the classpath (Delta's ``DELTA_*`` come out as
      ``[INTERNAL_ERROR] Cannot find main error class``);
    * one built from a description instead, with no origin (delta-spark's conflict exceptions: its
      ``delta/exceptions/captured.py`` passes the Java text, stack trace and cause), whose ``getMessage()``
      is empty and ``getCondition()`` None: its text, ``str()``, which starts with the description.
    """
    throwable = err.java_exception if isinstance(err, Py4JJavaError) else getattr(err, "_origin", None)
    found: list[tuple[str | None, str]] = []
    while throwable is not None and len(found) < _MAX_CHAIN:
        found.append(_first_line(str(throwable.getMessage() or throwable.toString())))
        throwable = throwable.getCause()
    if found:
        return found
    error_class, line = _first_line(str(err))
    if error_class is None and isinstance(err, PySparkException):
        error_class = err.getCondition()
    return [(error_class, line)]


def first_sentence(text: str) -> str:
    """The first sentence of a Spark or Delta message, without its class and SQLSTATE."""
    return _first_line(text)[1]


def _first_line(text: str) -> tuple[str | None, str]:
    """The class a Spark message starts with, and the message's first sentence without class and SQLSTATE.

    Delta's error catalogue breaks a long sentence over lines ("... attempted to modify the same" / "target
    row in the Delta table ..."), so the lines are joined until one ends a sentence; a stack frame, a blank
    line or the SQLSTATE ends the message too.
    """
    lines: list[str] = []
    for part in text.strip().splitlines():
        line = part.strip()
        if not line or line.startswith(("at ", "JVM stacktrace")) or (lines and _CLASS_PREFIX.match(line)):
            break
        lines.append(line)
        if _SENTENCE_END.search(line) or _SQLSTATE.search(line) or len(lines) == _MAX_SENTENCE_LINES:
            break
    joined = " ".join(lines)
    prefix = _CLASS_PREFIX.match(joined)
    error_class = prefix.group(1) if prefix else None
    joined = joined[prefix.end() :] if prefix else joined
    return error_class, _SQLSTATE.sub("", joined).strip()
