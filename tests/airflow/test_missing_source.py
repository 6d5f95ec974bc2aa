"""A missing csv, json or orc source fails the task in pre-flight, before any Spark job is submitted."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.exceptions import SourceError, is_final
from airflow_provider_deltamerge.spec import insert_all
from tests.airflow.conftest import make_table
from tests.airflow.test_template_injection import run_task


@pytest.mark.parametrize("file_format", ["csv", "json", "orc"])
def test_a_missing_source_fails_the_task_before_spark_is_submitted(mocker, tmp_path, file_format):
    # Given: a real target table, and a templated source path whose file for the run's date is missing
    merge = {
        "target": make_table(tmp_path / "orders"),
        "source": f"{tmp_path}/staging/{{{{ ds }}}}.{file_format}",
        "source_format": file_format,
        "condition": "t.id = s.id",
        "clauses": [insert_all()],
    }
    # When / Then: the task fails naming the rendered path (run_task's submission would have succeeded)
    with pytest.raises(
        SourceError, match=rf"PATH_NOT_FOUND\] Path does not exist: .*2024-01-02\.{file_format}"
    ) as info:
        run_task(mocker, {}, preflight=True, **merge)
    # Not final: the upstream extract may land before Airflow's next try.
    assert not is_final(info.value)
