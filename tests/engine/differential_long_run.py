"""A long run of the differential suite that a developer starts by hand and reads as it goes: every statement
judged as ``test_differential_delta`` judges it, and one JSON line per statement appended to a file (its
number, verdict, seconds, the driver's heap, the events it recorded, the report of a failure), going on past
failures so that one run finds them all. Not collected by ``make test`` (the file's name is no test's)::

    LONG_RUN_SEED=20261202 LONG_RUN_STATEMENTS=1000 LONG_RUN_LOG=/tmp/long-run.jsonl \\
        .venv/bin/pytest -p no:randomly tests/engine/differential_long_run.py

``python -m tests.engine.differential_long_run /tmp/long-run.jsonl`` prints the coverage table and every
failure so far. No example database and no shrinking: a failure is reported as drawn, its ``Case`` last, to
be added to ``differential_examples.py`` as printed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.engine.delta_differential import cases

LOG = Path(os.environ.get("LONG_RUN_LOG", "long-run.jsonl"))


def _suite() -> Any:
    # imported when a run starts: the suite's module reads the run's seed as pytest configures it
    from tests.engine import test_differential_delta

    return test_differential_delta


@pytest.fixture
def recorded_events(monkeypatch) -> list[str]:
    """The events the judged statement records, as well as Hypothesis's count of them."""
    events: list[str] = []
    suite = _suite()
    counted = suite.event

    def record(label: str) -> None:
        events.append(label)
        counted(label)

    monkeypatch.setattr(suite, "event", record)
    return events


@settings(
    max_examples=int(os.environ.get("LONG_RUN_STATEMENTS", "1000")),
    database=None,
    phases=[Phase.generate],
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@seed(int(os.environ.get("LONG_RUN_SEED", "0")))
@given(case=cases())
def test_long_run(spark, tmp_path_factory, recorded_events, case):
    recorded_events.clear()
    started = time.monotonic()
    record: dict[str, Any] = {"n": sum(1 for _ in LOG.open()) + 1 if LOG.exists() else 1}
    try:
        _suite().test_delta_and_the_engine_agree_on_generated_statements.hypothesis.inner_test(
            spark, tmp_path_factory, case
        )
        record["verdict"] = "pass"
    except AssertionError as failure:
        record["verdict"] = "fail"
        record["report"] = f"{failure}\n{case!r}"  # the Case to keep in differential_examples.py
    except Exception as error:  # a failure of the harness: kept with the statement, as a test would fail
        record["verdict"] = type(error).__name__
        record["report"] = f"{error}\n{case!r}"
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    record |= {
        "seconds": round(time.monotonic() - started, 2),
        "heap_mb": (runtime.totalMemory() - runtime.freeMemory()) // 2**20,
        "events": list(recorded_events),
    }
    with LOG.open("a") as out:
        out.write(json.dumps(record) + "\n")


def summary(log: Path) -> str:
    """The coverage table (each event's share of the statements) and every failure of the run in ``log``."""
    records = [json.loads(line) for line in log.open()]
    shares = Counter(label for record in records for label in set(record["events"]))
    verdicts = Counter(record["verdict"] for record in records)
    lines = [f"{len(records)} statements, {sum(r['seconds'] for r in records):.0f} s: {dict(verdicts)}"]
    lines += [f"{100 * n / len(records):6.1f} %  {label}" for label, n in shares.most_common()]
    lines += [f"\n#{r['n']} {r['verdict']}:\n{r['report']}" for r in records if r["verdict"] != "pass"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1])))
