"""The commit version a ``typeWidening-preview`` table records with each type change, kept true on a rebase.

Tables of type widening's preview carry ``tableVersion`` in each ``delta.typeChanges`` entry of a field's
metadata: the version that made the change. A merge that widens a column writes it for the version it
first tries; when another writer takes that version and the merge commits on top, Delta's conflict checker
moves the merge's own entries to the version it lands on (``TypeWideningMetadata.updateTypeChangeVersion``,
called per winning commit), and so does this. Entries of earlier changes name earlier versions and stay.
"""

from __future__ import annotations

import json
from typing import Any

TYPE_CHANGES = "delta.typeChanges"
TABLE_VERSION = "tableVersion"


def with_type_change_version(schema: str, first_attempt: int, version: int) -> str:
    """``schema`` (Delta's JSON form) with every type change recorded at ``first_attempt`` moved to
    ``version``; the same text when it has none."""
    parsed = json.loads(schema)
    return json.dumps(parsed, separators=(",", ":")) if _move(parsed, first_attempt, version) else schema


def _move(data_type: Any, first_attempt: int, version: int) -> bool:
    """Move the entries under ``data_type`` in place; whether any moved."""
    if not isinstance(data_type, dict):
        return False
    moved = False
    for field in data_type.get("fields", ()):
        for change in field.get("metadata", {}).get(TYPE_CHANGES, ()):
            if change.get(TABLE_VERSION) == first_attempt:
                change[TABLE_VERSION] = version
                moved = True
        moved = _move(field["type"], first_attempt, version) or moved
    for key in ("elementType", "keyType", "valueType"):
        moved = _move(data_type.get(key), first_attempt, version) or moved
    return moved
