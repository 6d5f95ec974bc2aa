"""Every example DAG, run for real with ``airflow dags test``."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from dags_examples.sample_lake import MARKER, extract_path, orders, prepare
from tests.e2e.conftest import asset_event_extras, start_dags_test, xcom_value
from tests.faults import CONFLICT_ENV, CRASH_ENV

pytestmark = pytest.mark.slow

NEXT_DAY = dt.date(2024, 1, 3)


def prepare_lake(lake: Path) -> None:
    """The demo's sample lake: orders 0-999 and a 2024-01-02 extract (updates 900-999, adds 1000-1099)."""
    prepare(lake, dt.date(2024, 1, 2))


def run_test_dag(
    airflow_env: dict[str, str],
    run_airflow: Callable[..., subprocess.CompletedProcess[str]],
    dag_id: str,
    **env: str,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``airflow dags test`` of ``dag_id`` from tests/e2e/dags on 2024-01-02, with ``env`` added, on a freshly
    prepared sample lake; the lake and the run."""
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)
    dags = {"AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).parent / "dags")}
    return lake, run_airflow("dags", "test", dag_id, "2024-01-02", env={**dags, **env})


def test_upsert_example_merges_and_pushes_metrics_and_lineage(airflow_env, run_airflow, tmp_path):
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)
    # The OpenLineage provider's own listener, with its file transport: what a lineage backend would get.
    events_file = tmp_path / "openlineage.jsonl"
    transport = {"type": "file", "log_file_path": str(events_file), "append": True}

    result = run_airflow(
        "dags",
        "test",
        "deltamerge_upsert",
        "2024-01-02",
        env={"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport)},
    )

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    metrics = xcom_value(airflow_env, "deltamerge_upsert", "merge_orders")
    # The sample extract updates orders 900-999 and adds 1000-1099 to a table of 1000 orders.
    assert metrics["numSourceRows"] == 200
    assert metrics["numTargetRowsUpdated"] == 100
    assert metrics["numTargetRowsInserted"] == 100
    assert metrics["tableVersion"] == 1
    table = DeltaTable(str(lake / "orders"))
    assert table.version() == 1
    rows = table.to_pyarrow_table().to_pylist()
    assert len(rows) == 1100
    assert {r["order_id"]: r["amount"] for r in rows}[950] == 950 * 1.5
    output = result.stdout + result.stderr
    assert "DELTAMERGE DEMO: table version 1" in output
    # The task log shows each phase of the job in one line, with counts.
    assert "Plan: classic executor; pruning kept 1 of 1 files" in output
    assert "rows 100 inserted, 100 updated, 0 deleted, 900 copied" in output
    assert "Committed version 1" in output
    # The table is the task's outlet Asset, and its event carries the same metrics (unpartitioned: no
    # partitions touched).
    [extra] = asset_event_extras(airflow_env, (lake / "orders").absolute().as_uri())
    assert extra == {**metrics, "partitions": []}
    # Its lineage events name the source as the input and the table as the output.
    assert_lineage_of_the_first_merge(events_file, lake)

    # Run by hand (no asset event), the consumer example reads that merge from the log once, checks its
    # metrics and uses them.
    consumer = run_airflow("dags", "test", "deltamerge_consumer", "2024-01-02")
    assert consumer.returncode == 0, consumer.stdout[-3000:] + consumer.stderr[-3000:]
    assert xcom_value(airflow_env, "deltamerge_consumer", "merge_metrics")["tableVersion"] == 1
    assert (
        "DELTAMERGE CONSUMER: 100 new orders to publish (table version 1)"
        in consumer.stdout + consumer.stderr
    )

    # The next day's merge (orders 1050-1099 updated, 1100-1149 new): the consumer reads that merge, the
    # newest.
    pq.write_table(
        orders(range(1050, 1150), dt.date(2024, 1, 3), 2.0), extract_path(lake, "orders", NEXT_DAY)
    )
    assert run_airflow("dags", "test", "deltamerge_upsert", str(NEXT_DAY)).returncode == 0
    consumer = run_airflow("dags", "test", "deltamerge_consumer", str(NEXT_DAY))
    assert consumer.returncode == 0, consumer.stdout[-3000:] + consumer.stderr[-3000:]
    assert xcom_value(airflow_env, "deltamerge_consumer", "merge_metrics")["tableVersion"] == 2
    assert (
        "DELTAMERGE CONSUMER: 50 new orders to publish (table version 2)" in consumer.stdout + consumer.stderr
    )


def assert_lineage_of_the_first_merge(events_file: Path, lake: Path) -> None:
    """The OpenLineage events of the upsert example's merge on 2024-01-02: the day's extract in, the table
    out, and on completion the table's version, schema and statistics."""
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    merge = {e["eventType"]: e for e in events if e["job"]["name"] == "deltamerge_upsert.merge_orders"}
    assert sorted(merge) == ["COMPLETE", "START"]
    for event in merge.values():
        [source] = event["inputs"]
        assert (source["namespace"], source["name"]) == (
            "file",
            str(lake / "staging/orders/2024-01-02.parquet"),
        )
        assert [(o["namespace"], o["name"]) for o in event["outputs"]] == [("file", str(lake / "orders"))]
    # The completion carries what the merge made: the table's version and schema, and its statistics.
    [target] = merge["COMPLETE"]["outputs"]
    assert target["facets"]["version"]["datasetVersion"] == "1"
    assert [f["name"] for f in target["facets"]["schema"]["fields"]] == [
        "order_id",
        "customer",
        "amount",
        "order_date",
    ]
    assert target["outputFacets"]["outputStatistics"]["rowCount"] > 0


def test_sql_example_merges_like_the_python_one(airflow_env, run_airflow):
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)

    result = run_airflow("dags", "test", "deltamerge_sql", "2024-01-02")

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    metrics = xcom_value(airflow_env, "deltamerge_sql", "merge_orders_sql")
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (100, 100)
    assert metrics["numTargetRowsDeleted"] == 0
    assert DeltaTable(str(lake / "orders")).version() == 1


