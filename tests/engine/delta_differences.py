"""Every deliberate difference between our engine and Delta Lake's own MERGE, in one list, each with its
reason and the exact shape it may take: the differential suite (tests/engine/test_differential_delta.py)
accepts a case whose outcomes differ only as one of these says, and tests/engine/test_delta_differences.py
shows each on a case where it does differ. docs/semantics.md says the same for users.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.log.row_tracking import DOMAIN as ROW_TRACKING_DOMAIN
from airflow_provider_deltamerge.delta.log.row_tracking import HIGH_WATER_MARK_KEY as HIGH_WATER_MARK
from tests.engine.delta_differential import (
    CASE_SENSITIVE,
    ENGINE_ONLY_METRICS,
    MATERIALIZE_SOURCE,
    SKIP_EMPTY_COMMITS,
    STORE_ASSIGNMENT,
    Case,
    Outcome,
    source_form,
)
from tests.engine.delta_outcomes import error_catalogue, first_sentence

CHANGES = (m.NUM_TARGET_ROWS_INSERTED, m.NUM_TARGET_ROWS_UPDATED, m.NUM_TARGET_ROWS_DELETED)


@dataclass(frozen=True)
class Difference:
    """One deliberate difference: why, and whether Delta's and our outcome differ exactly so."""

    name: str
    reason: str
    differs_so: Callable[[Outcome, Outcome], bool]
    # Where Delta fails a statement the engine merges: the same statement changed only where Delta's failure
    # lies, which Delta runs; the suite runs it and wants Delta's merge there to be the engine's here.
    as_delta_runs_it: Callable[[Case], Case] | None = None
    # Where both fail, each with another error: the same statement changed so that only one of the two
    # errors can arise, which both run; the suite wants the same outcome there, failing with that error.
    as_both_run_it: Callable[[Case], Case] | None = None


def same_merge(one: Outcome, other: Outcome) -> bool:
    """Whether two outcomes are one merge as users see it: the error, version, rows, schema, change data and
    the counts of source rows and changed rows. Not the table's properties, protocol or files, which
    ``as_delta_runs_it`` may change, nor the copied and output rows, which follow the files rewritten (where
    deletion vectors are written, or only-files-a-clause-acts-on)."""

    def seen(outcome: Outcome) -> tuple[object, ...]:
        counts = {
            k: v for k, v in outcome.counts.items() if k not in (m.NUM_TARGET_ROWS_COPIED, m.NUM_OUTPUT_ROWS)
        }
        return (outcome.error_class, outcome.version, outcome.rows, outcome.schema, outcome.changes, counts)

    return seen(one) == seen(other)


def without_deletion_vectors(case: Case) -> Case:
    properties = {**case.properties, "delta.enableDeletionVectors": "false"}
    return dataclasses.replace(case, properties=properties)


def without_constraints(case: Case) -> Case:
    features = tuple(f for f in case.features if f not in _CONSTRAINT_FEATURES)
    return dataclasses.replace(case, features=features)


def without_preflight(case: Case) -> Case:
    return dataclasses.replace(case, preflight=False)


def under_ansi_assignment(case: Case) -> Case:
    # ANSI's store assignment casts as STRICT's up-casts do, with the session's time zone
    return dataclasses.replace(case, confs={**case.confs, STORE_ASSIGNMENT: "ANSI"})


def _only_files_a_clause_acts_on(delta: Outcome, ours: Outcome) -> bool:
    """Same rows and schema; every count but the copied and output rows the same; we copy fewer rows (those
    of the files Delta rewrote and we left alone), remove fewer files and bytes, and write the same rows
    besides; where nothing changed, Delta commits a rewrite of its candidate files and we commit no version.
    Either way the table is the same but for row tracking's high-water mark, which Delta's rewritten files
    raise further, and for a checkpoint Delta's extra version may be due."""
    if delta.error_class or ours.error_class or (delta.rows, delta.schema) != (ours.rows, ours.schema):
        return False
    if not _same_table_but_fewer_row_ids(delta, ours):
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
        return (
            same
            and copied_less
            and written[0] == written[1]
            and _fewer_files_removed(delta, ours)
            and _same_commit_but_for_an_empty_one(delta, ours)
            and delta.changes == ours.changes
        )
    # with skipRecordingEmptyCommits off, a merge that changes nothing must commit (an empty commit)
    records_empty = ours.confs.get(SKIP_EMPTY_COMMITS, "true").lower() == "false"
    nothing_changed = all(delta.counts.get(k) == 0 for k in CHANGES)
    return (
        delta.version == (ours.version or 0) + 1 and nothing_changed and not ours.counts and not records_empty
    )


