"""Line charts as inline SVG, drawn on the server: they need no script and no front-end build.

A chart is scaled to its lines, never to a check's bound: merges that change 1 to 4 rows fill the chart even
when a bound says 100, and such a bound is named above the chart instead of drawn (``Level``). Commits of
other writers are no points of the lines; each is a grey mark on the version axis (``Marker``). Every piece
of text is escaped here, so the markup can be placed into the page as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 900, 230
# Room for the y axis' labels on the left, the legend on the right and the versions below.
LEFT, RIGHT, TOP, BOTTOM = 56, 150, 34, 32
# At most this many ticks on the value axis, and the narrowest gap between two version labels.
VALUE_TICKS = 5
VERSION_LABEL_GAP = 44
OTHER_WRITER_COLOR = "#757575"


@dataclass(frozen=True)
class Series:
    """One line: (version, value) points, oldest first."""

    name: str
    color: str
    points: Sequence[tuple[int, float]]


@dataclass(frozen=True)
class Level:
    """A horizontal line across the chart: a check bound."""

    label: str
    color: str
    value: float


@dataclass(frozen=True)
class Marker:
    """Another writer's commit, none of the lines': a mark at its version, ``label`` its tooltip."""

    version: int
    label: str


def line_chart(
    title: str, series: Sequence[Series], levels: Sequence[Level] = (), markers: Sequence[Marker] = ()
) -> str:
    """An SVG chart of ``series`` over table versions: ``levels`` within the lines' range drawn dashed and
    labelled, those above it named in a note, ``markers`` as marks on the version axis."""
    values = [value for s in series for _, value in s.points]
    if not values:
        return f'<p class="empty">{escape(title)}: nothing to draw on this page.</p>'
    versions = [v for s in series for v, _ in s.points] + [m.version for m in markers]
    first, last = min(versions), max(versions)
    step = _nice_step(max(max(values), 1) / VALUE_TICKS)
    top = step * math.ceil(max(max(values), 1) / step)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    bottom = TOP + plot_h

    def x(version: int) -> float:
        return LEFT + (plot_w * (version - first) / (last - first) if last > first else plot_w / 2)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - max(value, 0) / top)

    parts = [
        f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg">',
        f'<text x="{LEFT}" y="14" class="title">{escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{bottom}" x2="{LEFT + plot_w}" y2="{bottom}" class="axis"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" class="axis"/>',
    ]
    for tick in range(round(top / step) + 1):
        value = tick * step
        parts.append(
            f'<line x1="{LEFT}" y1="{y(value):.1f}" x2="{LEFT + plot_w}" y2="{y(value):.1f}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" class="tick" text-anchor="end">'
            f"{_short(value)}</text>"
        )
    label_step = int(_nice_step(max(last - first, 1) * VERSION_LABEL_GAP / plot_w, integer=True))
    for version in range(-(-first // label_step) * label_step, last + 1, label_step):
        parts.append(
            f'<text x="{x(version):.1f}" y="{bottom + 16}" class="version" text-anchor="middle">'
            f"v{version}</text>"
        )
    above = []
    for level in levels:
        if level.value > top:
            above.append(level)
            continue
        height = y(level.value)
        parts.append(
            f'<line x1="{LEFT}" y1="{height:.1f}" x2="{LEFT + plot_w}" y2="{height:.1f}" class="bound" '
            f'stroke="{escape(level.color)}"/>'
            f'<text x="{LEFT + plot_w - 4}" y="{height - 4:.1f}" class="tick" text-anchor="end" '
            f'fill="{escape(level.color)}">{escape(level.label)}</text>'
        )
    if above:
        names = "; ".join(f"{level.label} = {_short(level.value)}" for level in above)
        parts.append(
            f'<text x="{LEFT + plot_w}" y="{TOP - 8}" class="tick above" text-anchor="end">'
            f"above the chart: {escape(names)}</text>"
        )
    for row, line in enumerate(series):
        coordinates = " ".join(f"{x(v):.1f},{y(value):.1f}" for v, value in line.points)
        parts.append(
            f'<polyline points="{coordinates}" fill="none" stroke="{escape(line.color)}" stroke-width="2" '
            f'class="series"><title>{escape(line.name)}</title></polyline>'
        )
        parts.extend(
            f'<circle cx="{x(v):.1f}" cy="{y(value):.1f}" r="3" fill="{escape(line.color)}">'
            f"<title>v{v} {escape(line.name)}: {_short(value)}</title></circle>"
            for v, value in line.points
        )
        parts.append(_legend(row, line.name, line.color))
    for marker in markers:
        cx = x(marker.version)
        parts.append(
            f'<path d="M{cx:.1f} {bottom - 6} l5 6 l-5 6 l-5 -6 z" fill="{OTHER_WRITER_COLOR}" '
            f'class="other-writer"><title>v{marker.version} {escape(marker.label)}</title></path>'
        )
    if markers:
        parts.append(_legend(len(series), "◆ other writer", OTHER_WRITER_COLOR))
    parts.append("</svg>")
    return "".join(parts)


def _legend(row: int, name: str, color: str) -> str:
    return (
        f'<text x="{WIDTH - RIGHT + 10}" y="{TOP + 12 + 16 * row}" class="legend" '
        f'fill="{escape(color)}">{escape(name)}</text>'
    )


def _nice_step(rough: float, *, integer: bool = False) -> float:
    """The least of 1, 2, 2.5, 5 times a power of ten that is at least ``rough`` (whole with ``integer``)."""
    magnitude = 10 ** math.floor(math.log10(rough)) if rough > 0 else 1
    factors = (1, 2, 5, 10) if integer or magnitude < 10 else (1, 2, 2.5, 5, 10)
    step = next(f * magnitude for f in factors if f * magnitude >= rough)
    return max(1, round(step)) if integer else step


def _short(value: float) -> str:
    """A number as an axis shows it: 1234567 -> 1.2M."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:g}"
