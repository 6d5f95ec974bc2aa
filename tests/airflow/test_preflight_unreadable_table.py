"""The operator's pre-flight on a table ``deltalake`` cannot open (geospatial; issue 39, item 5).

With ``backend="engine"`` the task fails before any Spark job is submitted, with Delta's
``DELTA_UNSUPPORTED_FEATURES_FOR_WRITE``, the feature and the way out; with ``auto`` and ``delta-spark`` the
columns are checked against the schema of the log's newest metadata and the job is submitted (it sends the
merge to Delta's runtime, or its engine refuses it: tests/delta/test_unreadable_features.py).

The Airflow tests have no Spark session, so the table is a crafted log with the protocol Delta 4.4 writes
for ``delta.feature.geospatial=supported`` (reader 3 / writer 7, ``geospatial`` among the reader features
and with ``invariants`` and ``appendOnly`` among the writer ones), as the test above has Delta make it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.exceptions import AirflowFailException

from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook
from airflow_provider_deltamerge.spec import insert_all, update
from tests.airflow.test_template_injection import run_task
from tests.delta.helpers import craft_table


def geospatial_table(path: Path) -> str:
    return craft_table(
        path,
        reader=3,
        writer=7,
        reader_features=["geospatial"],
        writer_features=["geospatial", "invariants", "appendOnly"],
    )


def merge(tmp_path: Path, **fields: object) -> dict[str, object]:
    return {
        "target": geospatial_table(tmp_path / "t"),
        "source": str(tmp_path / "staging" / "{{ ds }}.json"),
        "source_format": "json",  # a path pre-flight only checks for existence: the source is not the point
        "condition": "t.id = s.id",
        "clauses": [insert_all()],
        "preflight": True,
        **fields,
    }


@pytest.fixture
def staged(tmp_path: Path) -> None:
    (tmp_path / "staging").mkdir()
    (tmp_path / "staging" / "2024-01-02.json").write_text("{}")


def test_engine_only_refuses_in_pre_flight_before_any_job(mocker, tmp_path, staged):
    with pytest.raises(AirflowFailException) as raised:
        run_task(mocker, {}, backend="engine", **merge(tmp_path))
    message = str(raised.value)
    assert message.startswith("[DELTA_UNSUPPORTED_FEATURES_FOR_WRITE] Unsupported Delta write feature: table")
    assert "1. geospatial: " in message and 'backend="delta-spark"' in message
    DeltaMergeHook.run_merge.assert_not_called()  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["auto", "delta-spark"])
def test_otherwise_pre_flight_checks_columns_from_the_log_and_the_job_decides(
    mocker, tmp_path, staged, backend
):
    run = run_task(mocker, {}, backend=backend, **merge(tmp_path))
    run.submit.assert_called_once()
    assert run.submit.call_args.kwargs["backend"] == backend


def test_a_wrong_column_is_still_caught_in_pre_flight(mocker, tmp_path, staged):
    with pytest.raises(AirflowFailException, match="nope"):
        run_task(mocker, {}, backend="auto", **merge(tmp_path, clauses=[update({"nope": "s.qty"})]))
    DeltaMergeHook.run_merge.assert_not_called()  # type: ignore[attr-defined]
