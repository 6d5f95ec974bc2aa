"""The history page as HTML: a table's commits, newest first, and charts of rows changed and duration.

Rendered by Jinja with autoescaping: a value from the log (a run id, an operation, a path) is always text,
never markup. The charts are SVG that ``charts.py`` built with its own text escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from airflow_provider_deltamerge.delta.log.commit_match import Bound, MetricBounds
from airflow_provider_deltamerge.history.charts import Level, Marker, Series, line_chart
from airflow_provider_deltamerge.history.entries import COLUMNS, HistoryEntry
from airflow_provider_deltamerge.history.known_tables import KnownTable
from airflow_provider_deltamerge.history.log_pages import LogPage
from airflow_provider_deltamerge.metrics import (
    EXECUTION_TIME_MS,
    NUM_TARGET_BYTES_ADDED,
    NUM_TARGET_BYTES_REMOVED,
    NUM_TARGET_ROWS_DELETED,
    NUM_TARGET_ROWS_INSERTED,
    NUM_TARGET_ROWS_UPDATED,
)

ROW_SERIES = {
    NUM_TARGET_ROWS_INSERTED: ("inserted", "#2e7d32"),
    NUM_TARGET_ROWS_UPDATED: ("updated", "#1565c0"),
    NUM_TARGET_ROWS_DELETED: ("deleted", "#c62828"),
}
DURATION_SERIES = {EXECUTION_TIME_MS: ("duration (ms)", "#6a1b9a")}
COLUMN_TITLES = {
    "numTargetRowsInserted": "inserted",
    "numTargetRowsUpdated": "updated",
    "numTargetRowsDeleted": "deleted",
    "numTargetRowsCopied": "copied",
    "numTargetFilesRemoved": "files removed",
    "numTargetFilesAdded": "files added",
    "numTargetBytesRemoved": "bytes removed",
    "numTargetBytesAdded": "bytes added",
    "executionTimeMs": "duration",
}
BYTE_COLUMNS = frozenset({NUM_TARGET_BYTES_ADDED, NUM_TARGET_BYTES_REMOVED})
assert set(COLUMN_TITLES) == set(COLUMNS)

_ENVIRONMENT = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
# Fits a frame of 800 CSS pixels without scrolling sideways: the charts shrink with the page, the table's
# headers and text cells wrap, and bytes and durations are written short.
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 12px; color: #222; }
h1 { font-size: 18px; } .uri { font-family: monospace; overflow-wrap: anywhere; }
svg.chart { display: block; width: 100%; max-width: 900px; height: auto; }
table { border-collapse: collapse; font-size: 12px; width: 100%; }
th, td { padding: 3px 4px; border-bottom: 1px solid #ddd; vertical-align: top; }
th { text-align: right; vertical-align: bottom; font-weight: 600; } th.text { text-align: left; }
td.run { overflow-wrap: anywhere; } .executor { color: #666; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.other td { color: #777; }
.chart .axis { stroke: #888; } .chart .grid { stroke: #eee; } .chart .bound { stroke-dasharray: 6 4; }
.chart text { font-size: 11px; } .chart .above { fill: #555; font-style: italic; }
.chart .title { font-weight: bold; font-size: 12px; } nav a { margin-right: 12px; }
"""
# Links to Airflow's own pages leave the plugin's frame: in it they would open a second Airflow UI. Outside
# Airflow's UI ``target="_top"`` does it; Airflow's frame is sandboxed without top navigation, so there the
# page hands the link to the UI's own router (same origin: a history entry, then the event it listens to).
_LEAVE_FRAME = """
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest('a[target="_top"]');
  const modified = event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey;
  if (!link || modified || window.top === window) {
    return;
  }
  try {
    window.top.history.pushState(null, "", link.href);
  } catch (refused) {
    return;  // the window is another origin's: the browser decides
  }
  event.preventDefault();
  window.top.dispatchEvent(new PopStateEvent("popstate"));
});
"""
_HISTORY = _ENVIRONMENT.from_string(
    """<!doctype html><html><head><meta charset="utf-8"><title>Merge history: {{ table.uri }}</title>
<meta name="viewport" content="width=device-width"><style>{{ style }}</style>
<script>{{ leave_frame }}</script></head><body>
<h1>Merge history of <span class="uri">{{ table.uri }}</span></h1>
<p>Version {{ page.latest_version }} is the newest; page {{ page.page }} of {{ page.pages }}, newest first.
Merged by {% for task in table.tasks -%}
<a href="{{ task_href(task.dag_id) }}" target="_top">{{ task.dag_id }}</a>.{{ task.task_id }}
{%- if not loop.last %}, {% endif %}{% endfor %}.</p>
{{ rows_chart }}
{{ duration_chart }}
{% if bounds %}<p>Bounds of the check tasks: {% for check, bound in bounds %}{{ check }}: {{ bound }}{% if not
loop.last %}; {% endif %}{% endfor %}.</p>{% endif %}
<table id="history"><thead><tr><th>version</th><th class="text">time (UTC)</th>
<th class="text">DAG run (logical date), executor</th>
{% for title in titles %}<th>{{ title }}</th>{% endfor %}</tr></thead><tbody>
{% for entry in page.entries %}
<tr class="{{ 'merge' if entry.ours else 'other' }}" data-version="{{ entry.version }}">
<td class="n">{{ entry.version }}</td>
<td>{{ entry.time.strftime('%Y-%m-%d %H:%M:%S') if entry.time else '' }}</td>
{% if entry.ours %}<td class="run"><a href="{{ run_href(entry) }}" target="_top" class="run"
title="{{ entry.provenance.get('runId', '') }}">{{ entry.provenance.get('dagId', '') }}<br>
{{- run_label(entry) }}</a> <span class="executor">{{ entry.provenance.get('executor', '') }}</span></td>
{% else %}<td class="run">other writer: {{ entry.operation or 'no commitInfo' }}</td>{% endif %}
{% for column in columns %}<td class="n">{{ cell(column, entry.numbers[column]) if column in entry.numbers
else '' }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table>
{% if page.older_removed %}<p>Older commits were removed by the table's log clean-up.</p>{% endif %}
<nav>{% if page.page > 1 %}<a href="?page={{ page.page - 1 }}">newer</a>{% endif %}
{% if page.page < page.pages and not page.older_removed %}
<a href="?page={{ page.page + 1 }}">older</a>{% endif %}
</nav></body></html>"""
)
_LISTING = _ENVIRONMENT.from_string(
    """<!doctype html><html><head><meta charset="utf-8"><title>{{ title }}</title><style>{{ style }}</style>
</head><body><h1>{{ title }}</h1>{% if tables %}<ul>{% for table in tables %}
<li><a href="{{ prefix }}/history/assets/{{ table.asset_id }}" class="uri">{{ table.uri }}</a>, merged by
{% for task in table.tasks %}{{ task.dag_id }}.{{ task.task_id }}{% if not loop.last %}, {% endif %}
{%- endfor %}</li>{% endfor %}
</ul>{% else %}<p>{{ empty }}</p>{% endif %}</body></html>"""
)


