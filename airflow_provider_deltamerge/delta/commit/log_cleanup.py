"""Expired-log cleanup after a checkpoint, by Delta's rules (``MetadataCleanup.cleanUpExpiredLogs``).

Delta deletes a log file (a commit, a checkpoint or a version checksum, ``<v>.crc``) when all of these hold:

* its version is below the newest checkpoint's (``_last_checkpoint``), so the table stays readable;
* it was last modified at or before the cutoff: ``delta.logRetentionDuration`` (30 days by default) before
  now, truncated to that day's midnight (UTC). Delta keeps the files of the cutoff's day, so a file may
  outlive the retention by up to a day;
* it lies before a checkpoint in name order, in a segment (the files between two checkpoints) whose newest
  file may be deleted, and every segment before it goes too (``BufferingLogDeletionIterator``). A file of
  a later version that is not younger than the file before it counts as one millisecond younger: time
  travel by timestamp must keep finding the same version, so the files its adjusted timestamp leans on
  stay while it stays. The walk ends at the first segment that must stay, but for the first segment:
  Delta asks the walk whether anything expired before it deletes (to make a compatibility checkpoint
  first), and that question consumes the first segment; when that one must stay, the deletion goes on
  walking from the second. A log can so lose a middle run of versions and keep its oldest.

Then the staged commits (``_staged_commits/<v>.<uuid>.json``) of the deleted versions go, and when a
checkpoint went, the sidecar files no remaining checkpoint names that are older than the cutoff.

``deltalake``'s own cleanup cuts at the retention without the day's truncation and leaves the checksums:
a table merged into by this engine would lose history Delta keeps. Under checkpoint protection, Delta's
third way to allow a cleanup (reading every deleted version's protocol from its checksum) is not taken
here. Delta reaches it only where the kept history does not begin at a complete checkpoint; as the walk
deletes whole segments, each ending before a checkpoint, that takes a multi-part checkpoint missing a
part. Such a table keeps those files until Delta cleans them up.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import obstore
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltamerge.delta.commit.log_store import object_store

log = logging.getLogger(__name__)

LOG_RETENTION_KEY = "delta.logRetentionDuration"
DEFAULT_LOG_RETENTION = "interval 30 days"  # DeltaConfigs.LOG_RETENTION
CLEANUP_KEY = "delta.enableExpiredLogCleanup"
# FileNames' patterns of the files the walk considers: commits, version checksums, and checkpoints (classic
# or multi-part: groups 2 and 3 the part and the parts; V2, UUID-named).
_COMMIT = re.compile(r"(\d+)\.json")
_CHECKSUM = re.compile(r"(\d+)\.crc")
_CHECKPOINT = re.compile(
    r"(\d+)\.checkpoint(?:\.(\d+)\.(\d+))?\.parquet|(\d+)\.checkpoint\.[^.]+\.(json|parquet)"
)
_STAGED_COMMIT = re.compile(r"(\d+)\.[^.]+\.json")
_SIDECARS = "_sidecars"
_STAGED = "_staged_commits"
# Spark's interval units (IntervalUtils) that a log retention may use, in milliseconds: Delta refuses months
# and years there (DeltaConfigs.isValidIntervalConfigValue).
_UNIT_MS = {
    "week": 7 * 86_400_000,
    "day": 86_400_000,
    "hour": 3_600_000,
    "minute": 60_000,
    "second": 1_000,
    "millisecond": 1,
    "microsecond": 0.001,
}
_INTERVAL_PART = re.compile(r"([+-]?\d+(?:\.\d+)?)\s+([a-z]+?)s?\b")


@dataclass(frozen=True)
class LogFile:
    """A file of ``_delta_log`` the walk considers: its name, version and modification time (ms)."""

    name: str
    version: int
    modified_ms: int
    size: int = 1


def retention_ms(value: str) -> int | None:
    """A log retention (``interval 30 days``, ``2 weeks``, ``1 day 12 hours``) in milliseconds, as Delta's
    ``getMilliSeconds`` reads it; None where it is not an interval of those units."""
    text = value.strip().lower().removeprefix("interval").strip()
    parts = _INTERVAL_PART.findall(text)
    if not parts or _INTERVAL_PART.sub("", text).strip():
        return None
    if any(unit not in _UNIT_MS for _, unit in parts):
        return None
    return int(sum(float(number) * _UNIT_MS[unit] for number, unit in parts))


def cutoff_ms(now_ms: int, retention: int) -> int:
    """The newest modification time a file may have to be deleted: ``retention`` before ``now_ms``,
    truncated to that day's midnight in UTC (``truncateDate(..., DAY)``)."""
    moment = datetime.datetime.fromtimestamp((now_ms - retention) / 1000, tz=datetime.UTC)
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return int(midnight.timestamp() * 1000)


