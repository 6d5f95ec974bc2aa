"""The merge history page under a real Airflow API server, opened in headless Chromium.

The DAG processor registers the merge tasks' target Assets from ``dags/``; the table's log holds twelve
daily merges with our provenance record (1 to 4 rows changed each) and one append by another writer, then
the test runs the DAG once: a real merge by the operator, through spark-submit. Chromium (Debian's package,
which ``make test`` installs) loads the page as a user's browser would, on its own and inside Airflow's UI:
the rows, the charts as laid out and painted, and where its links lead. The screenshots stay in the test's
tmp dir, whose path the test prints.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
from PIL import Image

from tests.e2e.airflow_services import WAIT_TIMEOUT, Airflow, airflow_services
from tests.history.auth_manager import NO_ASSETS_USER, NoAssetsForOneUser
from tests.history.browser import Browser
from tests.history.delta_logs import long_log, other_writer_commit, table_with_merges

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
DAGS = Path(__file__).parent / "dags"
DAG_ID, TASK_ID, NO_MERGE_DAG_ID = (
    "deltamerge_history",
    "merge_orders",
    "no_merge",
)
MERGES = 12
# The test's own run of the DAG: the merge it makes is version MERGES + 2, after the other writer's append.
RUN_ID, LOGICAL_DATE, SHOWN_LOGICAL_DATE = "history_check", "2026-11-20T00:00:00Z", "2026-11-20 00:00"
OUR_RUN_VERSION = MERGES + 2
RUN_TIMEOUT = 600
DOCS_SCREENSHOT = ROOT / "docs" / "images" / "merge_history.png"
JWT_SECRET = "deltamerge-history-only"
# The "inserted" line of the rows chart (page.py's ROW_SERIES).
INSERTED_RGB = (0x2E, 0x7D, 0x32)
CHARTS_IN_PAGE = "document.readyState === 'complete' && document.querySelectorAll('svg.chart').length === 2"
# The plugin's frame shows our page from the same origin, so the UI's document can look into it.
FRAME = "document.querySelector('iframe[src*=\"/deltamerge/history\"]')"
PAGE_IN_FRAME = f"(() => {{ const f = {FRAME}; return f && f.contentDocument; }})()"
LISTING_IN_FRAME = (
    f"(() => {{ const page = {PAGE_IN_FRAME}; return !!page && page.readyState === 'complete'"
    " && !!page.querySelector('a.uri'); })()"
)
CHARTS_IN_FRAME = (
    f"(() => {{ const page = {PAGE_IN_FRAME}; return !!page && page.readyState === 'complete'"
    " && page.querySelectorAll('svg.chart').length === 2; })()"
)
# How the page lays out in a frame as narrow as Airflow's tabs beside the DAG's grid in a 1,400 px window.
TAB_WIDTH = 900
LAYOUT = """(page => {
  const root = page.documentElement, last = [...page.querySelectorAll('#history th')].pop();
  return {scrollWidth: root.scrollWidth, clientWidth: root.clientWidth,
          lastColumn: last.textContent, lastColumnRight: last.getBoundingClientRect().right};
})"""
# The rows chart as Chromium laid it out: the inserted line's painted height against the chart's, the
# version labels' boxes, the lines' points and the marks of other writers' commits.
ROWS_CHART = """(() => {
  const svg = document.querySelector('svg.chart');
  const line = [...svg.querySelectorAll('polyline')].find(p => p.getAttribute('stroke') === '#2e7d32');
  const labels = [...svg.querySelectorAll('text')].filter(t => /^v\\d+$/.test(t.textContent.trim()))
    .map(t => t.getBoundingClientRect()).map(r => [r.left, r.right]);
  const titles = selector => [...svg.querySelectorAll(selector)].map(t => t.textContent);
  return {chartHeight: svg.getBoundingClientRect().height, lineHeight: line.getBoundingClientRect().height,
          labels, points: titles('circle > title'),
          others: titles('title').filter(t => t.includes('other writer'))};
})()"""
RUN_LINK_TEXT = (
    "(() => [...document.querySelectorAll('tr[data-version=\"{version}\"] a')].map(a => a.innerText))()"
)
# A browser test waits for what the page shows, never a clock; this deadline is a guard against a page that
# never shows it (a loaded 2-core machine), not a speed check.
BROWSER_TIMEOUT = 300


def test_the_merge_history_page_shows_the_tables_merges_in_a_browser(
    airflow_env, postgres, tmp_path, monkeypatch
):
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: `make test` installs it (apt-get install chromium)"
    # Screenshots go to HISTORY_SCREENSHOTS when it is set, else to the test's tmp dir; the path is printed.
    shots = Path(os.environ.get("HISTORY_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    print(f"screenshots of the history page: {shots}")
    table = table_with_merges(tmp_path / "orders", MERGES)
    other_writer_commit(table)
    # The extract the test's run merges: id 2 is in the table (an update), id 50 is not (an insert).
    (tmp_path / "orders_extract").mkdir()
    pq.write_table(
        pa.table({"id": pa.array([2, 50], pa.int64())}), tmp_path / "orders_extract" / "part-0.parquet"
    )
    long_table = long_log(tmp_path / "events", 10_000)
    env = {
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "HISTORY_TABLE": table,
        "HISTORY_LONG_TABLE": long_table,
        # The task's storage connection, which the API server resolves to read the log (no credentials here).
        "AIRFLOW_CONN_HISTORY_STORE": json.dumps({"conn_type": "generic"}),
        # A deployment's own auth manager, under which one user may read DAGs but no Asset.
        "AIRFLOW__CORE__AUTH_MANAGER": f"{NoAssetsForOneUser.__module__}.{NoAssetsForOneUser.__name__}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "AIRFLOW__API_AUTH__JWT_SECRET": JWT_SECRET,
    }
    with airflow_services(airflow_env, tmp_path / "airflow", env, postgres) as airflow:
        airflow.wait_for(
            f"{DAG_ID} to be parsed", lambda: airflow.call("GET", f"dags/{DAG_ID}"), timeout=WAIT_TIMEOUT
        )
        asset_id = airflow.wait_for(
            "the target's Asset", lambda: _asset_id(airflow, table), timeout=WAIT_TIMEOUT
        )
        long_id = airflow.wait_for(
            "the long table's Asset", lambda: _asset_id(airflow, long_table), timeout=WAIT_TIMEOUT
        )
        airflow.wait_for(
            f"{NO_MERGE_DAG_ID} to be parsed",
            lambda: airflow.call("GET", f"dags/{NO_MERGE_DAG_ID}"),
            timeout=WAIT_TIMEOUT,
        )
        page_url = f"{airflow.base}/deltamerge/history/assets/{asset_id}"

        # A real run of the merge task: its commit is the page's newest merge, and its task's links are made.
        airflow.call("PATCH", f"dags/{DAG_ID}", {"is_paused": False})
        airflow.call("POST", f"dags/{DAG_ID}/dagRuns", {"dag_run_id": RUN_ID, "logical_date": LOGICAL_DATE})
        assert _run_state_when_done(airflow, DAG_ID, RUN_ID) == "success"
        links = airflow.call("GET", f"dags/{DAG_ID}/dagRuns/{RUN_ID}/taskInstances/{TASK_ID}/links")
        # The job ran on local[2], whose driver (and its Spark UI) ended with the task: no link to it.
        spark_link = links["extra_links"]["Spark application"]
        assert spark_link is None, f"a link to {spark_link}, which answers: {_answers(spark_link)}"

        # The task's page leads to its table's history; the Browse menu's page lists every table.
        status, final_url, _ = _get(airflow, f"/deltamerge/history/dags/{DAG_ID}/tasks/{TASK_ID}")
        assert (status, final_url) == (200, page_url)
        status, _, body = _get(airflow, "/deltamerge/history")
        links_listed = re.findall(r'href="/deltamerge/history/assets/(\d+)" class="uri">([^<]+)<', body)
        assert status == 200 and sorted(links_listed) == sorted(
            [(str(asset_id), Path(table).as_uri()), (str(long_id), Path(long_table).as_uri())]
        )
        # A page of a 10,000-commit table, over HTTP: measured and printed, never asserted.
        for page in (1, 200):
            started = time.perf_counter()
            status, _, body = _get(airflow, f"/deltamerge/history/assets/{long_id}?page={page}")
            took = time.perf_counter() - started
            assert status == 200 and body.count('<tr class="merge"') == 50
            print(f"history page {page} of a 10,000-commit table over HTTP: {took * 1000:.0f} ms")
        # Where there is no history, a 404 page says why: a task that is no merge, a DAG without merges, a DAG
        # Airflow does not know, a page past the end of the history.
        for path, why in [
            (f"dags/{DAG_ID}/tasks/check_orders", "check_orders is not a DeltaMergeOperator task"),
            (f"dags/{NO_MERGE_DAG_ID}", "has no DeltaMergeOperator task"),
            ("dags/no_such_dag", "Airflow knows no DAG"),
            ("dags/no_such_dag/tasks/merge", "Airflow knows no DAG"),
            (f"assets/{asset_id}?page=2", "has 1 page(s) of 50 commits; page 2 is past its end"),
        ]:
            status, _, body = _get(airflow, f"/deltamerge/history/{path}")
            assert (status, why in body) == (404, True), f"{path}: {status} {body[-300:]}"
        # Airflow's authentication guards the routes: a forged token is refused.
        assert _get(airflow, f"/deltamerge/history/assets/{asset_id}", token="forged")[0] == 403
        # Only known targets: another Asset id is a clear 404 page, a bad page number a 400 page.
        status, _, body = _get(airflow, "/deltamerge/history/assets/999999")
        assert status == 404 and "not the target of any DeltaMergeOperator task" in body
        status, _, body = _get(airflow, f"/deltamerge/history/assets/{asset_id}?page=last")
        assert status == 400 and "Pages are numbered from 1" in body

        # A user who may read the DAG but not its table's Asset sees neither the history nor where it is.
        monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", JWT_SECRET)
        reader = NoAssetsForOneUser().generate_jwt(
            SimpleAuthManagerUser(username=NO_ASSETS_USER, role="VIEWER")
        )
        assert airflow.call("GET", f"dags/{DAG_ID}")  # the admin's view, for the next line's contrast
        assert _get(airflow, f"/api/v2/dags/{DAG_ID}", token=reader)[0] == 200
        assert _get(airflow, f"/deltamerge/history/assets/{asset_id}", token=reader)[0] == 403
        task_path = f"/deltamerge/history/dags/{DAG_ID}/tasks/{TASK_ID}"
        status, final_url, body = _get(airflow, task_path, token=reader)
        assert (status, final_url) == (403, airflow.base + task_path)  # no redirect naming the Asset
        assert "You may not read the Asset" in body and Path(table).as_uri() not in body
        status, _, body = _get(airflow, "/deltamerge/history", token=reader)
        assert status == 200 and "/history/assets/" not in body and Path(table).name not in body

        # The page on its own, in a window as narrow as the UI's tab.
        with Browser(chromium, tmp_path / "chromium-profile", width=TAB_WIDTH, height=1100) as browser:
            browser.open(page_url, until=CHARTS_IN_PAGE, what="the two charts", timeout=BROWSER_TIMEOUT)
            dom, layout, chart = (
                browser.html(),
                browser.evaluate(f"{LAYOUT}(document)"),
                browser.evaluate(ROWS_CHART),
            )
            run_links = {
                v: browser.evaluate(RUN_LINK_TEXT.format(version=v)) for v in (OUR_RUN_VERSION, MERGES)
            }
            screenshot = shots / "merge_history.png"
            browser.screenshot(screenshot)
        # Inside Airflow's UI: the Browse menu's page, then a table's history in its frame, then a run's link.
        ui_page, ui_screenshot = f"{airflow.base}/plugin/deltamerge_history", shots / "in_airflow.png"
        with Browser(chromium, tmp_path / "chromium-profile", width=1400, height=1000) as browser:
            browser.open(ui_page, until=LISTING_IN_FRAME, what="its frame's tables", timeout=BROWSER_TIMEOUT)
            browser.evaluate(f"{PAGE_IN_FRAME}.querySelector('a.uri[href$=\"/assets/{asset_id}\"]').click()")
            browser.wait_until(
                until=CHARTS_IN_FRAME, what="the history in its frame", timeout=BROWSER_TIMEOUT
            )
            ui_dom = browser.html()
            framed_layout = browser.evaluate(f"{LAYOUT}({PAGE_IN_FRAME})")
            browser.screenshot(ui_screenshot)
            browser.evaluate(f"{PAGE_IN_FRAME}.querySelector('a.run').click()")
            # The run's page replaces the plugin's in the window: no frame is left with ours or a second UI.
            browser.wait_until(
                until=(
                    f"location.pathname === '/dags/{DAG_ID}/runs/{RUN_ID}' && ![...document.querySelectorAll("
                    "'iframe')].some(f => f.src.includes('/deltamerge/') || f.src.includes('/dags/'))"
                ),
                what="the run's page in the window, not in the frame",
                timeout=WAIT_TIMEOUT,
            )
            browser.screenshot(shots / "run_page.png")
            # A DAG without a merge has no merge history tab: wait until its tabs and the plugins are in.
            browser.open(
                f"{airflow.base}/dags/{NO_MERGE_DAG_ID}",
                until=(
                    f"!!document.querySelector('a[href$=\"/dags/{NO_MERGE_DAG_ID}/code\"]') && performance"
                    ".getEntriesByType('resource').some(e => e.name.includes('/api/v2/plugins'))"
                ),
                what="the DAG's tabs",
                timeout=BROWSER_TIMEOUT,
            )
            time.sleep(2)  # the plugins' answer, rendered
            no_merge_tabs = browser.evaluate(
                "[...document.querySelectorAll('a')].map(a => a.getAttribute('href') || '')"
                ".filter(h => h.includes('/plugin/'))"
            )
            browser.screenshot(shots / "dag_without_merges.png")

    # Newest first: our run's merge, the other writer's append, merges 12..1, delta-rs' version 0.
    versions = [int(v) for v in re.findall(r'<tr class="\w+" data-version="(\d+)"', dom)]
    assert versions == list(range(OUR_RUN_VERSION, -1, -1))
    assert len(re.findall(r'<tr class="merge"', dom)) == MERGES + 1
    assert "other writer: WRITE" in dom and '<span class="executor">classic</span>' in dom
    # A merge's run is named by its DAG and logical date (the run id is the link's title), and links out of
    # the frame, as do the DAG links.
    assert run_links == {
        OUR_RUN_VERSION: [f"{DAG_ID}\n{SHOWN_LOGICAL_DATE}"],
        MERGES: ["orders_daily\n2026-01-12 00:00"],
    }
    airflow_links = re.findall(r'<a href="/dags/[^"]*"[^>]*>', dom)
    assert airflow_links and all('target="_top"' in a for a in airflow_links), airflow_links
    # Two charts (rows, duration), three row series and a duration line, scaled to the merges (1 to 4 rows):
    # the inserted line spans a good part of the chart's height, and the check's max of 100, far above,
    # is named above the chart instead of drawn.
    assert dom.count('<svg class="chart"') == 2
    assert dom.count('class="series"') == 4
    assert chart["lineHeight"] > 0.3 * chart["chartHeight"], chart
    assert "above the chart: inserted max (check_orders) = 100" in dom
    assert "numTargetRowsDeleted / numTargetRowsCopied &lt;= 0.05" in dom
    # Other writers' commits (versions 0 and 13) are marks of their own, no points of the merges' lines.
    assert sorted(chart["others"]) == ["v0 other writer: WRITE", f"v{MERGES + 1} other writer: WRITE"]
    assert not [p for p in chart["points"] if p.startswith(("v0 ", f"v{MERGES + 1} "))], chart["points"]
    # Versions are labelled along the axis, many of them, none over another.
    spans = sorted(chart["labels"])
    assert len(spans) >= 8 and all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans
    # In the narrow window and in the UI's frame the table fits: no sideways scrolling, the last column shown.
    for shown in (layout, framed_layout):
        assert shown["scrollWidth"] <= shown["clientWidth"], shown
        assert shown["lastColumn"] == "duration" and shown["lastColumnRight"] <= shown["clientWidth"], shown
    # The browser painted the charts: the inserted line's colour is on the screen, in the frame too.
    assert _painted(screenshot, INSERTED_RGB) > 200
    assert re.search(r'<iframe [^>]*src="/deltamerge/history"', ui_dom)
    assert _painted(ui_screenshot, INSERTED_RGB) > 200
    assert no_merge_tabs == [], f"tabs on {NO_MERGE_DAG_ID}'s page: {no_merge_tabs}"
    # The screenshots stay in the test's tmp dir; the docs' one is replaced only when asked for.
    if os.environ.get("UPDATE_DOCS_SCREENSHOT"):
        shutil.copy(ui_screenshot, DOCS_SCREENSHOT)


def _run_state_when_done(airflow: Airflow, dag_id: str, run_id: str) -> str:
    """The run's state once it finished; a call the busy API server does not answer in time is made again."""

    def state() -> str | None:
        try:
            found = str(airflow.call("GET", f"dags/{dag_id}/dagRuns/{run_id}")["state"])
        except TimeoutError:
            return None
        return found if found in ("success", "failed") else None

    return str(airflow.wait_for(f"run {run_id} of {dag_id} to finish", state, timeout=RUN_TIMEOUT))


def _answers(url: str) -> str:
    """What ``url`` answers, or why it does not."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return f"HTTP {response.status}"
    except (urllib.error.URLError, OSError) as err:
        return f"nothing ({err})"


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
