"""The expired-log cleanup after a merge's checkpoint (``delta/commit/log_cleanup.py``), by Delta's rules.

The walk's cases are those of Delta's own suite for its ``BufferingLogDeletionIterator`` (one checkpoint
file per version, last modified at the listed times): which files it deletes, with what adjusted
timestamps.
Then the same merge runs on Delta's runtime and on our engine over copies of a Delta-made table whose log
files were last modified hours or days before, and both logs must keep the same files afterwards.
"""

from __future__ import annotations

import datetime
import re
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from airflow_provider_deltamerge.delta.commit.log_cleanup import (
    LogFile,
    cutoff_ms,
    expired_files,
    retention_ms,
)
from airflow_provider_deltamerge.engine import run_merge
from airflow_provider_deltamerge.spec import parse_merge_sql
from tests.delta.helpers import PLAIN_UPSERT, age_log, delta_merge
from tests.run_profile import pairing_of_the_day


def walk(timestamps: list[int], *, max_timestamp: int, max_version: int) -> list[int]:
    """The adjusted timestamps of the files the walk deletes, where version v has one file, a checkpoint
    last modified at ``timestamps[v]`` (as Delta's suite builds them)."""
    files = [LogFile(f"{v:020d}.checkpoint.parquet", v, ts) for v, ts in enumerate(timestamps)]
    return [
        f.modified_ms for f in expired_files(files, cutoff=max_timestamp, last_checkpoint=max_version + 1)
    ]


# Delta's own cases (DeltaTimeTravelSuite, "BufferingLogDeletionIterator: ..."): max timestamp and version
# to delete, each version's timestamp, the adjusted timestamps of the files deleted.
@pytest.mark.parametrize(
    ("max_timestamp", "max_version", "timestamps", "deleted"),
    [
        (100, 100, [], []),
        (100, 100, [10, 11], [10]),
        (100, 100, [10, 15, 25, 26], [10, 15, 25]),
        # early exit by timestamp: 10 adjusts the following 8 to 11, so both go only when 11 may
        (7, 100, [5, 10, 8, 12], [5]),
        (10, 100, [5, 10, 8, 12], [5]),
        (11, 100, [5, 10, 8, 12], [5, 10, 11]),
        (12, 100, [5, 10, 8, 12, 13], [5, 10, 11, 12]),
        (10, 100, [5, 10, 8], [5]),
        # early exit by version
        (100, 0, [5, 10, 8, 12], [5]),
        (100, 1, [5, 10, 8, 12], [5]),
        (100, 2, [5, 10, 8, 12], [5, 10, 11]),
        (100, 3, [5, 10, 8, 12, 13], [5, 10, 11, 12]),
        (100, 1, [5, 10, 8], [5]),
        # several adjusted timestamps in a row
        *((ts, 100, [5, 10, 8, 11, 14], [5]) for ts in (9, 10, 11)),
        (12, 100, [5, 10, 8, 11, 14], [5, 10, 11, 12]),
        *((100, v, [5, 10, 8, 11, 14], [5]) for v in (0, 1, 2)),
        (100, 3, [5, 10, 8, 11, 14], [5, 10, 11, 12]),
        *((ts, 100, [5, 10, 8, 9], [5]) for ts in (9, 10, 11)),
        (12, 100, [5, 10, 8, 9, 13], [5, 10, 11, 12]),
        *((100, v, [5, 10, 8, 9], [5]) for v in (0, 1, 2)),
        (100, 3, [5, 10, 8, 9, 13], [5, 10, 11, 12]),
        *((ts, 100, [10, 8, 9], []) for ts in (9, 10, 11)),
        (12, 100, [10, 8, 9, 13], [10, 11, 12]),
        *((100, v, [10, 8, 9], []) for v in (0, 1)),
        (100, 2, [10, 8, 9, 13], [10, 11, 12]),
        # several batches of adjustments: 5, 10, 11, 12, 13, 15, 16, 17 once adjusted
        (12, 100, [5, 10, 8, 9, 12, 15, 14, 14], [5]),
        *((ts, 100, [5, 10, 8, 9, 12, 15, 14, 14], [5, 10, 11, 12, 13]) for ts in (13, 14, 15, 16)),
        (17, 100, [5, 10, 8, 9, 12, 15, 14, 14, 18], [5, 10, 11, 12, 13, 15, 16, 17]),
    ],
)
def test_the_walk_deletes_what_deltas_does(max_timestamp, max_version, timestamps, deleted):
    assert walk(timestamps, max_timestamp=max_timestamp, max_version=max_version) == deleted


