"""The merge history pages: a FastAPI app the plugin (``plugin.py``) mounts on the API server.

Every route runs Airflow's own authorization first (the auth manager of the deployment decides): the DAG's
read permission for the DAG and task pages, the Asset's read permission for a table's history; a list names
only the tables whose Asset the user may read. A table is named by its Asset id and must be a merge task's
target (``known_tables.py``); the log is read here with the storage connection of that task, so credentials
never reach the browser.
"""

from __future__ import annotations

import logging
from typing import Annotated

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.auth.managers.models.resource_details import AssetDetails
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_asset, requires_access_dag
from deltalake.exceptions import DeltaError
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from airflow_provider_deltamerge.exceptions import StorageCredentialsError, TargetTableError
from airflow_provider_deltamerge.history.known_tables import (
    KnownTable,
    dag_is_known,
    dag_tables,
    known_table,
    merge_task,
    tables_of_dags,
    task_tables,
)
from airflow_provider_deltamerge.history.log_pages import PAGE_SIZE, DeltaLog
from airflow_provider_deltamerge.history.page import history_html, listing_html, message_html
from airflow_provider_deltamerge.hooks.storage_credentials import connection_storage_options

log = logging.getLogger(__name__)

app = FastAPI(title="Delta merge history", docs_url=None, redoc_url=None, openapi_url=None)


@app.get("/history")
def all_histories(request: Request, session: SessionDep, user: GetUserDep) -> HTMLResponse:
    """The tables the merge tasks of the DAGs the user may read write, those of readable Assets only."""
    dag_ids = get_auth_manager().get_authorized_dag_ids(user=user, method="GET", session=session)
    return HTMLResponse(
        listing_html(
            "Delta tables merged by this Airflow's DAGs",
            _readable(tables_of_dags(session, dag_ids), user),
            prefix=request.scope.get("root_path", ""),
            empty="No DAG you may read has a DeltaMergeOperator task whose target table you may read.",
        )
    )


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
            "has no merge history here. Browse → Merge history lists the tables that have one.",
            status_code=404,
        )
    return _history(table, page)


@app.get("/history/dags/{dag_id}", dependencies=[Depends(requires_access_dag("GET"))])
def dag_history(dag_id: str, request: Request, session: SessionDep, user: GetUserDep) -> Response:
    """The tables the DAG's merge tasks write; the history itself when there is one."""
    if not dag_is_known(session, dag_id):
        return _unknown_dag(dag_id)
    tables = dag_tables(session, dag_id)
    if not tables:
        return _no_history(f"{dag_id} has no DeltaMergeOperator task whose target table Airflow knows yet.")
    return _tables_or_history(request, user, tables, title=f"Delta tables merged by {dag_id}")


@app.get("/history/dags/{dag_id}/tasks/{task_id}", dependencies=[Depends(requires_access_dag("GET"))])
def task_history(
    dag_id: str, task_id: str, request: Request, session: SessionDep, user: GetUserDep
) -> Response:
    """The history of the table a merge task writes."""
    if not dag_is_known(session, dag_id):
        return _unknown_dag(dag_id)
    if merge_task(session, dag_id, task_id) is None:
        return _no_history(f"{dag_id}.{task_id} is not a DeltaMergeOperator task of {dag_id}.")
    tables = task_tables(session, dag_id, task_id)
    if not tables:
        return _no_history(
            f"The target of {dag_id}.{task_id} is known only at run time, and it has not merged yet."
        )
    return _tables_or_history(request, user, tables, title=f"Delta tables merged by {dag_id}.{task_id}")


@app.exception_handler(RequestValidationError)
def bad_request(request: Request, error: RequestValidationError) -> HTMLResponse:
    fields = ", ".join(".".join(str(p) for p in e["loc"][1:]) for e in error.errors())
    return _page("Bad request", f"Not a valid value: {fields}. Pages are numbered from 1.", status_code=400)


def _unknown_dag(dag_id: str) -> HTMLResponse:
    return _page("Unknown DAG", f"Airflow knows no DAG {dag_id!r}.", status_code=404)


def _no_history(reason: str) -> HTMLResponse:
    return _page("No merge history", reason, status_code=404)


def _readable(tables: list[KnownTable], user: BaseUser) -> list[KnownTable]:
    """The tables whose Asset ``user`` may read, as the deployment's auth manager decides."""
    manager = get_auth_manager()
    return [
        table
        for table in tables
        if manager.is_authorized_asset(method="GET", details=AssetDetails(id=str(table.asset_id)), user=user)
    ]


def _tables_or_history(request: Request, user: BaseUser, tables: list[KnownTable], *, title: str) -> Response:
    readable = _readable(tables, user)
    if not readable:
        # Not even the tables' locations are shown: they are the Assets' own data.
        return _page(
            "No access to the table",
            f"You may not read the Asset of the {len(tables)} table(s) this page would show. Ask for read "
            "access to the Asset in Airflow.",
            status_code=403,
        )
    # The pages' own mount point: the API server's router cannot name the routes of an app it has not
    # imported (plugin.py), so request.url_for is no help here.
    prefix = request.scope.get("root_path", "")
    if len(readable) == 1:
        return RedirectResponse(f"{prefix}/history/assets/{readable[0].asset_id}")
    return HTMLResponse(listing_html(title, readable, prefix=prefix, empty=""))


def _history(table: KnownTable, page: int) -> HTMLResponse:
    try:
        delta_log = DeltaLog(table.uri, connection_storage_options(table.storage_conn_id))
        log_page = delta_log.page(page)
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
    if page > log_page.pages:
        return _page(
            "No such page",
            f"The history of {table.uri} has {log_page.pages} page(s) of {PAGE_SIZE} commits; page {page} is "
            "past its end. Page 1 holds the newest commits.",
            status_code=404,
        )
    if not log_page.entries:
        return _page(
            "Commits removed",
            f"The commits of page {page} of {table.uri}'s history were removed by the table's log clean-up.",
            status_code=404,
        )
    return HTMLResponse(history_html(table, log_page))


def _page(title: str, message: str, *, status_code: int) -> HTMLResponse:
    return HTMLResponse(message_html(title, message), status_code=status_code)