def test_preflight_fails_a_wrong_column_before_spark(airflow_env, run_airflow):
    lake, result = run_test_dag(airflow_env, run_airflow, "deltamerge_unknown_column")

    output = result.stdout + result.stderr
    assert "DELTA_MERGE_UNRESOLVED_EXPRESSION" in output
    assert "Cannot resolve s.amout in UPDATE clause" in output
    assert "spark-submit" not in output.lower()
    assert DeltaTable(str(lake / "orders")).version() == 0
    # The task has retries=3, but a wrong column is final: one try, failed, not up for retry.
    assert task_tries(airflow_env, "deltamerge_unknown_column", "merge") == ("failed", 1)


def test_storage_secret_reaches_neither_command_nor_log(airflow_env, run_airflow):
    planted = "planted-S3CR3T-9f8e7d"
    connection = {
        "conn_type": "aws",
        "login": "AKIAPLANTED",
        "password": planted,
        "extra": {"region_name": "eu-west-1"},
    }

    lake, result = run_test_dag(
        airflow_env,
        run_airflow,
        "deltamerge_storage_credentials",
        AIRFLOW_CONN_LAKE_STORAGE=json.dumps(connection),
    )

    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "Spark-Submit cmd" in output
    assert planted not in output
    assert DeltaTable(str(lake / "orders")).version() == 1


def test_retry_after_a_committed_merge_does_not_merge_twice(airflow_env, run_airflow):
    # Try 1: the job is killed right after its commit, so the task fails. Try 2 must find the commit.
    lake, result = run_test_dag(
        airflow_env, run_airflow, "deltamerge_retry_after_commit", **{CRASH_ENV: "after_commit"}
    )

    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "already committed as version 1" in output
    table = DeltaTable(str(lake / "orders"))
    assert table.version() == 1
    assert table.count() == 1100
    metrics = xcom_value(airflow_env, "deltamerge_retry_after_commit", "merge")
    assert (metrics["numTargetRowsInserted"], metrics["tableVersion"]) == (100, 1)
    # Try 1 failed after its commit, so no event announced it: the retry does, once.
    uri = (lake / "orders").absolute().as_uri()
    extras = asset_event_extras(airflow_env, uri, dag_id="deltamerge_retry_after_commit")
    assert [(e["tableVersion"], e["numTargetRowsInserted"]) for e in extras] == [(1, 100)]


def test_a_merge_that_keeps_conflicting_is_retried_by_airflow(airflow_env, run_airflow):
    # Try 1: before each commit of the merge, another writer rewrites the orders (same rows, new files), so
    # every run of the engine finds the files it read removed; it gives up after its re-runs. Try 2 merges.
    lake, result = run_test_dag(
        airflow_env, run_airflow, "deltamerge_retry_after_conflict", **{CONFLICT_ENV: "1"}
    )

    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert output.count("removed 1 file(s) this merge read: running the merge again in") == 3
    assert "DELTA_CONCURRENT_MODIFICATION" in output
    assert "conflicted with concurrent commits 4 times" in output
    assert task_tries(airflow_env, "deltamerge_retry_after_conflict", "merge") == ("success", 2)
    # The other writer's four rewrites (versions 1-4), then the one merge commit, made by try 2.
    table = DeltaTable(str(lake / "orders"))
    operations = [(h["version"], h["operation"]) for h in table.history()]
    assert [version for version, operation in operations if operation == "MERGE"] == [5]
    assert len(operations) == 6
    rows = {r["order_id"]: r["amount"] for r in table.to_pyarrow_table().to_pylist()}
    assert len(rows) == 1100
    assert (rows[5], rows[950], rows[1050]) == (5.0, 950 * 1.5, 1050 * 1.5)
    metrics = xcom_value(airflow_env, "deltamerge_retry_after_conflict", "merge")
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (100, 100)
    assert metrics["tableVersion"] == 5