def expired_files(files: Iterable[LogFile], *, cutoff: int, last_checkpoint: int) -> list[LogFile]:
    """The files Delta's ``BufferingLogDeletionIterator`` deletes, in name order (see the module's
    docstring).

    A file of a later version whose timestamp is not later than the file before it gets that file's plus
    one millisecond; the files since the last checkpoint gather in a segment, which a complete checkpoint
    (not itself adjusted) closes: the segment goes when its newest file may, and the walk stops at the
    first segment after the first that stays (``cleanUpExpiredLogs`` asks ``hasNext`` once before its
    ``foreach`` asks again). Files after the newest checkpoint always stay.
    """

    def deletable(file: LogFile) -> bool:
        return file.modified_ms <= cutoff and file.version <= last_checkpoint - 1

    expired: list[LogFile] = []
    segment: list[LogFile] = []
    parts: dict[tuple[int, int], list[LogFile]] = {}  # the multi-part checkpoints' parts met so far
    last: LogFile | None = None
    walked = False  # whether a segment was closed: the one Delta's first question consumed
    for file in sorted(files, key=lambda f: f.name):
        checkpoint = _CHECKPOINT.fullmatch(file.name)
        if last is not None and last.version < file.version and last.modified_ms >= file.modified_ms:
            file = replace(file, modified_ms=last.modified_ms + 1)
            segment.append(file)
        elif last is not None and checkpoint is not None and file.size > 0:
            complete = [file]
            if checkpoint[3] is not None:  # one part of a multi-part checkpoint
                key = (file.version, int(checkpoint[3]))
                parts.setdefault(key, []).append(file)
                if len(parts[key]) < key[1]:
                    last = file
                    continue
                complete = parts.pop(key)
            if deletable(segment[-1]):
                expired += segment
            elif walked:
                return expired
            walked = True
            segment = complete
        else:
            segment.append(file)
        last = file
    return expired


def clean_up_expired_logs(
    table_uri: str, settings: Mapping[str, str | None], *, protected_before: int | None
) -> None:
    """Delete the log files Delta's cleanup would after a checkpoint of ``table_uri`` (whose table
    properties are ``settings``); nothing when ``delta.enableExpiredLogCleanup`` is false.

    Args:
        protected_before: ``delta.requireCheckpointProtectionBeforeVersion`` under checkpoint protection.
    """
    if (settings.get(CLEANUP_KEY) or "true").lower() == "false":
        return
    setting = settings.get(LOG_RETENTION_KEY) or DEFAULT_LOG_RETENTION
    retention = retention_ms(setting)
    if retention is None:
        log.warning(
            "Log cleanup: skipped; %s=%r is not an interval of days or less", LOG_RETENTION_KEY, setting
        )
        return
    store = object_store(table_uri.rstrip("/") + "/_delta_log")
    if store is None:
        return
    cutoff = cutoff_ms(round(time.time() * 1000), retention)
    listed = obstore.list_with_delimiter(store)
    names = {entry["path"]: entry for entry in listed["objects"]}
    last_checkpoint = _last_checkpoint(store, names)
    if last_checkpoint is None:
        return
    files = [
        LogFile(name, int(name.split(".", 1)[0]), _modified_ms(entry), int(entry["size"]))
        for name, entry in names.items()
        if any(kind.fullmatch(name) for kind in (_COMMIT, _CHECKSUM, _CHECKPOINT))
    ]
    expired = expired_files(files, cutoff=cutoff, last_checkpoint=last_checkpoint)
    if protected_before is not None and not _protection_allows(expired, protected_before, names):
        log.info("Log cleanup: skipped; checkpoint protection keeps the history before %d", protected_before)
        return
    if not expired:
        return
    obstore.delete(store, _with_hidden_checksums([f.name for f in expired], set(names)))
    deleted_commits = [f.version for f in expired if _COMMIT.fullmatch(f.name)]
    staged = _staged_commits_up_to(store, max(deleted_commits)) if deleted_commits else []
    sidecars = (
        _unreferenced_sidecars(store, cutoff) if any(_CHECKPOINT.fullmatch(f.name) for f in expired) else []
    )
    if staged or sidecars:
        obstore.delete(store, staged + sidecars)
    log.info(
        "Log cleanup: %d log files older than %s deleted",
        len(expired),
        datetime.datetime.fromtimestamp(cutoff / 1000, tz=datetime.UTC).isoformat(),
    )