def named(*files: tuple[str, int, int]) -> list[LogFile]:
    return [LogFile(name, version, modified) for name, version, modified in files]


def test_a_segment_goes_with_its_newest_file_and_a_versions_files_do_not_adjust_each_other():
    # version 0 is younger than the cutoff, 1 older: 1's checksum is adjusted past 0's commit, but its
    # commit (the same version) is not, and it is the segment's newest file before checkpoint 2
    files = named(
        ("00000000000000000000.crc", 0, 90),
        ("00000000000000000000.json", 0, 90),
        ("00000000000000000001.crc", 1, 10),
        ("00000000000000000001.json", 1, 10),
        ("00000000000000000002.checkpoint.parquet", 2, 95),
        ("00000000000000000002.json", 2, 95),
    )
    assert [f.name for f in expired_files(files, cutoff=50, last_checkpoint=2)] == [f.name for f in files[:4]]
    # the newest file of the segment younger than the cutoff: the whole segment stays
    assert expired_files(files[:2] + files[4:], cutoff=50, last_checkpoint=2) == []
    # nothing after the newest checkpoint goes, nor a segment no checkpoint closes
    assert expired_files(files[:4], cutoff=500, last_checkpoint=2) == []


def test_when_the_first_segment_stays_the_walk_goes_on_from_the_second():
    # Delta's cleanup asks its walk whether anything expired (consuming the first segment, which stays),
    # then deletes as it walks on: the second segment goes, its newest file old, the first stays
    files = named(
        ("00000000000000000000.json", 0, 90),
        ("00000000000000000001.checkpoint.parquet", 1, 97),
        ("00000000000000000001.json", 1, 97),
        ("00000000000000000002.checkpoint.parquet", 2, 10),  # adjusted to 98: closes no segment
        ("00000000000000000002.json", 2, 10),  # the same version: not adjusted
        ("00000000000000000003.checkpoint.parquet", 3, 100),
        ("00000000000000000003.json", 3, 100),
    )
    assert [f.name for f in expired_files(files, cutoff=50, last_checkpoint=3)] == [
        f.name for f in files[1:5]
    ]
    # the second segment staying too ends the walk there, whatever a third would be
    later = named(
        ("00000000000000000003.json", 3, 100),
        ("00000000000000000004.checkpoint.parquet", 4, 101),
        ("00000000000000000004.json", 4, 10),
        ("00000000000000000005.checkpoint.parquet", 5, 102),
    )
    young = [*files[:2], *named(("00000000000000000001.json", 1, 97)), files[5], *later]
    assert expired_files(young, cutoff=50, last_checkpoint=5) == []


def test_a_multi_part_checkpoint_closes_a_segment_once_complete():
    files = named(
        ("00000000000000000000.json", 0, 10),
        ("00000000000000000001.checkpoint.0000000001.0000000002.parquet", 1, 20),
        ("00000000000000000001.checkpoint.0000000002.0000000002.parquet", 1, 20),
        ("00000000000000000001.json", 1, 20),
    )
    assert [f.name for f in expired_files(files, cutoff=15, last_checkpoint=1)] == [files[0].name]
    # an incomplete one closes nothing
    assert expired_files(files[:2] + files[3:], cutoff=15, last_checkpoint=1) == []


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("interval 30 days", 30 * 86_400_000),
        ("INTERVAL 1 HOURS", 3_600_000),
        ("2 weeks", 14 * 86_400_000),
        ("1 day 12 hours", 36 * 3_600_000),
        ("interval 1 second", 1_000),
        ("interval 90 minutes", 5_400_000),
        ("1 month", None),  # Delta refuses months and years
        ("forever", None),
        ("interval", None),
        ("1 day and more", None),
    ],
)
def test_a_log_retention_reads_as_deltas_milliseconds(text, ms):
    assert retention_ms(text) == ms