REMOVED = (m.NUM_TARGET_FILES_REMOVED, m.NUM_TARGET_BYTES_REMOVED)
WRITTEN = (f"{m.NUM_TARGET_FILES_ADDED} > 0", f"{m.NUM_TARGET_BYTES_ADDED} > 0")


def _fewer_files_removed(delta: Outcome, ours: Outcome) -> bool:
    """Our file metrics are Delta's but for fewer files and bytes removed, and perhaps no file written
    where Delta wrote the copied rows of a file we left alone."""
    fewer = all(ours.files.get(k, 0) <= delta.files.get(k, 0) for k in REMOVED)
    rest = set(delta.files) | set(ours.files)
    return fewer and all(
        delta.files.get(k) == ours.files.get(k) or (k in WRITTEN and delta.files.get(k))
        for k in rest - set(REMOVED)
    )


def _same_commit_but_for_an_empty_one(delta: Outcome, ours: Outcome) -> bool:
    """The same commit facts, but for the isolation level of an empty commit of ours (no file removed or
    written), which changes no data: SnapshotIsolation, where Delta's rewrite is Serializable."""
    if ours.commit.get("isolationLevel") == "SnapshotIsolation" and not any(
        ours.files.get(k) for k in (m.NUM_TARGET_FILES_REMOVED, *WRITTEN)
    ):
        return {**delta.commit, "isolationLevel": None} == {**ours.commit, "isolationLevel": None}
    return delta.commit == ours.commit


def _same_table_but_fewer_row_ids(delta: Outcome, ours: Outcome) -> bool:
    """The same table facts, but for a row tracking high-water mark of ours at most Delta's, and for the
    checkpoint Delta's extra commit (a rewrite that changed nothing, which we do not make) was due, and the
    history that checkpoint's cleanup deleted."""
    domains = [dict(o.table.get("domains", {})) for o in (delta, ours)]
    marks = [d.pop(ROW_TRACKING_DOMAIN, None) for d in domains]
    if (marks[0] is None) != (marks[1] is None):
        return False
    if marks[0] is not None and marks[1][HIGH_WATER_MARK] > marks[0][HIGH_WATER_MARK]:
        return False
    checkpoints = [o.table.get("checkpoint") for o in (delta, ours)]
    extra_checkpoint = delta.version == (ours.version or 0) + 1 and checkpoints[0] == delta.version
    if checkpoints[0] != checkpoints[1] and not extra_checkpoint:
        return False
    # the cleanup after Delta's extra checkpoint may delete history ours keeps
    history = [None if extra_checkpoint else o.table.get("history") for o in (delta, ours)]
    return {**delta.table, "domains": domains[0], "checkpoint": None, "history": history[0]} == {
        **ours.table,
        "domains": domains[1],
        "checkpoint": None,
        "history": history[1],
    }


def _no_protocol_change(delta: Outcome, ours: Outcome) -> bool:
    """Delta committed a new protocol; we refused with DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT and left
    the table at the version and protocol both found."""
    return (
        delta.error_class is None
        and ours.error_class == "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT"
        and delta.version == (ours.version or 0) + 1
        and delta.table.get("protocol") != ours.table.get("protocol")
    )


# The ON condition of a MERGE INTO statement.
_ON = re.compile(r"\bON\s+(.*?)\s*\nWHEN\b", re.DOTALL)


def _source_counted_once(delta: Outcome, ours: Outcome) -> bool:
    """Delta's numSourceRows is twice ours, and the outcomes are otherwise the same (or differ only as
    ``_only_files_a_clause_acts_on`` says), where the ON condition gives Spark no equality to hash on (an
    OR, a range), so Spark joins by a nested loop, and the join keeps unmatched rows (a NOT MATCHED or a NOT
    MATCHED BY SOURCE clause): Delta's count of source rows sits on a read of the source that such a plan
    may make twice. Delta's runtime shows it with a NOT MATCHED BY SOURCE clause, and with a NOT MATCHED
    one under schema evolution or over a filtered source query; which rows make the plan read twice is
    Spark's, and the same clauses count once on other rows. An equality, or MATCHED clauses alone, never
    count twice."""
    on = _ON.search(ours.statement)
    if delta.error_class or ours.error_class or on is None:
        return False
    if not re.search(r"^WHEN NOT MATCHED\b", ours.statement, re.M):
        return False
    if " OR " not in on[1] and " BETWEEN " not in on[1]:
        return False
    counted = [o.counts.get(m.NUM_SOURCE_ROWS) for o in (delta, ours)]
    if counted[1] is None or counted[0] != 2 * counted[1]:
        return False
    once = dataclasses.replace(delta, counts={**delta.counts, m.NUM_SOURCE_ROWS: counted[1]})
    return once.observed() == ours.observed() or _only_files_a_clause_acts_on(once, ours)


