"""Bounds on merge metrics and matching commits, against real Delta tables written by deltalake."""

from __future__ import annotations

import datetime
import json

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties

from airflow_provider_deltamerge.delta.log.commit_match import KNOWN_METRICS, CommitCriteria, MetricBounds
from airflow_provider_deltamerge.delta.log.merge_commits import find_commit
from airflow_provider_deltamerge.exceptions import MetricBoundsError
from airflow_provider_deltamerge.operators.delta_merge_check import DeltaMergeCheckOperator
from tests.airflow.conftest import make_table, merge_commit

UPSERT = {"dagId": "upsert", "taskId": "merge_orders", "runId": "r1", "mapIndex": -1, "tryNumber": 1}
BOUNDS = MetricBounds(
    {
        "numSourceRows": {"min": 1},
        "numTargetRowsDeleted": {"max": 1000},
        "numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.1},
        "tableVersion": {"min": 1, "max": 10},
    }
)


def test_bounds_that_hold_report_nothing():
    metrics = {"numSourceRows": 5, "numTargetRowsDeleted": 10, "numTargetRowsCopied": 1000, "tableVersion": 3}
    assert BOUNDS.broken(metrics) == []


def test_every_broken_bound_is_reported_with_its_values():
    metrics = {"numSourceRows": 0, "numTargetRowsDeleted": 5000, "numTargetRowsCopied": 10000}

    broken = BOUNDS.broken(metrics)

    assert broken == [
        "numSourceRows = 0, below min 1",
        "numTargetRowsDeleted = 5000, above max 1000",
        "numTargetRowsDeleted / numTargetRowsCopied = 0.5 (5000 / 10000), above max 0.1",
        "tableVersion: tableVersion missing from the metrics",
    ]


