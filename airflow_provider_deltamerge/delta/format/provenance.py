"""Who made a merge commit: the record this provider writes into its commitInfo, and reading it back.

Pure Python, no ``deltalake``: the check operator and the sensor declare criteria over it when a DAG is
parsed; the reads of the log that find such commits live in ``delta/log/merge_commits.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# The commitInfo key under which every merge commit of this provider records who made it and how.
COMMIT_INFO_KEY = "deltamerge"
# How far back to look for a commit of ours: concurrent writers may have committed after it.
DEFAULT_HISTORY_DEPTH = 100


def provenance_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Who made a history entry, as this provider records it; {} for commits of other writers.

    Our engine's commits carry the record under ``COMMIT_INFO_KEY``; Delta's own MERGE (the delta-spark
    backend) cannot add keys to commitInfo, so that backend writes the same record as ``userMetadata`` JSON.
    """
    own = entry.get(COMMIT_INFO_KEY)
    if isinstance(own, dict):
        return own
    try:
        parsed = json.loads(entry.get("userMetadata") or "")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