# The target's and the source's aliases of a MERGE INTO statement (a subquery source in parentheses).
_ALIASES = re.compile(
    r"\bINTO\s+\S+\s+(?:AS\s+)?(\w+)\s+USING\s+(?:\(.*\)|\S+)\s+(?:AS\s+)?(\w+)\s+ON\b",
    re.IGNORECASE | re.DOTALL,
)


def _distinct_aliases(delta: Outcome, ours: Outcome) -> bool:
    """The statement gives the target and the source one alias; we refused with AMBIGUOUS_REFERENCE and
    left the table, whatever Delta made of it."""
    aliases = _ALIASES.search(ours.statement)
    return (
        aliases is not None
        and aliases[1].lower() == aliases[2].lower()
        and ours.error_class == "AMBIGUOUS_REFERENCE"
        and delta.error_class != "AMBIGUOUS_REFERENCE"
        and ours.version == (delta.version if delta.error_class else (delta.version or 0) - 1)
    )


def _no_compatibility_checkpoint(delta: Outcome, ours: Outcome) -> bool:
    """On a table with v2 checkpoints, Delta's cleanup kept one more checkpoint than ours, older than the
    merge's: the classic-named copy it made of the UUID-named checkpoint it had read the table from. Else
    the outcomes agree, or differ as another difference says."""
    if "v2Checkpoint" not in delta.table.get("protocol", {}).get("writerFeatures", ()):
        return False
    theirs, mine = (set((o.table.get("history") or {}).get("checkpoints", ())) for o in (delta, ours))
    extra = theirs - mine
    if len(extra) != 1 or mine - theirs or min(extra) >= (ours.version or 0):
        return False
    history = {**delta.table["history"], "checkpoints": ours.table["history"]["checkpoints"]}
    alike = dataclasses.replace(delta, table={**delta.table, "history": history})
    return alike.observed() == ours.observed() or any(
        d.differs_so(alike, ours) for d in DIFFERENCES if d.differs_so is not _no_compatibility_checkpoint
    )


def _source_rows_counted_where_no_target_row_qualifies(delta: Outcome, ours: Outcome) -> bool:
    """Delta's numSourceRows is 0 or twice ours, where no row of the target satisfies the ON condition's
    conjuncts that name the target alone; the outcomes are otherwise the same, or differ as another
    difference says."""
    counted = [o.counts.get(m.NUM_SOURCE_ROWS) for o in (delta, ours)]
    if delta.error_class or ours.error_class or not ours.on_admits_no_target_row or not counted[1]:
        return False
    if counted[0] not in (0, 2 * counted[1]):
        return False
    return _same_but_for_the_source_count(delta, ours, _source_rows_counted_where_no_target_row_qualifies)


def _same_but_for_the_source_count(
    delta: Outcome, ours: Outcome, this: Callable[[Outcome, Outcome], bool]
) -> bool:
    """With Delta's numSourceRows taken as ours, the outcomes are the same, or differ as a difference other
    than ``this`` says."""
    alike = dataclasses.replace(
        delta, counts={**delta.counts, m.NUM_SOURCE_ROWS: ours.counts[m.NUM_SOURCE_ROWS]}
    )
    return alike.observed() == ours.observed() or any(
        d.differs_so(alike, ours) for d in DIFFERENCES if d.differs_so is not this
    )


# A source query grouped by one column, and an ON equality of a target column with that source column.
_GROUPED_BY = re.compile(r"\bGROUP BY (\w+)\)", re.IGNORECASE)
_EQUALITY = re.compile(r"\bt\.\w+ = s\.(\w+)\b")


