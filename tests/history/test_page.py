"""The history page's HTML: values from the log are text, never markup; bounds are drawn where they apply."""

from __future__ import annotations

import re

from airflow_provider_deltamerge.history.entries import history_entry
from airflow_provider_deltamerge.history.known_tables import KnownTable, MergeTask
from airflow_provider_deltamerge.history.log_pages import LogPage
from airflow_provider_deltamerge.history.page import history_html

HOSTILE = '<script>alert("x")</script>'


def page_of(*commit_infos: dict) -> LogPage:
    entries = [history_entry(v, info) for v, info in reversed(list(enumerate(commit_infos)))]
    return LogPage(entries, latest_version=len(entries) - 1, page=1, pages=1, older_removed=False)


def test_values_from_the_log_and_the_dag_are_escaped():
    # Given: a commit whose provenance, operation and metrics carry markup, and a DAG id with markup
    hostile_merge = {
        "operation": HOSTILE,
        "operationMetrics": {"numTargetRowsInserted": "5"},
        "deltamerge": {"dagId": HOSTILE, "runId": HOSTILE, "executor": HOSTILE},
    }
    other_writer = {"operation": HOSTILE, "operationMetrics": {"numTargetRowsInserted": "1"}}
    bounds = {"check<b>": {"numTargetRowsInserted": {"max": 3}}}
    table = KnownTable(1, f"file:///lake/{HOSTILE}", [MergeTask(HOSTILE, "merge", None, bounds)])
    # When: the page is rendered
    html = history_html(table, page_of(other_writer, hostile_merge))
    # Then: no markup from the data survives, yet the data is all there as text
    assert html.count("<script>") == 1 and "<b>" not in html  # the page's own script only
    assert html.count("&lt;script&gt;") >= 5
    assert "inserted max (check&lt;b&gt;)" in html  # the bound's label in the chart, escaped by charts.py
    assert 'href="/dags/%3Cscript%3E' in html  # the run's link, its path segments quoted


def test_a_page_without_numbers_says_so_instead_of_an_empty_chart():
    html = history_html(KnownTable(1, "file:///lake/t", []), page_of({}))
    assert "Rows changed per merge: nothing to draw on this page." in html
    assert "other writer: no commitInfo" in html


def merges_changing(*inserted: int, bounds: dict) -> str:
    """The page of merges that inserted ``inserted`` rows, oldest first, under check bounds ``bounds``."""
    merges = [
        {
            "operationMetrics": {"numTargetRowsInserted": str(n)},
            "deltamerge": {"dagId": "d", "runId": f"r{i}"},
        }
        for i, n in enumerate(inserted)
    ]
    table = KnownTable(1, "file:///lake/t", [MergeTask("d", "merge", None, {"check": bounds})])
    return history_html(table, page_of(*merges))


def test_the_chart_scales_to_the_merges_and_names_a_bound_far_above_them():
    html = merges_changing(1, 4, 2, bounds={"numTargetRowsInserted": {"max": 100}})
    assert "above the chart: inserted max (check) = 100" in html
    assert 'class="bound"' not in html
    assert '<text x="50" y="38.0" class="tick" text-anchor="end">4</text>' in html  # the axis ends at 4


def test_a_bound_among_the_merges_is_drawn_where_it_is():
    html = merges_changing(1, 4, 2, bounds={"numTargetRowsInserted": {"max": 3}})
    # On an axis from 0 to 4, 3 is a quarter of the plot's 164 px below its top at 34 px.
    assert (
        re.search(r'<line [^>]*y1="75.0" [^>]*class="bound"', html) and "inserted max (check)</text>" in html
    )
    assert "above the chart" not in html
