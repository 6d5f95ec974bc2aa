"""Where the history pages are: shared by the plugin that serves them and the extra link on workers, which
must not import the API server's modules."""

from __future__ import annotations

from urllib.parse import quote

URL_PREFIX = "/deltamerge"


def task_history_path(dag_id: str, task_id: str) -> str:
    """The path of a merge task's history page (which leads on to its table's)."""
    return f"{URL_PREFIX}/history/dags/{quote(dag_id, safe='')}/tasks/{quote(task_id, safe='')}"
