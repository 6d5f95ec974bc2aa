"""Every deliberate difference between our engine and Delta Lake's own MERGE, in one list, each with its
reason and the exact shape it may take: the differential suite (tests/engine/test_differential_delta.py)
accepts a case whose outcomes differ only as one of these says, and tests/engine/test_delta_differences.py
shows each on a case where it does differ. docs/semantics.md says the same for users.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_deltamerge import metrics as m
from tests.engine.delta_differential import Outcome
from tests.engine.delta_outcomes import error_catalogue, first_sentence

CHANGES = (m.NUM_TARGET_ROWS_INSERTED, m.NUM_TARGET_ROWS_UPDATED, m.NUM_TARGET_ROWS_DELETED)


@dataclass(frozen=True)
class Difference:
    """One deliberate difference: why, and whether Delta's and our outcome differ exactly so."""

    name: str
    reason: str
    differs_so: Callable[[Outcome, Outcome], bool]


def _only_files_a_clause_acts_on(delta: Outcome, ours: Outcome) -> bool:
    """Same rows and schema; every count but the copied and output rows the same; we copy fewer rows (those
    of the files Delta rewrote and we left alone), and write the same rows besides; where nothing changed,
    Delta commits a rewrite of its candidate files and we commit no version."""
    if delta.error_class or ours.error_class or (delta.rows, delta.schema) != (ours.rows, ours.schema):
        return False
    if delta.version == ours.version:
        kept = {m.NUM_TARGET_ROWS_COPIED, m.NUM_OUTPUT_ROWS}
        same = all(delta.counts.get(k) == ours.counts.get(k) for k in delta.counts.keys() - kept)
        copied_less = ours.counts.get(m.NUM_TARGET_ROWS_COPIED, 0) < delta.counts.get(
            m.NUM_TARGET_ROWS_COPIED, 0
        )
        written = [
            o.counts.get(m.NUM_OUTPUT_ROWS, 0) - o.counts.get(m.NUM_TARGET_ROWS_COPIED, 0)
            for o in (delta, ours)
        ]
        return same and copied_less and written[0] == written[1]
    nothing_changed = all(delta.counts.get(k) == 0 for k in CHANGES)
    return delta.version == (ours.version or 0) + 1 and nothing_changed and not ours.counts


def _no_protocol_change(delta: Outcome, ours: Outcome) -> bool:
    """Delta committed; we refused with DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT and left the table."""
    return (
        delta.error_class is None
        and delta.version is not None
        and ours.error_class == "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT"
    )


DIFFERENCES = (
    Difference(
        "only-files-a-clause-acts-on",
        "Delta's classic executor rewrites every candidate file that holds a matched row (every file its "
        "pruning keeps when a NOT MATCHED BY SOURCE clause is there), copying rows no clause acts on; the "
        "engine rewrites only the files holding a row some clause acts on. The rows are the same; "
        "numTargetRowsCopied and numOutputRows are smaller and true for what was written, and a merge that "
        "changes no row commits no version, where Delta commits a rewrite.",
        _only_files_a_clause_acts_on,
    ),
    Difference(
        "no-protocol-change",
        "A merge whose schema evolution adds a column of a type that needs a table feature the protocol "
        "lacks (VARIANT on a table without variantType): Delta's MERGE adds the feature to the protocol in "
        "its commit; the engine's commits never change the protocol, so it refuses with "
        "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT, naming the ALTER TABLE that enables the feature, and "
        "the table stays as it was.",
        _no_protocol_change,
    ),
)


# The parameters of Spark's and Delta's error messages that hold an expression of the statement.
EXPRESSION_PARAMETERS = frozenset({"expression", "sqlExpr", "cond", "condition", "expr"})


def expressions_as_written(delta: Outcome, ours: Outcome) -> bool:
    """Whether our error's first sentence is Delta's but for the expressions in it: Delta prints Spark's
    normalized form of an expression (``(t.amount * CAST(2 AS DECIMAL(1,0)))``), the engine the clause's
    text (``t.amount * 2``); every other value (types, columns) must be Delta's."""
    if delta.error_class is None or delta.message is None or delta.error_class not in error_catalogue():
        return False
    template = first_sentence(" ".join(error_catalogue()[delta.error_class]["message"]))
    parts = re.split(r"<(\w+)>", template)
    names = parts[1::2]
    if not set(names) & EXPRESSION_PARAMETERS:
        return False
    reading = "".join(re.escape(part) if i % 2 == 0 else f"(?P<p{i}>.+?)" for i, part in enumerate(parts))
    values = re.fullmatch(reading, first_sentence(delta.message))
    if values is None:
        return False
    expected = "".join(
        re.escape(part)
        if i % 2 == 0
        else ".+?"
        if part in EXPRESSION_PARAMETERS
        else re.escape(values.group(f"p{i}"))
        for i, part in enumerate(parts)
    )
    return re.search(expected, ours.message or "") is not None


MESSAGE_DIFFERENCES = (
    Difference(
        "expressions-as-written",
        "An error that quotes an expression of the statement quotes it as the clause writes it, where Delta "
        "prints Spark's normalized form (casts and parentheses added); the class, the sentence and every "
        "other value in it are Delta's.",
        expressions_as_written,
    ),
)


def explained_by(delta: Outcome, ours: Outcome) -> Difference | None:
    """The deliberate difference ``ours`` shows against ``delta``; None if they agree or differ otherwise."""
    if delta.observed() == ours.observed():
        return None
    return next((d for d in DIFFERENCES if d.differs_so(delta, ours)), None)


def message_explained_by(delta: Outcome, ours: Outcome) -> Difference | None:
    """The deliberate difference our error's message shows against Delta's, if any."""
    return next((d for d in MESSAGE_DIFFERENCES if d.differs_so(delta, ours)), None)


# Delta's runtime's own internal errors (INTERNAL_ERROR, e.g. its analyzer's "Found the unresolved Cast")
# leave no outcome of Delta's to compare with: the engine's outcome must still be one of these.
INTERNAL_ERROR_CLASSES = frozenset({"INTERNAL_ERROR", "Py4JJavaError"})


def _a_classed_error(delta: Outcome, ours: Outcome) -> bool:
    """Our error is a product error: a class of Spark's or Delta's (not an internal one), no Java stack."""
    return (
        ours.error_class is not None
        and ours.error_class not in INTERNAL_ERROR_CLASSES
        and "\tat " not in (ours.message or "")
    )


WHEN_DELTA_FAILS_INTERNALLY = (
    Difference(
        "a-classed-error",
        "Delta's runtime fails the statement with an internal error of its own; the engine refuses it with "
        "an error of Spark's or Delta's class in their words, and no stack.",
        _a_classed_error,
    ),
)


def internal_failure_explained_by(delta: Outcome, ours: Outcome) -> Difference | None:
    """The verdict on our outcome where Delta's runtime failed internally; None when none explains it."""
    return next((d for d in WHEN_DELTA_FAILS_INTERNALLY if d.differs_so(delta, ours)), None)