def test_the_cutoff_is_the_midnight_before_the_retention():
    now = datetime.datetime(2026, 11, 29, 11, 0, tzinfo=datetime.UTC)
    at = int(now.timestamp() * 1000)
    midnight = int(datetime.datetime(2026, 11, 29, tzinfo=datetime.UTC).timestamp() * 1000)
    assert cutoff_ms(at, 3_600_000) == midnight
    assert cutoff_ms(at, 12 * 3_600_000) == midnight - 86_400_000


HOUR = 3600.0
# An age past the tables' one-hour retention but after the cutoff's midnight, which Delta keeps: hours before
# a run, resolved by ``aged_table`` (``young_hours``). A fixed age (three hours, once) falls before the
# midnight when the test runs between 01:00 and 04:00 UTC.
YOUNG = -1.0
# Hours since each version's log files (0 to 3, before the merge's 4) were last modified, and the commits
# Delta's cleanup after the merge's checkpoint keeps. Files of one age have one timestamp, so checkpoint 2,
# no younger than the commit before it, is adjusted and closes no segment: 0 to 3 go or stay together.
AGES = {
    # past the retention, but modified since the cutoff's midnight: Delta keeps them (deltalake's cleanup
    # deleted them)
    "hours old": ([YOUNG] * 4, [0, 1, 2, 3, 4]),
    # past the retention: everything before the merge's checkpoint goes
    "days old": ([80, 80, 80, 80], [4]),
    # the segment's newest file is young: all of it stays (deltalake's cleanup deleted 0 to 2)
    "newest young": ([80, 80, 80, YOUNG], [0, 1, 2, 3, 4]),
    # the segment's newest file is old: all of it goes, version 0 too, younger than the cutoff though it is
    "oldest young": ([YOUNG, 80, 80, 80], [4]),
}


def young_hours(now: float) -> float:
    """An age, in hours before ``now``, past a one-hour retention and after the cutoff's midnight: half-way
    between the two (at least an hour after that midnight, as the cutoff is an hour before ``now``)."""
    cutoff = cutoff_ms(int(now * 1000), int(HOUR * 1000)) / 1000
    return 1 + (now - HOUR - cutoff) / HOUR / 2


def test_young_hours_lie_between_the_retention_and_the_cutoff():
    midnight = datetime.datetime(2026, 11, 30, tzinfo=datetime.UTC).timestamp()
    for hour in (0.5, 1.01, 1.5, 2, 3.5, 12, 23.9):
        now = midnight + hour * HOUR
        young = young_hours(now)
        assert young > 1 and now - young * HOUR > cutoff_ms(int(now * 1000), int(HOUR * 1000)) / 1000


def aged_table(
    spark: SparkSession, folder: Path, ages: list[float], *, v2: bool, checkpoint_interval: int = 2
) -> str:
    """Delta's table at version 3 (checkpoints at ``checkpoint_interval``: at 2, one due at 4), a log
    retention of an hour, each version's log files last modified ``ages`` hours before now."""
    target = folder / "orders"
    features = ", 'delta.feature.v2Checkpoint' = 'supported', 'delta.checkpointPolicy' = 'v2'" if v2 else ""
    spark.sql(
        f"CREATE TABLE delta.`{target}` (id BIGINT, qty INT) USING delta TBLPROPERTIES ("
        f"'delta.checkpointInterval' = '{checkpoint_interval}', "
        "'delta.logRetentionDuration' = 'interval 1 hours', "
        f"'delta.deletedFileRetentionDuration' = 'interval 1 hours'{features})"
    ).collect()
    for first in (0, 10, 20):
        spark.sql(f"INSERT INTO delta.`{target}` VALUES ({first}, 1), ({first + 1}, 2)").collect()
    now = time.time()
    age_log(target, [young_hours(now) if age == YOUNG else age for age in ages], now)
    return str(target)


