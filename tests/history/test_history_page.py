"""The merge history page under a real Airflow API server, opened in headless Chromium.

The DAG processor registers the merge task's target Asset from ``dags/merge_history.py``; the table's log
holds twelve merges with our provenance record and one append by another writer. Chromium (Debian's package,
which ``make test`` installs) loads the page as a user's browser would: the rows, and the charts as painted
pixels.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from PIL import Image

from tests.e2e.airflow_services import Airflow, airflow_services
from tests.history.browser import Browser
from tests.history.delta_logs import long_log, other_writer_commit, table_with_merges

pytestmark = pytest.mark.slow

DAGS = Path(__file__).parent / "dags"
DAG_ID, TASK_ID = "deltamerge_history", "merge_orders"
MERGES = 12
DOCS_SCREENSHOT = Path(__file__).parents[2] / "docs" / "images" / "merge_history.png"
# The "inserted" line of the rows chart (page.py's ROW_SERIES).
INSERTED_RGB = (0x2E, 0x7D, 0x32)
CHARTS_IN_PAGE = "document.readyState === 'complete' && document.querySelectorAll('svg.chart').length === 2"
# The tab's frame shows our page from the same origin, so the UI's document can look into it.
CHARTS_IN_FRAME = (
    "(() => { const frame = document.querySelector('iframe[src*=\"/deltamerge/history/\"]');"
    " const page = frame && frame.contentDocument;"
    " return !!page && page.readyState === 'complete'"
    " && page.querySelectorAll('svg.chart').length === 2; })()"
)
# A guard against a page that never shows what is awaited, not a speed check (a loaded 2-core machine).
BROWSER_TIMEOUT = 300


def test_the_merge_history_page_shows_the_tables_merges_in_a_browser(airflow_env, tmp_path):
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: `make test` installs it (apt-get install chromium)"
    table = table_with_merges(tmp_path / "orders", MERGES)
    other_writer_commit(table)
    long_table = long_log(tmp_path / "events", 10_000)
    env = {
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "HISTORY_TABLE": table,
        "HISTORY_LONG_TABLE": long_table,
        # The task's storage connection, which the API server resolves to read the log (no credentials here).
        "AIRFLOW_CONN_HISTORY_STORE": json.dumps({"conn_type": "generic"}),
    }
    with airflow_services(airflow_env, tmp_path / "airflow", env) as airflow:
        airflow.wait_for(f"{DAG_ID} to be parsed", lambda: airflow.call("GET", f"dags/{DAG_ID}"), timeout=180)
        asset_id = airflow.wait_for("the target's Asset", lambda: _asset_id(airflow, table), timeout=60)
        long_id = airflow.wait_for(
            "the long table's Asset", lambda: _asset_id(airflow, long_table), timeout=60
        )
        page_url = f"{airflow.base}/deltamerge/history/assets/{asset_id}"

        # The task's page leads to its table's history, the DAG's page lists the DAG's two tables.
        status, final_url, _ = _get(airflow, f"/deltamerge/history/dags/{DAG_ID}/tasks/{TASK_ID}")
        assert (status, final_url) == (200, page_url)
        status, _, body = _get(airflow, f"/deltamerge/history/dags/{DAG_ID}")
        links = re.findall(r'href="/deltamerge/history/assets/(\d+)" class="uri">([^<]+)<', body)
        assert status == 200 and sorted(links) == sorted(
            [(str(asset_id), Path(table).as_uri()), (str(long_id), Path(long_table).as_uri())]
        )
        # A page of a 10,000-commit table, over HTTP: measured and printed, never asserted.
        for page in (1, 200):
            started = time.perf_counter()
            status, _, body = _get(airflow, f"/deltamerge/history/assets/{long_id}?page={page}")
            took = time.perf_counter() - started
            assert status == 200 and body.count('<tr class="merge"') == 50
            print(f"history page {page} of a 10,000-commit table over HTTP: {took * 1000:.0f} ms")
        status, _, body = _get(airflow, f"/deltamerge/history/dags/{DAG_ID}/tasks/check_orders")
        assert status == 200 and "check_orders is not a DeltaMergeOperator task" in body
        # Airflow's authentication guards the routes: a forged token is refused.
        assert _get(airflow, f"/deltamerge/history/assets/{asset_id}", token="forged")[0] == 403
        # Only known targets: another Asset id is a clear 404 page, a bad page number a 400 page.
        status, _, body = _get(airflow, "/deltamerge/history/assets/999999")
        assert status == 404 and "not the target of any DeltaMergeOperator task" in body
        status, _, body = _get(airflow, f"/deltamerge/history/assets/{asset_id}?page=last")
        assert status == 400 and "Pages are numbered from 1" in body

        # Our page is rendered on the server: loaded, it has its two charts. Airflow's React UI needs a few
        # seconds of the browser's time to render the tab, whose frame then loads our page.
        with Browser(chromium, tmp_path / "chromium-profile", width=1280, height=1100) as browser:
            browser.open(page_url, until=CHARTS_IN_PAGE, what="the two charts", timeout=BROWSER_TIMEOUT)
            dom = browser.html()
            screenshot = tmp_path / "merge_history.png"
            browser.screenshot(screenshot)
        ui_tab, ui_screenshot = (
            f"{airflow.base}/dags/{DAG_ID}/tasks/{TASK_ID}/plugin/deltamerge_history_task",
            tmp_path / "tab.png",
        )
        with Browser(chromium, tmp_path / "chromium-profile", width=1400, height=1000) as browser:
            browser.open(ui_tab, until=CHARTS_IN_FRAME, what="its frame's charts", timeout=BROWSER_TIMEOUT)
            ui_dom = browser.html()
            browser.screenshot(ui_screenshot)

    # Newest first: the other writer's append (version 13), then merges 12..1, then delta-rs' version 0.
    versions = [int(v) for v in re.findall(r'<tr class="\w+" data-version="(\d+)"', dom)]
    assert versions == list(range(MERGES + 1, -1, -1))
    assert len(re.findall(r'<tr class="merge"', dom)) == MERGES
    assert "other writer: WRITE" in dom
    assert re.search(r"orders_daily /\s+scheduled__0012</a>", dom) and "<td>classic</td>" in dom
    # Two charts (rows, duration), three row series and the check task's max on inserted rows.
    assert dom.count('<svg class="chart"') == 2
    assert dom.count('class="series"') == 4
    assert "inserted max (check_orders)" in dom
    assert "numTargetRowsDeleted / numTargetRowsCopied &lt;= 0.05" in dom
    # The browser painted the charts: the inserted line's colour is on the screen.
    assert _painted(screenshot, INSERTED_RGB) > 200
    assert re.search(rf'<iframe [^>]*src="/deltamerge/history/dags/{DAG_ID}/tasks/{TASK_ID}"', ui_dom)
    assert _painted(ui_screenshot, INSERTED_RGB) > 200  # the frame shows the page, charts and all
    # The screenshots stay in the test's tmp dir; the README's is replaced only when asked for.
    if os.environ.get("UPDATE_DOCS_SCREENSHOT"):
        shutil.copy(ui_screenshot, DOCS_SCREENSHOT)


def _painted(screenshot: Path, rgb: tuple[int, int, int]) -> int:
    """How many pixels of ``screenshot`` have colour ``rgb``."""
    colours = Image.open(screenshot).convert("RGB").getcolors(1 << 24) or []
    return next((count for count, colour in colours if colour == rgb), 0)


def _asset_id(airflow: Airflow, table: str) -> int | None:
    uri = Path(table).as_uri()
    assets = airflow.call("GET", "assets?limit=100")["assets"]
    return next((a["id"] for a in assets if a["uri"] == uri), None)


def _get(airflow: Airflow, path: str, *, token: str | None = None) -> tuple[int, str, str]:
    """Status, final URL (after redirects) and body of a GET with the user's token (or ``token``)."""
    request = urllib.request.Request(
        airflow.base + path, headers={"Authorization": f"Bearer {token or airflow.token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.url, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.url, err.read().decode()