def _modified_ms(entry: Mapping[str, Any]) -> int:
    # Hadoop's FileStatus keeps whole milliseconds
    return int(entry["last_modified"].timestamp() * 1000)


def _last_checkpoint(store: Any, names: dict[str, Any]) -> int | None:
    if "_last_checkpoint" not in names:
        return None
    return int(json.loads(bytes(obstore.get(store, "_last_checkpoint").bytes()))["version"])


def _protection_allows(expired: Sequence[LogFile], protected_before: int, names: dict[str, Any]) -> bool:
    """Delta's ``metadataCleanupAllowed`` under checkpoint protection, without its last resort: the commits
    to delete reach the protected version, or a checkpoint stands where the kept history begins."""
    if not expired:
        return True
    versions = sorted(f.version for f in expired if _COMMIT.fullmatch(f.name))
    below = [v for v in versions if v <= protected_before - 1]
    end = max(below, default=0)
    if end >= protected_before - 1:
        return True
    return _complete_checkpoint_at(end + 1, names)


def _complete_checkpoint_at(version: int, names: dict[str, Any]) -> bool:
    parts: dict[int, set[int]] = {}
    for name in names:
        match = _CHECKPOINT.fullmatch(name)
        if match is None or int(match[1] or match[4]) != version:
            continue
        if match[2] is None:
            return True  # a classic or a V2 checkpoint: one file
        parts.setdefault(int(match[3]), set()).add(int(match[2]))
    return any(found == set(range(1, total + 1)) for total, found in parts.items())


def _staged_commits_up_to(store: Any, version: int) -> list[str]:
    """The staged commits of the versions up to ``version``, in order, until the first later one."""
    names = sorted(e["path"] for e in obstore.list_with_delimiter(store, _STAGED)["objects"])
    kept: list[str] = []
    for name in names:
        match = _STAGED_COMMIT.fullmatch(_name(name))
        if match is None or int(match[1]) > version:
            break
        kept.append(name)
    return kept


def _unreferenced_sidecars(store: Any, cutoff: int) -> list[str]:
    """The sidecar files older than ``cutoff`` that no remaining classic or V2 checkpoint names."""
    sidecars = obstore.list_with_delimiter(store, _SIDECARS)["objects"]
    if not sidecars:
        return []
    referenced: set[str] = set()
    for entry in obstore.list_with_delimiter(store)["objects"]:
        match = _CHECKPOINT.fullmatch(entry["path"])
        if match is None or match[2] is not None:
            continue  # multi-part checkpoints name no sidecars
        referenced |= _sidecar_names(store, entry["path"])
    unreferenced = [
        e["path"]
        for e in sidecars
        if not _name(e["path"]).startswith(".")
        and _modified_ms(e) < cutoff
        and _name(e["path"]) not in referenced
    ]
    return _with_hidden_checksums(unreferenced, {e["path"] for e in sidecars})


def _with_hidden_checksums(paths: Sequence[str], listed: set[str]) -> list[str]:
    """``paths`` and the hidden checksum of each that ``listed`` holds: a local file system's (Hadoop's),
    which it deletes along with the file."""
    hidden = [f"{p.rsplit('/', 1)[0]}/.{_name(p)}.crc" if "/" in p else f".{p}.crc" for p in paths]
    return [*paths, *(h for h in hidden if h in listed)]


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _sidecar_names(store: Any, checkpoint: str) -> set[str]:
    """The file names of the sidecars a checkpoint's ``sidecar`` actions name."""
    data = bytes(obstore.get(store, checkpoint).bytes())
    if checkpoint.endswith(".json"):
        actions = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        return {_name(a["sidecar"]["path"]) for a in actions if a.get("sidecar")}
    table = pq.read_table(pa.BufferReader(data))
    if "sidecar" not in table.column_names:
        return set()
    return {_name(s["path"]) for s in table.column("sidecar").to_pylist() if s and s.get("path")}
