"""Asset events under real Airflow: a templated target's event through its AssetAlias, with the merge's
metrics, table version and the partitions its commit touched."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from dags_examples.sample_lake import events, extract_path
from tests.e2e.conftest import asset_event_extras, xcom_value

pytestmark = pytest.mark.slow

DAGS = Path(__file__).parent / "dags"
DAYS = (dt.date(2024, 1, 1), dt.date(2024, 1, 2))


def test_a_templated_target_emits_its_event_through_the_alias(airflow_env, run_airflow):
    lake = Path(airflow_env["DELTAMERGE_LAKE"])
    table = lake / "events"
    # Two days of events 0-49, partitioned by day; the 2024-01-02 extract updates 40-49 and adds 50-59.
    write_deltalake(
        str(table), pa.concat_tables([events(day, range(50), 1.0) for day in DAYS]), partition_by=["day"]
    )
    extract_path(lake, "events", DAYS[1]).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(events(DAYS[1], range(40, 60), 2.0), extract_path(lake, "events", DAYS[1]))

    result = run_airflow(
        "dags",
        "test",
        "deltamerge_templated_target",
        str(DAYS[1]),
        env={"AIRFLOW__CORE__DAGS_FOLDER": str(DAGS)},
    )

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    metrics = xcom_value(airflow_env, "deltamerge_templated_target", "merge_day")
    [extra] = asset_event_extras(airflow_env, table.absolute().as_uri(), "deltamerge_templated_target")
    assert extra == {**metrics, "partitions": [{"day": "2024-01-02"}]}  # the other day was not touched
    assert (extra["tableVersion"], extra["numTargetRowsUpdated"], extra["numTargetRowsInserted"]) == (
        1,
        10,
        10,
    )
    assert alias_of_events(airflow_env, table.absolute().as_uri()) == [
        "deltamerge/deltamerge_templated_target/merge_day"
    ]


def alias_of_events(airflow_env: dict[str, str], uri: str) -> list[str]:
    """The AssetAlias each event of the asset at ``uri`` was emitted through."""
    with sqlite3.connect(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db") as db:
        rows = db.execute(
            "SELECT al.name FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "JOIN asset_alias_asset_event x ON x.event_id = e.id JOIN asset_alias al ON al.id = x.alias_id "
            "WHERE a.uri = ? ORDER BY e.id",
            (uri,),
        ).fetchall()
    return [name for (name,) in rows]
