"""A small merge's two phases in one Spark query.

Phase 1 (``touched_files``) and the rewrite (``rewrite``) are two queries, each planned and scheduled
whatever its size: on a warm server a 60-row upsert spends most of its time in them, not in its rows. When
the candidate files are few and small and the source's rows were counted and are few (``fits_one_query``),
one query does both: the source joined with every row of the candidate files (a right outer join, a full
outer one when unmatched source rows may be inserted; the source broadcast where it fits the budget, the
hashed side otherwise), each target row flagged with whether some row of its file is acted
on (a window over the file), the rows of files no clause acts on dropped, and the rest written through the
clauses. What phase 1 returns to the driver comes back as observed values of the same query: the files
touched (a bit per file) and the target rows matched more than once. The source's rows are those counted at
its materialization, not counted again here: the join may read the source twice.

Reading the candidate files whole costs little only while they are small (``MAX_BYTES``); phase 1 reads
their ON-condition columns alone. Anything this query cannot settle, it leaves to the two phases, which
then run as they would have, from the start: its files are deleted and the merge's metrics left untouched.
That is

* a target row matched by several source rows: the two phases raise Delta's error with its examples, or
  count an unconditional DELETE's surplus matches once;
* any error while the query runs (a cast, a constraint): Delta's phase 1 fails before its rewrite, so which
  error a merge reports depends on the order of the phases, which the two phases keep;
* a file Spark names otherwise than the log does (its ordinal is a ``raise_error``): the two phases raise
  ``DELTAMERGE_FILE_NOT_IN_LOG`` where this query would have dropped its rows;
* Spark dropping the observed values (never seen: the observed node sits on the written rows' path).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from airflow_provider_deltamerge import metrics as m
from airflow_provider_deltamerge.delta.files.reader import FILE_COLUMN, ROW_INDEX_COLUMN, files_by_uri
from airflow_provider_deltamerge.delta.files.writer import Written, discard
from airflow_provider_deltamerge.delta.log.snapshot import DataFile
from airflow_provider_deltamerge.engine.execute.change_rows import ChangeRows
from airflow_provider_deltamerge.engine.execute.clause_output import (
    ALL_ROW_KINDS,
    SOURCE_PRESENT,
    TARGET_PRESENT,
)
from airflow_provider_deltamerge.engine.execute.joins import (
    broadcast_budget,
    fits_in_memory,
    join_condition,
    source_rows,
    target_rows,
)
from airflow_provider_deltamerge.engine.execute.rewrite import TOUCHED_ROWS, write_with_actions
from airflow_provider_deltamerge.engine.execute.scan_splits import scan_split
from airflow_provider_deltamerge.engine.execute.touched_files import (
    acting_column,
    counts_toward_multiple_matches,
)
from airflow_provider_deltamerge.engine.observed import observe, observed
from airflow_provider_deltamerge.engine.plan.planning import MergePlan, has_inserts
from airflow_provider_deltamerge.exceptions import DeltaMergeError
from airflow_provider_deltamerge.metrics import MetricsRecorder
from airflow_provider_deltamerge.spec.names import hidden_name

log = logging.getLogger(__name__)

# The most candidate files: each is one bit of the observed long that names the touched ones.
MAX_FILES = 62
# The most bytes of candidate files read whole. Phase 1 reads only their ON-condition columns; past this
# size the second query costs less than reading and shuffling every column of files that stay as they are
# (bench/results: see docs/performance.md, "One query for a small merge").
MAX_BYTES = 2 * 1024 * 1024
# The most source rows: the window over each file holds the unmatched ones in one group, sorted by one task.
MAX_SOURCE_ROWS = 100_000

_FILE = hidden_name("file_ordinal")
_FILE_ACTED_ON = hidden_name("file_acted_on")
_MATCHES = hidden_name("matches")
_TOUCHED_BITS = "touched_bits"
_MULTIPLY_MATCHED = "multiply_matched"


def fits_one_query(plan: MergePlan) -> bool:
    """Whether the merge's two phases go in one query: the candidate files few and small, the source's rows
    counted and few (``MAX_SOURCE_ROWS``), and no deletion vectors to write (their rows are collected per
    file, which only phase 1 does)."""
    files = plan.candidate_files
    return (
        not plan.writes_deletion_vectors
        and 0 < len(files) <= MAX_FILES
        and sum(f.size for f in files) <= MAX_BYTES
        and plan.source_rows is not None
        and plan.source_rows <= MAX_SOURCE_ROWS
    )


def merge_in_one_query(
    spark: SparkSession, plan: MergePlan, source: DataFrame, recorder: MetricsRecorder, *, touches: Column
) -> tuple[tuple[DataFile, ...], Written] | None:
    """Rewrite the candidate files some clause acts on and write the inserts, in one query; record the
    metrics of both phases. None, with nothing recorded and nothing left written, when the two phases must
    decide (see the module's text).

    Args:
        touches: over a matched (source, target) pair: whether it makes its file touched.

    Returns:
        The touched files, in the log's order, and what was written.
    """
    by_uri = files_by_uri(plan.snapshot, plan.candidate_files)
    ordinals = {uri: n for n, uri in enumerate(by_uri)}
    inserting = has_inserts(plan.clauses)
    # The source's rows were counted where it was materialized (fits_one_query): not counted again in this
    # query, whose join may read the source twice (a full outer nested-loop join, for an ON without an
    # equality) where Delta's phase 1 reads it once.
    counted = plan.source_rows or 0
    target = target_rows(spark, plan, plan.candidate_files)
    condition = join_condition(plan, plan.source_schema)
    # The source is broadcast where it fits (nested columns have no size guess) and the join can build on
    # it, which a full outer join cannot; else it is the hashed side, so neither side is sorted.
    broadcast = not inserting and fits_in_memory(plan.source_schema, counted, broadcast_budget(spark))
    rows = source_rows(plan, source)
    built = F.broadcast(rows) if broadcast else rows.hint("shuffle_hash")
    joined = built.join(target, condition, "full_outer" if inserting else "right_outer")
    flagged, checks = observe(*_flagged(plan, joined, ordinals, touches=touches))
    # Unmatched source rows go to the NOT MATCHED clauses; target rows only where their file is rewritten.
    kept = flagged.filter(F.col(TARGET_PRESENT).isNull() | F.col(_FILE_ACTED_ON))
    attempt = MetricsRecorder()  # absorbed only when the query settles the merge
    try:
        written = write_with_actions(
            spark,
            plan,
            [(kept, ALL_ROW_KINDS if inserting else TOUCHED_ROWS)],
            attempt,
            # The window's shuffle has cut the rows into tasks adaptive execution sized: no rebalancing.
            presized=True,
            split=scan_split(spark, plan.candidate_files),
            changes=ChangeRows(deduplicate_deletes=False) if plan.writes_change_data else None,
        )
    except (DeltaMergeError, PySparkException, Py4JJavaError) as err:
        log.info("One query did not settle the merge (%s): running its two phases", type(err).__name__)
        return None
    values = observed(checks)
    if values is None or values[_MULTIPLY_MATCHED]:
        log.info("A target row may match several source rows: running the merge's two phases")
        discard(spark, plan.snapshot, (*written.files, *written.change_files))
        return None
    bits = int(values[_TOUCHED_BITS] or 0)
    touched = tuple(f for uri, f in by_uri.items() if bits >> ordinals[uri] & 1)
    if not touched and written.change_files:
        # Delta writes no change data for a merge that only inserts: readers take its added files as inserts.
        discard(spark, plan.snapshot, written.change_files)
        written = Written(files=written.files)
        attempt.set(m.NUM_TARGET_CHANGE_FILES_ADDED, 0)
        attempt.set(m.NUM_TARGET_CHANGE_FILE_BYTES, 0)
    attempt.set(m.NUM_SOURCE_ROWS, counted)
    attempt.set(m.NUM_SOURCE_ROWS_IN_SECOND_SCAN, counted)  # one read of the source serves both of Delta's
    recorder.absorb(attempt)
    log.info("One query: %d of %d candidate files rewritten", len(touched), len(by_uri))
    return touched, written


def _flagged(
    plan: MergePlan, joined: DataFrame, ordinals: Mapping[str, int], *, touches: Column
) -> tuple[DataFrame, Column, Column]:
    """The joined rows, each target row with its file's ordinal and whether some row of its file is acted
    on; and the aggregates to observe over them: the touched files' bits, and the target rows matched more
    than once (none to count when pruning found no two source rows share their keys)."""
    on_target = F.col(TARGET_PRESENT).isNotNull()
    ordinal = F.create_map(*[F.lit(v) for uri, n in ordinals.items() for v in (uri, n)])[F.col(FILE_COLUMN)]
    # A file Spark names otherwise than the engine does fails the query (the two phases then name it): its
    # rows would otherwise count as no file's, and be lost from the rewrite.
    ordinal = F.coalesce(ordinal, F.raise_error(F.lit(f"{_FILE}: a file outside the candidates")))
    flagged = joined.withColumn(_FILE, F.when(on_target, ordinal))
    acted_on = F.max(acting_column(plan, touches)).over(Window.partitionBy(_FILE))
    flagged = flagged.withColumn(_FILE_ACTED_ON, acted_on)
    if plan.source_keys_unique:
        multiply_matched = F.lit(0)
    else:
        counted = F.when(counts_toward_multiple_matches(plan), F.col(SOURCE_PRESENT))
        matches = F.count(counted).over(Window.partitionBy(_FILE, ROW_INDEX_COLUMN))
        flagged = flagged.withColumn(_MATCHES, F.when(on_target, matches))
        multiply_matched = F.sum(F.when(F.col(_MATCHES) > 1, 1).otherwise(0))
    bit = F.pow(F.lit(2), F.col(_FILE)).cast("long")  # a power of two is exact as a double
    touched_bits = F.bit_or(F.when(on_target & F.col(_FILE_ACTED_ON), bit))
    return flagged, touched_bits.alias(_TOUCHED_BITS), multiply_matched.alias(_MULTIPLY_MATCHED)