def _source_rows_uncounted_where_the_source_is_unique(delta: Outcome, ours: Outcome) -> bool:
    """Delta's numSourceRows is 0 where ours counts the source; the outcomes are otherwise the same, or
    differ as another difference says. The merge writes deletion vectors and has a NOT MATCHED BY SOURCE
    clause and no NOT MATCHED one (Delta then takes numSourceRows from its phase 1), its source is not
    materialized (materializeSource=none) and is a query grouped by a column that an equality of ON joins
    on: the source is unique on its join key, and Spark's optimizer removes phase 1's right outer join,
    whose output keeps nothing of the source, together with the source and its count."""
    counted = [o.counts.get(m.NUM_SOURCE_ROWS) for o in (delta, ours)]
    if delta.error_class or ours.error_class or counted[0] != 0 or not counted[1]:
        return False
    statement = ours.statement
    on = _ON.search(statement)
    grouped = _GROUPED_BY.search(statement)
    if on is None or grouped is None or grouped[1] not in _EQUALITY.findall(on[1]):
        return False
    if not re.search(r"^WHEN NOT MATCHED BY SOURCE\b", statement, re.M):
        return False
    if re.search(r"^WHEN NOT MATCHED(?! BY SOURCE)\b", statement, re.M):
        return False
    if ours.confs.get(MATERIALIZE_SOURCE) != "none":
        return False
    if ours.table.get("properties", {}).get("delta.enableDeletionVectors") != "true":
        return False
    return _same_but_for_the_source_count(delta, ours, _source_rows_uncounted_where_the_source_is_unique)


# The WHEN MATCHED clauses of a statement: their conditions and actions.
_MATCHED = re.compile(r"^WHEN MATCHED\b(.*)$", re.M)


def _rows_delta_drops_deduplicating_change_data(delta: Outcome, ours: Outcome) -> bool:
    """Delta's table lacks rows that ours has and that its own counts and change data count, all else the
    same: with the change data feed on, the statement's one MATCHED clause an unconditional DELETE and a NOT
    MATCHED clause beside it (the case in which Delta deduplicates the delete rows of a target row matched
    more than once, keying inserted rows with the target's); no more rows lost than inserted, as each is
    lost to an inserted row's key."""
    if delta.error_class or ours.error_class:
        return False
    if ours.table.get("properties", {}).get("delta.enableChangeDataFeed") != "true":
        return False
    if [c.strip() for c in _MATCHED.findall(ours.statement)] != ["THEN DELETE"]:
        return False
    if not re.search(r"^WHEN NOT MATCHED (?!BY SOURCE)", ours.statement, re.M):
        return False
    kept = [json.dumps(r, sort_keys=True, default=str) for r in delta.rows]
    mine = [json.dumps(r, sort_keys=True, default=str) for r in ours.rows]
    lost = Counter(mine) - Counter(kept)
    return (
        0 < sum(lost.values()) <= ours.counts.get(m.NUM_TARGET_ROWS_INSERTED, 0)
        and not Counter(kept) - Counter(mine)
        and dataclasses.replace(delta, rows=ours.rows).observed() == ours.observed()
    )


def _delta_raises_on_an_unmatched_row(delta: Outcome, ours: Outcome) -> bool:
    """Delta failed the statement with its merge output's own assertion that a row matched no clause, left
    its table at the version it found, and we committed; the table writes deletion vectors and ON holds a
    null-safe equality (the case in which Delta's runtime raises it)."""
    on = _ON.search(ours.statement)
    return (
        delta.error_class == "USER_RAISED_EXCEPTION"
        and _UNEXPECTED_ROW in (delta.message or "")
        and ours.error_class is None
        and on is not None
        and "<=>" in on[1]
        and ours.table.get("properties", {}).get("delta.enableDeletionVectors") == "true"
        and delta.version == (ours.version or 0) - 1
    )


# The assertion Delta's merge output raises for a row no clause's action covers
_UNEXPECTED_ROW = "Unexpected row: did not match any merge clause"

# The errors a written row raises for breaking a constraint of the table, and the drawn table features
# that declare those constraints (the CHECK constraint ``bounded``, NOT NULL columns)
_CONSTRAINT_ERRORS = frozenset({"DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"})
_CONSTRAINT_FEATURES = frozenset({"checkConstraint", "notNull"})
# The errors Spark raises for a value a clause computes from one row (ANSI arithmetic and casts)
_VALUE_ERRORS = frozenset(
    {
        "ARITHMETIC_OVERFLOW",
        "CAST_INVALID_INPUT",
        "CAST_OVERFLOW",
        "DIVIDE_BY_ZERO",
        "NUMERIC_VALUE_OUT_OF_RANGE",
    }
)