def test_failed_merge_fails_the_task_with_the_cause(airflow_env, run_airflow, tmp_path):
    # No staged extract for this date: the task fails naming the path; the table keeps its version.
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)
    (lake / MARKER).unlink()  # a real lake: the example's sample_data task must not write the extract

    result = run_airflow("dags", "test", "deltamerge_upsert", "2024-03-01")

    output = result.stdout + result.stderr
    assert "Path does not exist" in output and "2024-03-01.parquet" in output
    assert "SourceError" in output
    assert "is not a local sample lake; its data is left alone" in output
    assert DeltaTable(str(lake / "orders")).version() == 0


# The examples that generate their own sample data, each run once (two at a time, each with its own metadata
# database and its own fresh lake) by the ``example_runs`` fixture: dag_id -> the merge task's id.
SELF_SEEDING_EXAMPLES = {
    "deltamerge_cdc_apply": "apply_changes",
    "deltamerge_scd2": "merge_history",
    "deltamerge_event_dedup": "append_new_clicks",
    "deltamerge_full_sync": "sync_products",
}
EXAMPLES_DATE = "2024-01-02"


@dataclass(frozen=True)
class ExampleRun:
    """One ``airflow dags test`` of an example on an empty lake."""

    dag_id: str
    returncode: int
    output: str
    home: Path
    lake: Path

    @property
    def metrics(self) -> dict[str, Any]:
        """The merge task's XCom value, once the run is known to have passed."""
        assert self.returncode == 0, self.output[-4000:]
        return xcom_value({"AIRFLOW_HOME": str(self.home)}, self.dag_id, SELF_SEEDING_EXAMPLES[self.dag_id])

    def rows(self, table: str, key: str) -> dict[Any, dict[str, Any]]:
        """The table's rows by ``key`` (a key seen twice fails the test)."""
        rows = DeltaTable(str(self.lake / table)).to_pyarrow_table().to_pylist()
        by_key = {row[key]: row for row in rows}
        assert len(by_key) == len(rows), f"duplicate {key} in {table}"
        return by_key


@pytest.fixture(scope="module")
def example_runs(airflow_env, tmp_path_factory) -> dict[str, ExampleRun]:
    root = tmp_path_factory.mktemp("examples")

    def run(dag_id: str) -> ExampleRun:
        home, lake = root / f"airflow-{dag_id}", root / f"lake-{dag_id}"  # the lake is created by the DAG
        process = start_dags_test(
            airflow_env, home, dag_id, EXAMPLES_DATE, env={"DELTAMERGE_LAKE": str(lake)}
        )
        output = process.communicate()[0]
        return ExampleRun(dag_id, process.returncode, output, home, lake)

    # Two at a time: each run is mostly one spark-submit JVM, and the CI machine has two cores.
    with ThreadPoolExecutor(max_workers=2) as pool:
        return {run.dag_id: run for run in pool.map(run, SELF_SEEDING_EXAMPLES)}


def test_cdc_example_deletes_and_applies_the_latest_change_per_key(example_runs):
    run = example_runs["deltamerge_cdc_apply"]

    # The feed changes keys 2, 3, 4, 11, 12 and 13; per key only the change with the highest lsn counts.
    assert run.metrics["numSourceRows"] == 6
    assert run.metrics["numTargetRowsDeleted"] == run.metrics["numTargetRowsMatchedDeleted"] == 2
    assert run.metrics["numTargetRowsUpdated"] == 1
    assert run.metrics["numTargetRowsInserted"] == 2
    customers = run.rows("customers", "customer_id")
    assert sorted(customers) == [1, 2, 5, 6, 7, 8, 9, 10, 11, 12]  # 3 and 4 deleted, 13 never landed
    assert (customers[2]["name"], customers[2]["lsn"]) == ("Renamed 2", 102)
    assert (customers[12]["name"], customers[12]["email"]) == ("Renamed 12", "renamed12@example.com")
    assert customers[1] == {
        "customer_id": 1,
        "name": "Customer 1",
        "email": "customer1@example.com",
        "lsn": 1,
    }
    assert "op" not in customers[11]


