"""The Airflow plugin: the merge history pages on the API server, and the Browse menu's entry that lists them.

Every Airflow process loads every plugin — each task's runner too, for listeners — so this module stays light:
the pages' app (``routes.py``, with FastAPI, Airflow's API server modules and deltalake) is imported on the
first request the API server routes to it, not by the thousands of tasks that never serve a page.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import AirflowPlugin

from airflow_provider_deltamerge.history.urls import URL_PREFIX


class HistoryPages:
    """An ASGI app that hands each request to the history pages' FastAPI app, imported on first use."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from airflow_provider_deltamerge.history.routes import app

        await app(scope, receive, send)


class DeltaMergeHistoryPlugin(AirflowPlugin):
    """Merge history pages on the API server, and a "Merge history" page in the UI's Browse menu.

    No tab on DAG and task pages: Airflow 3 shows a plugin's tab on every DAG and task, merges or not, so
    the history is reached from the Browse menu and from each merge task's "Merge history" link.
    """

    name = "deltamerge_history"
    fastapi_apps: list[Any] = [  # noqa: RUF012 - declared so on AirflowPlugin
        {"app": HistoryPages(), "url_prefix": URL_PREFIX, "name": "Delta merge history"}
    ]
    external_views: list[Any] = [  # noqa: RUF012 - declared so on AirflowPlugin
        {
            "name": "Merge history",
            "href": f"{URL_PREFIX}/history",
            "destination": "nav",
            "category": "browse",
            "url_route": "deltamerge_history",
        }
    ]
