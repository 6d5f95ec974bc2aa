"""Where a benchmark run is kept: ``bench/results/<kind>-<timestamp>.json`` (every figure) beside its ``.md``
report (what is quoted)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any


def write_result(kind: str, result: Any, markdown: str, results_dir: Path) -> Path:
    """Write ``result`` (a dataclass with a ``started`` timestamp) and its report; returns the report."""
    results_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{kind}-{result.started.replace(':', '').replace('-', '')}"
    (results_dir / f"{stem}.json").write_text(json.dumps(dataclasses.asdict(result), indent=1))
    report = results_dir / f"{stem}.md"
    report.write_text(markdown)
    return report