def test_scd2_example_closes_the_current_row_and_adds_the_new_version(example_runs):
    run = example_runs["deltamerge_scd2"]

    # 4 extract rows keyed, and NULL-keyed copies of the 2 moves (found by joining the target itself); the
    # unchanged customer 4 gets no copy.
    assert run.metrics["numSourceRows"] == 6
    assert run.metrics["numTargetRowsUpdated"] == 2  # the current rows of customers 2 and 3, closed
    assert run.metrics["numTargetRowsInserted"] == 3  # new versions of 2 and 3, and new customer 6
    rows = DeltaTable(str(run.lake / "customer_history")).to_pyarrow_table().to_pylist()
    day, since = dt.date.fromisoformat(EXAMPLES_DATE), dt.date.fromisoformat(EXAMPLES_DATE) - dt.timedelta(30)
    versions = sorted(
        (r["customer_id"], r["valid_from"], r["valid_to"], r["is_current"], r["address"]) for r in rows
    )
    assert versions == [
        (1, since, None, True, "1 Old Street"),
        (2, since, day, False, "2 Old Street"),
        (2, day, None, True, "2 New Street"),
        (3, since, day, False, "3 Old Street"),
        (3, day, None, True, "3 New Street"),
        (4, since, None, True, "4 Old Street"),
        (5, since, None, True, "5 Old Street"),
        (6, day, None, True, "6 First Street"),
    ]
    # Customer 4 came in the extract unchanged: still exactly one row, and every customer one current row.
    current_rows = Counter(customer_id for customer_id, _, _, is_current, _ in versions if is_current)
    assert current_rows == dict.fromkeys(range(1, 7), 1)


def test_event_dedup_example_inserts_only_unseen_events_once(example_runs):
    run = example_runs["deltamerge_event_dedup"]

    # The batch: 91-120 and a second delivery of 101-105; 91-100 are already in the table.
    assert run.metrics["numSourceRows"] == 30  # after dropping the batch's own duplicates
    assert run.metrics["numTargetRowsInserted"] == 20
    assert run.metrics["executor"] == "insert_only"
    assert run.metrics["numTargetFilesRemoved"] == run.metrics["numTargetRowsCopied"] == 0
    clicks = run.rows("clicks", "event_id")
    assert sorted(clicks) == list(range(1, 121))
    assert {clicks[i]["page"] for i in range(1, 101)} == {"/home"}  # redelivered events were skipped
    assert {clicks[i]["page"] for i in range(101, 121)} == {"/redelivered"}


def test_full_sync_example_mirrors_the_export(example_runs):
    run = example_runs["deltamerge_full_sync"]

    assert run.metrics["numTargetRowsNotMatchedBySourceDeleted"] == 2  # products 7 and 8 left the export
    assert run.metrics["numTargetRowsUpdated"] == 2  # 2 and 3 repriced; unchanged rows are only copied
    assert run.metrics["numTargetRowsInserted"] == 1
    prices = {key: row["price"] for key, row in run.rows("products", "product_id").items()}
    assert prices == {1: 10.0, 2: 25.0, 3: 35.0, 4: 40.0, 5: 50.0, 6: 60.0, 9: 90.0}


def test_examples_write_sample_data_only_into_a_sample_lake(example_runs):
    for dag_id, run in example_runs.items():
        assert run.returncode == 0, run.output[-4000:]
        assert (run.lake / MARKER).exists(), dag_id
        assert "Sample data of" in run.output, dag_id


def test_run_conf_cannot_rewrite_the_sql_example(airflow_env, run_airflow):
    # The attack seen from a UI user: a lake path in run conf that closes the backquoted target name and
    # brings a source of its own choosing, which deleted every row before template values were bound.
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    prepare_lake(lake)
    before = DeltaTable(str(lake / "orders")).to_pyarrow_table().num_rows
    attack = (
        f"{lake}/orders` AS t USING (SELECT order_id, -1 AS amount FROM delta.`{lake}/orders`) AS s "
        "ON t.order_id = s.order_id WHEN MATCHED THEN DELETE -- "
    )

    result = run_airflow(
        "dags", "test", "deltamerge_sql", "2024-01-02", "--conf", json.dumps({"lake": attack})
    )

    output = result.stdout + result.stderr
    assert "DELTAMERGE_UNSAFE_PATH" in output, output[-3000:]
    assert "spark-submit" not in output.lower()
    table = DeltaTable(str(lake / "orders"))
    assert (table.version(), table.to_pyarrow_table().num_rows) == (0, before)


def task_tries(airflow_env: dict[str, str], dag_id: str, task_id: str) -> tuple[str, int]:
    """State and try number of the task in the newest run of ``dag_id``, from the metadata database."""
    with sqlite3.connect(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db") as db:
        [(state, tries)] = db.execute(
            "SELECT state, try_number FROM task_instance WHERE dag_id = ? AND task_id = ? AND run_id = "
            "(SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1)",
            (dag_id, task_id, dag_id),
        ).fetchall()
    return state, tries
