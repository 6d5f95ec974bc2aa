"""A table's state as its ``_delta_log`` states it, read by the tests' own fold of the log (its newest
checkpoint, then the commit files after it), so that the differential suite compares Delta's table and ours
through a reader that is neither runner's: the protocol, the table properties, the partition columns, the
domain metadata in force, the newest commit's ``commitInfo``, and the history the log keeps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

_ACTIONS = ("protocol", "metaData", "domainMetadata")


@dataclass(frozen=True)
class LogState:
    """What the log holds in force at its newest version."""

    version: int
    protocol: dict[str, Any]
    properties: dict[str, str]
    partition_columns: tuple[str, ...]
    domains: dict[str, Any] = field(default_factory=dict)  # domain: its configuration, parsed
    commit: dict[str, Any] = field(default_factory=dict)  # the newest version's commitInfo
    checkpoint: int | None = None  # the newest checkpoint's version, as _last_checkpoint names it
    # The history the log keeps (a cleanup deletes the oldest): its first commit, its checkpoints' versions
    first_commit: int = 0
    checkpoints: tuple[int, ...] = ()

    def comparable_protocol(self) -> dict[str, Any]:
        """The protocol with its feature lists as sets (their order is no part of it)."""
        return {
            key: sorted(value) if isinstance(value, list) else value for key, value in self.protocol.items()
        }


def log_state(table: str) -> LogState:
    """The state of the local Delta table at ``table``, at its newest version."""
    log = Path(table) / "_delta_log"
    versions = sorted(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit())
    checkpoint = _last_checkpoint(log)
    actions = _checkpoint_actions(log, checkpoint) if checkpoint is not None else []
    for version in versions:
        if checkpoint is None or version > checkpoint:
            text = (log / f"{version:020d}.json").read_text()
            actions += [json.loads(line) for line in text.splitlines() if line.strip()]
    protocol: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    domains: dict[str, Any] = {}
    for action in actions:
        if action.get("protocol"):
            protocol = action["protocol"]
        if action.get("metaData"):
            metadata = action["metaData"]
        if action.get("domainMetadata"):
            domain = action["domainMetadata"]
            if domain.get("removed"):
                domains.pop(domain["domain"], None)
            else:
                domains[domain["domain"]] = json.loads(domain["configuration"] or "null")
    newest = (log / f"{versions[-1]:020d}.json").read_text().splitlines()
    commit: dict[str, Any] = next(
        (a["commitInfo"] for a in map(json.loads, newest) if a.get("commitInfo")), {}
    )
    return LogState(
        version=versions[-1],
        protocol={k: v for k, v in protocol.items() if v is not None},
        properties=dict(metadata.get("configuration") or {}),
        partition_columns=tuple(metadata.get("partitionColumns") or ()),
        domains=domains,
        commit=commit,
        checkpoint=checkpoint,
        first_commit=versions[0],
        checkpoints=tuple(sorted({int(p.name[:20]) for p in log.glob("[0-9]*.checkpoint*")})),
    )


def _last_checkpoint(log: Path) -> int | None:
    pointer = log / "_last_checkpoint"
    return int(json.loads(pointer.read_text())["version"]) if pointer.exists() else None


def _checkpoint_actions(log: Path, version: int) -> list[dict[str, Any]]:
    """The non-file actions of the checkpoint at ``version``: classic, multi-part or V2 (top-level file)."""
    actions: list[dict[str, Any]] = []
    for path in sorted(log.glob(f"{version:020d}.checkpoint*")):
        if path.suffix == ".json":
            actions += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            continue
        present = [name for name in _ACTIONS if name in pq.read_schema(path).names]
        for row in pq.read_table(path, columns=present).to_pylist():
            actions.append({name: value for name, value in row.items() if value is not None})
    return actions