def history_html(table: KnownTable, page: LogPage) -> str:
    """The page of ``table``'s history."""
    oldest_first = list(reversed(page.entries))
    bounds = [
        (check, bound) for task in table.tasks for check, b in task.bounds.items() for bound in _parsed(b)
    ]
    return _HISTORY.render(
        table=table,
        page=page,
        style=_STYLE,
        leave_frame=Markup(_LEAVE_FRAME),
        rows_chart=_chart("Rows changed per merge", oldest_first, ROW_SERIES, bounds),
        duration_chart=_chart("Duration per merge", oldest_first, DURATION_SERIES, bounds),
        bounds=[(check, bound.expression + _limits(bound)) for check, bound in bounds],
        titles=list(COLUMN_TITLES.values()),
        columns=list(COLUMN_TITLES),
        cell=_cell,
        task_href=lambda dag_id: f"/dags/{quote(dag_id, safe='')}",
        run_href=_run_href,
        run_label=_run_label,
    )


def listing_html(title: str, tables: Sequence[KnownTable], *, prefix: str, empty: str) -> str:
    """A list of tables, each linking to its history page."""
    return _LISTING.render(title=title, tables=tables, prefix=prefix, empty=empty, style=_STYLE)


def message_html(title: str, message: str) -> str:
    """A page that says what went wrong and what to do."""
    return _LISTING.render(title=title, tables=[], prefix="", empty=message, style=_STYLE)


def _chart(
    title: str,
    entries: Sequence[HistoryEntry],
    plotted: dict[str, tuple[str, str]],
    bounds: Iterable[tuple[str, Bound]],
) -> Markup:
    merges = [e for e in entries if e.ours]
    series = [
        Series(name, color, [(e.version, e.numbers[metric]) for e in merges if metric in e.numbers])
        for metric, (name, color) in plotted.items()
    ]
    levels = [
        Level(f"{name} {label} ({check})", color, value)
        for check, bound in bounds
        if bound.per is None and bound.metric in plotted
        for name, color in [plotted[bound.metric]]
        for label, value in (("min", bound.minimum), ("max", bound.maximum))
        if value is not None
    ]
    others = [
        Marker(e.version, f"other writer: {e.operation or 'no commitInfo'}") for e in entries if not e.ours
    ]
    chart = line_chart(title, [s for s in series if s.points], levels, others)
    return Markup(chart)  # charts.py escapes its text


def _parsed(declared: object) -> tuple[Bound, ...]:
    return MetricBounds(declared).bounds  # type: ignore[arg-type]


def _limits(bound: Bound) -> str:
    low = "" if bound.minimum is None else f" >= {bound.minimum:g}"
    high = "" if bound.maximum is None else f" <= {bound.maximum:g}"
    return low + ("," if low and high else "") + high


def _cell(column: str, value: int) -> str:
    """A number as its column shows it: bytes in KiB to TiB, durations in seconds, counts with separators."""
    if column in BYTE_COLUMNS:
        size, unit = float(value), "B"
        for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(size) < 1024 or unit == "TiB":
                break
            size /= 1024
        return f"{value:,} B" if unit == "B" else f"{size:.1f} {unit}"
    if column == EXECUTION_TIME_MS:
        return f"{value / 1000:,.1f} s"
    return f"{value:,}"


def _run_href(entry: HistoryEntry) -> str:
    dag_id, run_id = entry.provenance.get("dagId", ""), entry.provenance.get("runId", "")
    return f"/dags/{quote(str(dag_id), safe='')}/runs/{quote(str(run_id), safe='')}"


def _run_label(entry: HistoryEntry) -> str:
    """The run's logical date as its merge recorded it; a run triggered without one is named by its id."""
    recorded = entry.provenance.get("logicalDate")
    try:
        logical_date = datetime.fromisoformat(str(recorded)).astimezone(UTC)
    except ValueError:
        return str(entry.provenance.get("runId", ""))
    return logical_date.strftime("%Y-%m-%d %H:%M")