def _another_failing_row(delta: Outcome, ours: Outcome) -> bool:
    """Both failed and left their tables at the version they found, one with an error of a value a clause
    computes, the other with a constraint a written row breaks: two rows fail, one each way, and each side
    reports the row its tasks met first. (That both errors are the statement's, and only the order differs,
    ``without_constraints`` shows: there both fail with the value's error.)"""
    classes = {delta.error_class, ours.error_class}
    return (
        delta.version == ours.version
        and len(classes & _CONSTRAINT_ERRORS) == 1
        and len(classes & _VALUE_ERRORS) == 1
        and _declares_constraints(ours)
    )


def _declares_constraints(outcome: Outcome) -> bool:
    """The table has a CHECK constraint or a NOT NULL column."""
    properties = outcome.table.get("properties") or {}
    checks = any(name.startswith("delta.constraints.") for name in properties)
    return checks or '"nullable": false' in outcome.schema


def _a_target_name_told_before_submission(delta: Outcome, ours: Outcome) -> bool:
    """Both failed and left their tables at the version they found: Delta could not resolve a name, and the
    statement's source is a query over the source file, whose columns the operator's pre-flight checks
    cannot read, and the session ignores case (in a case-sensitive one they tell nothing after such a name);
    ours failed with another error, which those checks told of a name of the target. (That the merge alone
    fails as Delta does, ``without_preflight`` shows.)"""
    return (
        delta.error_class == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
        and ours.confs.get(CASE_SENSITIVE, "false").lower() != "true"
        and ours.error_class not in (None, delta.error_class)
        and delta.version == ours.version
        and source_form(ours.statement) != "file"
    )