def test_ratio_over_zero_is_zero_only_when_nothing_happened():
    ratio = MetricBounds({"numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.1}})
    assert ratio.broken({"numTargetRowsDeleted": 0, "numTargetRowsCopied": 0}) == []
    assert ratio.broken({"numTargetRowsDeleted": 1, "numTargetRowsCopied": "0"}) == [
        "numTargetRowsDeleted / numTargetRowsCopied = inf (1 / 0), above max 0.1"
    ]


# A delta-spark merge's XCom value: Delta's commit has no after-skipping metrics, so they are None.
UNMEASURED = {"numSourceRows": 5, "numTargetFilesAfterSkipping": None, "numTargetBytesAfterSkipping": None}


def test_a_bound_on_a_metric_the_merge_did_not_measure_is_an_error_not_a_pass():
    bounds = MetricBounds(
        {
            "numSourceRows": {"min": 1},
            "numTargetFilesAfterSkipping": {"max": 10},
            "numTargetBytesAfterSkipping / numSourceRows": {"max": 1000},
        }
    )
    with pytest.raises(MetricBoundsError) as caught:
        bounds.broken(UNMEASURED)
    assert caught.value.error_class == "DELTAMERGE_METRIC_NOT_MEASURED"
    assert "1. numTargetFilesAfterSkipping: numTargetFilesAfterSkipping" in caught.value.message
    assert (
        "2. numTargetBytesAfterSkipping / numSourceRows: numTargetBytesAfterSkipping" in caught.value.message
    )
    assert "backend='engine'" in caught.value.message
    # A metric that is absent (an older commit) still just breaks its bound, as before.
    assert MetricBounds({"numTargetFilesAfterSkipping": {"max": 10}}).broken({}) == [
        "numTargetFilesAfterSkipping: numTargetFilesAfterSkipping missing from the metrics"
    ]


def test_the_check_fails_on_an_unmeasured_metric_even_where_a_broken_bound_would_skip():
    check = DeltaMergeCheckOperator(
        task_id="check",
        bounds={"numTargetFilesAfterSkipping": {"max": 10}},
        metrics=UNMEASURED,
        on_failure="skip",
    )
    with pytest.raises(AirflowFailException, match="DELTAMERGE_METRIC_NOT_MEASURED"):
        check.execute({})  # type: ignore[arg-type]


def test_bad_bounds_are_listed_together_with_the_known_metrics():
    with pytest.raises(MetricBoundsError) as caught:
        MetricBounds(
            {
                "numTargetRowDeleted": {"max": 1},
                "numSourceRows / numRows": {"max": 1},
                "numSourceRows": {"maximum": 3},
                "numTargetRowsInserted": {"min": 5, "max": 1},
            }
        )

    message = str(caught.value)
    assert "1. 'numTargetRowDeleted': unknown metric 'numTargetRowDeleted'" in message
    assert "2. 'numSourceRows / numRows': unknown metric 'numRows'" in message
    assert "3. 'numSourceRows': give {'min': x}, {'max': y} or both" in message
    assert "4. 'numTargetRowsInserted': min 5 is greater than max 1" in message
    assert all(name in message for name in KNOWN_METRICS)


@pytest.fixture
def history_table(tmp_path):
    """v0 plain write; v1 our merge (run r1 of Jan 1, deletes); v2 another DAG's merge; v3 our merge (run r2
    of Jan 2)."""
    table = make_table(tmp_path / "orders")
    day_1, day_2 = {"logicalDate": "2024-01-01T00:00:00+00:00"}, {"logicalDate": "2024-01-02T00:00:00+00:00"}
    deleting = {"numTargetRowsDeleted": 5, "numTargetRowsInserted": 0}
    merge_commit(table, metrics=deleting, provenance={**UPSERT, **day_1})
    merge_commit(table, metrics={"numTargetRowsInserted": 7}, provenance={**UPSERT, "dagId": "other"})
    merge_commit(table, metrics={"numTargetRowsInserted": 100}, provenance={**UPSERT, "runId": "r2", **day_2})
    return table


@pytest.mark.parametrize(
    ("criteria", "version"),
    [
        (CommitCriteria(), 3),
        (CommitCriteria(operation="merge"), 3),
        (CommitCriteria(operation="WRITE"), 0),
        (CommitCriteria.from_values(operation="MERGE", after_version="1"), 2),
        (CommitCriteria(dag_id="upsert", after_version=1), 3),
        (CommitCriteria(run_id="r2"), 3),
        (CommitCriteria(dag_id="upsert", task_id="merge_orders", run_id="r1"), 1),
        (CommitCriteria.from_values(metrics={"numTargetRowsInserted": {"max": 7}}), 2),
        (CommitCriteria.from_values(after_version="0"), 1),
        (CommitCriteria.from_values(dag_id="upsert", logical_date="2024-01-01"), 1),
        (CommitCriteria.from_values(logical_date="2024-01-02 00:00:00+00:00"), 3),
        (CommitCriteria.from_values(logical_date=datetime.datetime(2024, 1, 3, tzinfo=datetime.UTC)), None),
        (
            CommitCriteria.from_values(
                metrics={"numTargetRowsInserted": {"min": 1}, "tableVersion": {"min": 3}}
            ),
            3,
        ),
        (CommitCriteria(dag_id="upsert", run_id="r3"), None),
        (CommitCriteria(after_version=3), None),
    ],
)
def test_the_newest_matching_commit_is_found_or_the_next_after_a_version(history_table, criteria, version):
    commit = find_commit(history_table, criteria)
    assert (commit.version if commit else None) == version


def test_found_commit_carries_metrics_provenance_and_time(history_table):
    before = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)

    commit = find_commit(history_table, CommitCriteria(run_id="r2", after_time=before))

    assert commit is not None
    value = commit.to_xcom()
    assert value["version"] == 3
    assert value["operation"] == "MERGE"
    assert value["metrics"] == {"numTargetRowsInserted": 100}
    assert value["provenance"] == {**UPSERT, "runId": "r2", "logicalDate": "2024-01-02T00:00:00+00:00"}
    assert datetime.datetime.fromisoformat(value["timestamp"]) > before
    assert json.loads(json.dumps(value)) == value  # an XCom value as is
    future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=5)
    assert find_commit(history_table, CommitCriteria.from_values(after_time=future.isoformat())) is None


def test_provenance_of_a_delta_spark_merge_is_read_from_user_metadata(tmp_path):
    table = make_table(tmp_path / "orders")
    dt = DeltaTable(table)
    identity = json.dumps({"dagId": "upsert", "runId": "r9", "submissionId": "s"})
    dt.create_write_transaction(
        [],
        mode="append",
        schema=dt.schema(),
        commit_properties=CommitProperties(custom_metadata={"userMetadata": identity}),
    )

    commit = find_commit(table, CommitCriteria(run_id="r9"))

    assert commit is not None and commit.version == 1 and commit.provenance["dagId"] == "upsert"


def test_a_table_that_does_not_exist_yet_has_no_matching_commit(tmp_path):
    assert find_commit(str(tmp_path / "missing"), CommitCriteria()) is None


def test_criteria_survive_their_json_form():
    criteria = CommitCriteria.from_values(
        operation="MERGE",
        after_version="4",
        after_time="2024-01-02T00:00:00",
        dag_id="upsert",
        metrics={"numTargetRowsDeleted / numTargetRowsCopied": {"max": 0.1}},
        logical_date="2024-01-02",
    )
    assert CommitCriteria.from_values(**json.loads(json.dumps(criteria.to_json()))) == criteria
    assert criteria.after_time == datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)


def test_unreadable_criteria_name_the_form_expected():
    with pytest.raises(MetricBoundsError, match="after_version must be a table version"):
        CommitCriteria.from_values(after_version="v3")
    with pytest.raises(MetricBoundsError, match="after_time must be a datetime or an ISO 8601 string"):
        CommitCriteria.from_values(after_time="yesterday")