def kept(table: str) -> dict[str, list[int]]:
    """The versions whose commits, checkpoints and checksums the log keeps."""
    names = [p.name for p in (Path(table) / "_delta_log").iterdir() if p.is_file()]

    def versions(kind: re.Pattern[str]) -> list[int]:
        return sorted({int(n[:20]) for n in names if kind.fullmatch(n)})

    return {
        "commits": versions(re.compile(r"\d{20}\.json")),
        "checkpoints": versions(re.compile(r"\d{20}\.checkpoint.*")),
        "checksums": versions(re.compile(r"\d{20}\.crc")),
    }


# Every age with either checkpoint kind locally; in CI one pairing a day: the differential suite draws aged
# logs, checkpoint intervals and v2 checkpoints in every run (tests/run_profile.py)
@pytest.mark.parametrize(
    ("ages", "v2"),
    pairing_of_the_day(sorted(AGES), [False, True]),
    ids=lambda value: {False: "classic checkpoints", True: "v2 checkpoints"}.get(value, value),
)
def test_the_merge_keeps_the_log_history_deltas_merge_keeps(spark, tmp_path, ages, v2):
    hours, commits = AGES[ages]
    target = aged_table(spark, tmp_path, hours, v2=v2)
    theirs = str(tmp_path / "theirs")
    shutil.copytree(target, theirs, copy_function=shutil.copy2)  # modification times too
    source = str(tmp_path / "extract.parquet")
    pq.write_table(
        pa.table({"id": pa.array([1, 50], pa.int64()), "qty": pa.array([9, 9], pa.int32())}), source
    )

    delta_merge(spark, PLAIN_UPSERT, theirs, source)
    result = run_merge(spark, parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source)))

    assert result.version == 4
    ours, delta = kept(target), kept(theirs)
    assert ours["commits"] == delta["commits"] == commits
    # the engine writes no checksum of its own commit
    assert ours["checksums"] == [v for v in delta["checksums"] if v != 4]
    if v2 and commits == [4]:
        # Delta first copied the checkpoint it had read the table from (2, a UUID-named V2 checkpoint) to a
        # classic name, which its cleanup keeps: the listed difference no-compatibility-checkpoint
        assert delta["checkpoints"] == [2, 4] and ours["checkpoints"] == [4]
        # the sidecars of the checkpoint ours deleted went with it (its own checkpoint has none)
        assert list((Path(target) / "_delta_log" / "_sidecars").iterdir()) == []
    else:
        assert ours["checkpoints"] == delta["checkpoints"]


def test_the_merge_deletes_the_middle_of_the_history_where_deltas_merge_does(spark, tmp_path):
    # Given: a checkpoint at every version; version 0 young (``YOUNG``), 1 half an hour, 2 and 3 days old (a
    # copy's or a restore's times): the first segment (version 0) stays, the second (1 to 3) may go
    target = aged_table(spark, tmp_path, [YOUNG, 0.5, 80, 80], v2=False, checkpoint_interval=1)
    theirs = str(tmp_path / "theirs")
    shutil.copytree(target, theirs, copy_function=shutil.copy2)
    source = str(tmp_path / "extract.parquet")
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "qty": pa.array([9], pa.int32())}), source)
    # When
    delta_merge(spark, PLAIN_UPSERT, theirs, source)
    run_merge(spark, parse_merge_sql(PLAIN_UPSERT.format(target=target, source=source)))
    # Then: both logs keep version 0 and the merge's 4, and lose 1 to 3
    ours, delta = kept(target), kept(theirs)
    assert ours["commits"] == delta["commits"] == [0, 4]
    assert ours["checkpoints"] == delta["checkpoints"] == [4]
