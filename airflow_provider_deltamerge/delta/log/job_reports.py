"""The job's answer as a small file beside the table, for deploy modes where its output is not ours.

In cluster deploy mode the driver's standard output stays on the cluster, and a merge that changes nothing
makes no commit to read back. So the job also writes its one answer line (result or error) to
``<table>/_deltamerge/reports/<submission id>`` with Spark's file system (``TableFiles.write_text``), and
the Airflow side takes it through ``deltalake``'s storage layer with the same credentials as the Delta log.
Delta readers and VACUUM skip folders whose name starts with ``_``.
"""

from __future__ import annotations

from deltalake.fs import DeltaStorageHandler
from pyarrow.fs import FileType


def report_path(submission_id: str) -> str:
    """Where the job of ``submission_id`` leaves its answer, relative to the table's root."""
    return f"_deltamerge/reports/{submission_id}"


def take_report(
    table_uri: str, submission_id: str, storage_options: dict[str, str] | None = None
) -> str | None:
    """The job's answer line, removed from storage once read; None if the job wrote none."""
    storage, path = DeltaStorageHandler(table_uri, storage_options or None), report_path(submission_id)
    [info] = storage.get_file_info([path])
    if info.type != FileType.File:
        return None
    line = storage.open_input_file(path).read().decode("utf-8")
    storage.delete_file(path)
    return line
