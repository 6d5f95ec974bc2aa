"""The partitions one commit touched, read from its actions in the Delta log (no Spark).

Neither ``deltalake``'s history nor Delta's merge metrics name partitions, but every ``add`` and ``remove``
action of a commit carries its file's ``partitionValues``: the set of them is exactly what the commit
changed, whichever backend wrote it.
"""

from __future__ import annotations

import json

from deltalake.fs import DeltaStorageHandler

Partition = dict[str, str | None]


def commit_path(version: int) -> str:
    """The log entry of ``version``, relative to the table's root."""
    return f"_delta_log/{version:020d}.json"


def touched_partitions(
    table_uri: str, version: int, storage_options: dict[str, str] | None = None
) -> list[Partition]:
    """The distinct ``partitionValues`` (column -> value as Delta writes it, None for null) of the files the
    commit at ``version`` added or removed, in a stable order; empty for an unpartitioned table."""
    storage = DeltaStorageHandler(table_uri, storage_options or None)
    entry = storage.open_input_file(commit_path(version)).read().decode("utf-8")
    found: dict[str, Partition] = {}
    for line in filter(None, map(str.strip, entry.splitlines())):
        action = json.loads(line)
        for kind in ("add", "remove"):
            values = (action.get(kind) or {}).get("partitionValues")
            if values:
                found.setdefault(json.dumps(values, sort_keys=True), dict(values))
    return [found[key] for key in sorted(found)]