DIFFERENCES = (
    Difference(
        "only-files-a-clause-acts-on",
        "Delta's classic executor rewrites every candidate file that holds a matched row (every file its "
        "pruning keeps when a NOT MATCHED BY SOURCE clause is there), copying rows no clause acts on; the "
        "engine rewrites only the files holding a row some clause acts on. The rows are the same; "
        "numTargetRowsCopied and numOutputRows are smaller and true for what was written, and a merge that "
        "changes no row commits no version, where Delta commits a rewrite (and checkpoints it where the "
        "interval makes that version due).",
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
    Difference(
        "source-rows-counted-once",
        "numSourceRows counts each source row once. Delta counts the source rows its join with the target's "
        "candidate files reads; where ON gives Spark no equality to hash on (an OR, a range), Spark joins by "
        "a nested loop, and where that join keeps unmatched rows (a NOT MATCHED or NOT MATCHED BY SOURCE "
        "clause), Delta's plan may read the source twice, and its numSourceRows is then twice the source's "
        "rows.",
        _source_counted_once,
    ),
    Difference(
        "source-rows-counted-where-no-target-row-qualifies",
        "numSourceRows counts each source row once. Where no row of the target satisfies the ON condition's "
        "conjuncts that name the target alone (a test no row passes, IS NULL on a NOT NULL column), the "
        "target side of Delta's join of the source with its candidate files is empty, and Spark may plan "
        "that join without reading the source (adaptive execution drops a join whose broadcast target side "
        "came back empty; the optimizer drops the source of a join whose condition it folds to false) or "
        "read the source twice in a nested loop; Delta's numSourceRows is then 0 or twice the source's rows. "
        "Delta counts the source again only where its candidate files hold no row at all.",
        _source_rows_counted_where_no_target_row_qualifies,
    ),
    Difference(
        "source-rows-counted-where-the-source-is-unique",
        "numSourceRows counts each source row once. Under deletion vectors, a merge with a NOT MATCHED BY "
        "SOURCE clause and no NOT MATCHED clause reports the count of Delta's phase 1, a right outer join "
        "of the source with the target's files whose output keeps nothing of the source. Where the source "
        "is not materialized (materializeSource=none) and is unique on ON's equality key (a query grouped "
        "by it), Spark's optimizer removes that join (EliminateOuterJoin), and with it the read of the "
        "source that counts its rows: Delta's numSourceRows is then 0.",
        _source_rows_uncounted_where_the_source_is_unique,
    ),
    Difference(
        "distinct-aliases",
        "The target and the source must have different aliases: with one alias for both, the merge is "
        "refused with Spark's AMBIGUOUS_REFERENCE for the ON condition's first alias.column, where Delta "
        "resolves a column found on one side only. Which side a reference means is then the reader's "
        "guess, and a task's statement should not depend on it.",
        _distinct_aliases,
    ),
    Difference(
        "no-compatibility-checkpoint",
        "On a table with v2 checkpoints, Delta's log cleanup first copies the UUID-named checkpoint its "
        "snapshot was read from to a classic name, so that readers without v2 checkpoints find the "
        "protocol that turns them away, and keeps that copy and its sidecars. The engine's own checkpoints "
        "have the classic name already; it makes no copy, and its cleanup deletes that older checkpoint "
        "as expired.",
        _no_compatibility_checkpoint,
    ),
    Difference(
        "unmatched-row-merged-where-delta-raises",
        "On a table that writes deletion vectors, with a null-safe equality (<=>) in ON, Delta 4.4 fails "
        'the merge with USER_RAISED_EXCEPTION ("Unexpected row: did not match any merge clause"), its '
        "merge output's own assertion that a row matched no clause (seen where some source rows match no "
        "target row and no NOT MATCHED condition holds for them, which a merge leaves out). The engine "
        "completes the merge, as Delta does on the same table without deletion vectors or with = in ON.",
        _delta_raises_on_an_unmatched_row,
        without_deletion_vectors,
    ),
    Difference(
        "another-failing-row",
        "Where one row's value fails to compute (an overflow, a malformed cast) and another written row "
        "breaks a constraint of the table (CHECK, NOT NULL), the merge fails with the error of the row its "
        "tasks meet first; Delta's plan and ours meet the rows in another order, so one may report the "
        "value's error and the other the constraint's. Without the constraints, both report the value's "
        "error.",
        _another_failing_row,
        as_both_run_it=without_constraints,
    ),
    Difference(
        "target-names-checked-before-submission",
        "In a session that ignores case (Spark's default), the operator checks the statement's names against "
        "the target's schema before it submits the job, and a path source's against the source's; a query "
        "or table source's columns it cannot read, so it cannot tell that a name of such a source does not "
        "resolve. Where one does not, and a later clause names a column or field the target lacks, the "
        "operator reports the target's name before the job starts, where Delta reports the source's name "
        "(DELTA_MERGE_UNRESOLVED_EXPRESSION) it resolves first. Both are the statement's errors; once the "
        "target's name is mended, the job reports the source's, in Delta's words.",
        _a_target_name_told_before_submission,
        as_both_run_it=without_preflight,
    ),
    Difference(
        "rows-delta-drops-deduplicating-change-data",
        "Delta 4.4 loses rows. With the change data feed on, where a target row is matched more than once "
        "and the one MATCHED clause is an unconditional DELETE, Delta drops the repeated delete rows of its "
        "output by a row key (ClassicMergeExecutor.deduplicateCDFDeletes: dropDuplicates over a target row "
        "index and the change type), where an inserted row takes a source row index as its key; an inserted "
        "row and a copied or updated target row whose indexes coincide share a key and a change type (none, "
        "for data rows), and one of them is not written, though Delta's metrics and change data count it. "
        "The engine writes every row, and its counts and change data are Delta's.",
        _rows_delta_drops_deduplicating_change_data,
    ),
)


def _every_metric_in_the_commit(delta: Outcome, ours: Outcome) -> bool:
    """Our commit's metrics are Delta's and some of ``ENGINE_ONLY_METRICS``, no others."""
    names = [set(o.commit_info.get("operationMetrics") or {}) for o in (delta, ours)]
    return names[0] <= names[1] and bool(names[1] - names[0]) and names[1] - names[0] <= ENGINE_ONLY_METRICS


EXPRESSION_ID = re.compile(r"#\d+")


# What Delta records for an ON condition Spark's optimizer folded to a constant (IS NULL on a NOT NULL
# column).
FOLDED = frozenset({"true", "false"})


def _predicates_as_written(delta: Outcome, ours: Outcome) -> bool:
    """Our commit's ON predicate is the statement's text; Delta's is a resolved expression with ids, or the
    constant Spark folded it to."""
    predicates = [json.loads(o.commit_info["operationParameters"]["predicate"]) for o in (delta, ours)]
    return all(EXPRESSION_ID.search(p) or p in FOLDED for p in predicates[0]) and not any(
        EXPRESSION_ID.search(p) or p in FOLDED for p in predicates[1]
    )


# Differences every merge commit of ours shows; the comparison leaves them out (delta_differential's
# ``commit_facts``), and the differential suite checks that each holds wherever both runners committed.
IN_EVERY_COMMIT = (
    Difference(
        "every-metric-in-the-commit",
        "Delta's MERGE commit records part of its command's metrics (DeltaOperationMetrics.MERGE); the "
        "engine's records the rest too (files, bytes and partitions before and after skipping, the source "
        "rows of the second scan, the partitions added to and removed from, the change files' bytes), so "
        "that a retry, a sensor or a bound reads every metric from the log.",
        _every_metric_in_the_commit,
    ),
    Difference(
        "predicates-as-written",
        "The commit's operationParameters give each predicate as the statement writes it (t.id = s.id); "
        "Delta's give Spark's resolved expression with its expression ids ((id#42L = id#44L)), which no "
        "reader can resolve again, or for ON the constant Spark's optimizer folded it to (false, for a "
        "conjunct IS NULL on a NOT NULL column).",
        _predicates_as_written,
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
        else f"(?P<p{i}>.+?)"
        if part in EXPRESSION_PARAMETERS
        else re.escape(values.group(f"p{i}"))
        for i, part in enumerate(parts)
    )
    ours_values = re.search(expected, ours.message or "")
    if ours_values is None:
        return False
    # each expression of ours is the statement's own text of it
    written = " ".join(ours.statement.split())
    return all(
        " ".join(ours_values.group(f"p{i}").split()) in written
        for i, part in enumerate(parts)
        if i % 2 and part in EXPRESSION_PARAMETERS
    )


def another_null_column(delta: Outcome, ours: Outcome) -> bool:
    """Both refuse a row that breaks a NOT NULL constraint and name different columns: rows break the
    constraints of several columns, and the error names the first the merge's tasks meet, which Delta's
    plan and ours meet in another order. The column we name is one the table declares NOT NULL."""
    if delta.error_class != "DELTA_NOT_NULL_CONSTRAINT_VIOLATED" or ours.error_class != delta.error_class:
        return False
    named = re.match(r"NOT NULL constraint violated for column: (\S+)\.\s", ours.message or "")
    if named is None:
        return False
    leaf = json.dumps(named[1].split(".")[-1])
    return re.search(rf'"name": {re.escape(leaf)}, "nullable": false', ours.schema) is not None


# Spark's text of a malformed string's cast (CAST_INVALID_INPUT), which the engine's run-time check writes too
_MALFORMED = re.compile(
    r"The value (?P<value>'.*?') of the type \"(?P<source>[^\"]+)\" cannot be cast to \"(?P<target>[^\"]+)\" "
    r"because it is malformed\.",
    re.S,
)
# Spark's SQL names of types whose schema JSON names them otherwise
_JSON_TYPE_NAMES = {"INT": "integer", "BIGINT": "long", "SMALLINT": "short", "TINYINT": "byte"}


def another_malformed_value(delta: Outcome, ours: Outcome) -> bool:
    """Both refuse a malformed string cast at run time and quote different values: several rows' strings are
    malformed, and the error quotes the first the merge's tasks meet, which Delta's plan and ours meet in
    another order. The types are Delta's, and the column we name is one of the type the casts are to."""
    if delta.error_class != "CAST_INVALID_INPUT" or ours.error_class != delta.error_class:
        return False
    theirs = _MALFORMED.search(delta.message or "")
    mine = _MALFORMED.search(ours.message or "")
    column = re.search(r"\(column `([^`]+)`\)", ours.message or "")
    if theirs is None or mine is None or column is None:
        return False
    if (mine["source"], mine["target"]) != (theirs["source"], theirs["target"]):
        return False
    target = _JSON_TYPE_NAMES.get(mine["target"], mine["target"].lower())
    leaf = json.dumps(column[1].split(".")[-1])
    typed = re.escape(json.dumps(target))
    declared = rf'"name": {re.escape(leaf)}, "nullable": (?:true|false), "type": {typed}'
    return re.search(declared, ours.schema) is not None


# What Delta's message shows for a binary, struct, array or map value: the JVM object Catalyst holds it in
_JVM_OBJECT = re.compile(
    r"\[B@[0-9a-f]+|org\.apache\.spark\.sql\.catalyst\.expressions\.Unsafe(?:Array|Map)Data@[0-9a-f]+"
    r"|\[[0-9a-f]+(?:,[0-9a-f]+)*\]"
)


def constraint_values_as_text(delta: Outcome, ours: Outcome) -> bool:
    """Both refuse a row that breaks a CHECK constraint and show the same constraint and columns; values
    differ only where Delta prints a binary, struct, array or map value as the JVM object that holds it
    (``[B@28ab63f3``, ``UnsafeArrayData@f37c2c84``, an UnsafeRow's words), which changes between runs, and we
    print it as Spark casts it to a string (a binary value as a SQL literal)."""
    if delta.error_class != "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES" or ours.error_class != delta.error_class:
        return False

    def shown(outcome: Outcome) -> tuple[str, list[tuple[str, str]]]:
        head, *lines = (outcome.message or "").split("\n")
        values = [tuple(line[3:].split(" : ", 1)) for line in lines if line.startswith(" - ")]
        return head.removeprefix("[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES] "), values  # type: ignore[return-value]

    (their_head, theirs), (our_head, mine) = shown(delta), shown(ours)
    if their_head != our_head or [c for c, _ in theirs] != [c for c, _ in mine] or theirs == mine:
        return False
    pairs = zip(theirs, mine, strict=True)
    return all(a == b or _JVM_OBJECT.fullmatch(a) is not None for (_, a), (_, b) in pairs)


MESSAGE_DIFFERENCES = (
    Difference(
        "expressions-as-written",
        "An error that quotes an expression of the statement quotes it as the clause writes it, where Delta "
        "prints Spark's normalized form (casts and parentheses added); the class, the sentence and every "
        "other value in it are Delta's.",
        expressions_as_written,
    ),
    Difference(
        "another-null-column",
        "Where the merge's rows break the NOT NULL constraints of several columns, the error names the "
        "column of the first violation the tasks meet; Delta's plan and ours meet the rows in another "
        "order, so the column may differ. The class is Delta's, and the column one the table declares NOT "
        "NULL.",
        another_null_column,
    ),
    Difference(
        "another-malformed-value",
        "Where several rows' strings cannot be cast to their column's type (CAST_INVALID_INPUT), the error "
        "quotes the value the tasks meet first; Delta's plan and ours meet the rows in another order, so the "
        "value quoted may differ. The class, the sentence and the types are Delta's, and the column one of "
        "the type the value is cast to.",
        another_malformed_value,
    ),
    Difference(
        "constraint-values-as-text",
        "A row that breaks a CHECK constraint shows each value the constraint reads; Delta prints a "
        "binary, struct, array or map value as the JVM object that holds it, which changes between runs, and "
        "we print it as Spark casts it to a string. The class, the constraint and every other value are "
        "Delta's.",
        constraint_values_as_text,
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


# Delta's analyzer leaves a cast to TIMESTAMP unresolved when it has no time zone
_UNRESOLVED_TIMESTAMP_CAST = re.compile(r"Found the unresolved Cast: cast\(.+ as timestamp\)")


def _strict_up_cast_written(delta: Outcome, ours: Outcome) -> bool:
    """Under STRICT, Delta fails on its up-cast to a TIMESTAMP column, and the engine wrote the value."""
    return (
        ours.confs.get(STORE_ASSIGNMENT) == "STRICT"
        and _UNRESOLVED_TIMESTAMP_CAST.search(delta.message or "") is not None
        and ours.error_class is None
    )


WHEN_DELTA_FAILS_INTERNALLY = (
    Difference(
        "a-classed-error",
        "Delta's runtime fails the statement with an internal error of its own; the engine refuses it with "
        "an error of Spark's or Delta's class in their words, and no stack.",
        _a_classed_error,
    ),
    Difference(
        "strict-up-cast-to-a-timestamp",
        "Under storeAssignmentPolicy=STRICT Delta writes a value into a column of a wider type through "
        "Spark's UpCast, without the session's time zone (UpdateExpressionsSupport.cast); its analyzer "
        'leaves such a cast to TIMESTAMP unresolved (INTERNAL_ERROR, "Found the unresolved Cast"). The '
        "engine writes the up-cast Spark makes under STRICT: a DATE at midnight in the session's time zone.",
        _strict_up_cast_written,
        under_ansi_assignment,
    ),
)


def internal_failure_explained_by(delta: Outcome, ours: Outcome) -> Difference | None:
    """The verdict on our outcome where Delta's runtime failed internally; None when none explains it."""
    return next((d for d in WHEN_DELTA_FAILS_INTERNALLY if d.differs_so(delta, ours)), None)
