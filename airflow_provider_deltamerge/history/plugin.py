"""The Airflow plugin: a FastAPI app on the API server that serves the merge history pages, and the tabs
that put them on a DAG's and a task's page.

Every route runs Airflow's own authorization first (the auth manager of the deployment decides): the DAG's
read permission for the DAG and task pages, the Asset's read permission for a table's history. A table is
named by its Asset id and must be a merge task's target (``known_tables.py``); the log is read here with
the storage connection of that task, so credentials never reach the browser.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import requires_access_asset, requires_access_dag
from airflow.providers.common.compat.sdk import AirflowPlugin
from deltalake.exceptions import DeltaError
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from airflow_provider_deltamerge.exceptions import StorageCredentialsError, TargetTableError
from airflow_provider_deltamerge.history.known_tables import KnownTable, dag_tables, known_table, task_tables
from airflow_provider_deltamerge.history.log_pages import DeltaLog
from airflow_provider_deltamerge.history.page import history_html, listing_html, message_html
from airflow_provider_deltamerge.history.urls import URL_PREFIX
from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options

log = logging.getLogger(__name__)

app = FastAPI(title="Delta merge history", docs_url=None, redoc_url=None, openapi_url=None)


@app.get("/history/assets/{asset_id}", dependencies=[Depends(requires_access_asset("GET"))])
def asset_history(
    asset_id: int, session: SessionDep, page: Annotated[int, Query(ge=1, le=10_000_000)] = 1
) -> HTMLResponse:
    """The history of the table of Asset ``asset_id``, one page of commits."""
    table = known_table(session, asset_id)
    if table is None:
        return _page(
            "Unknown table",
            f"Asset {asset_id} is not the target of any DeltaMergeOperator task known to this Airflow, so it "
            "has no merge history here. Open the history from a merge task's or its DAG's page.",
            status_code=404,
        )
    return _history(table, page)


@app.get("/history/dags/{dag_id}", dependencies=[Depends(requires_access_dag("GET"))])
def dag_history(dag_id: str, request: Request, session: SessionDep) -> Response:
    """The tables the DAG's merge tasks write; the history itself when there is one."""
    return _tables_or_history(
        request,
        dag_tables(session, dag_id),
        title=f"Delta tables merged by {dag_id}",
        empty=f"{dag_id} has no DeltaMergeOperator task whose target table Airflow knows yet.",
    )


@app.get("/history/dags/{dag_id}/tasks/{task_id}", dependencies=[Depends(requires_access_dag("GET"))])
def task_history(dag_id: str, task_id: str, request: Request, session: SessionDep) -> Response:
    """The history of the table a merge task writes."""
    return _tables_or_history(
        request,
        task_tables(session, dag_id, task_id),
        title=f"Delta tables merged by {dag_id}.{task_id}",
        empty=(
            f"{dag_id}.{task_id} is not a DeltaMergeOperator task, or its target is known only at run time "
            "and it has not merged yet."
        ),
    )


@app.exception_handler(RequestValidationError)
def bad_request(request: Request, error: RequestValidationError) -> HTMLResponse:
    fields = ", ".join(".".join(str(p) for p in e["loc"][1:]) for e in error.errors())
    return _page("Bad request", f"Not a valid value: {fields}. Pages are numbered from 1.", status_code=400)


def _tables_or_history(request: Request, tables: list[KnownTable], *, title: str, empty: str) -> Response:
    if len(tables) == 1:
        return RedirectResponse(request.url_for("asset_history", asset_id=tables[0].asset_id).path)
    prefix = request.scope.get("root_path", "")
    return HTMLResponse(listing_html(title, tables, prefix=prefix, empty=empty))


def _history(table: KnownTable, page: int) -> HTMLResponse:
    try:
        delta_log = DeltaLog(table.uri, connection_storage_options(table.storage_conn_id))
        return HTMLResponse(history_html(table, delta_log.page(page)))
    except TargetTableError as err:
        return _page("No Delta table", f"{err} Has a merge into it run yet?", status_code=404)
    except StorageCredentialsError as err:
        return _page("No storage credentials", str(err), status_code=502)
    except (DeltaError, OSError) as err:
        # The store's message can quote a signed request; it goes to the API server's log, not the page.
        log.warning("Could not read the Delta log of %s", table.uri, exc_info=True)
        return _page(
            "The Delta log could not be read",
            f"Reading the log of {table.uri} failed ({type(err).__name__}); the API server's log has the "
            f"details. Check connection {table.storage_conn_id!r}, and that the API server can reach it.",
            status_code=502,
        )


def _page(title: str, message: str, *, status_code: int) -> HTMLResponse:
    return HTMLResponse(message_html(title, message), status_code=status_code)


class DeltaMergeHistoryPlugin(AirflowPlugin):
    """Merge history pages on the API server, and a "Merge history" tab on DAG and task pages."""

    name = "deltamerge_history"
    fastapi_apps: list[Any] = [  # noqa: RUF012 - declared so on AirflowPlugin
        {"app": app, "url_prefix": URL_PREFIX, "name": "Delta merge history"}
    ]
    external_views: list[Any] = [  # noqa: RUF012 - declared so on AirflowPlugin
        {
            "name": "Merge history",
            "href": f"{URL_PREFIX}/history/dags/{{DAG_ID}}",
            "destination": "dag",
            "url_route": "deltamerge_history_dag",
        },
        {
            "name": "Merge history",
            "href": f"{URL_PREFIX}/history/dags/{{DAG_ID}}/tasks/{{TASK_ID}}",
            "destination": "task",
            "url_route": "deltamerge_history_task",
        },
    ]
