"""Line charts as inline SVG, drawn on the server: the page needs no script and no front-end build.

Every piece of text is escaped here, so the markup can be placed into the page as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 900, 220
# Room for the y axis' labels on the left and the versions below.
LEFT, RIGHT, TOP, BOTTOM = 70, 170, 24, 30


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


def line_chart(title: str, series: Sequence[Series], levels: Sequence[Level] = ()) -> str:
    """An SVG chart of ``series`` over table versions, with ``levels`` drawn dashed and labelled."""
    versions = [v for s in series for v, _ in s.points]
    if not versions:
        return f'<p class="empty">{escape(title)}: nothing to draw on this page.</p>'
    first, last = min(versions), max(versions)
    top = max([value for s in series for _, value in s.points] + [lv.value for lv in levels] + [1]) * 1.1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(version: int) -> float:
        return LEFT + (plot_w * (version - first) / (last - first) if last > first else plot_w / 2)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - max(value, 0) / top)

    parts = [
        f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg">',
        f'<text x="{LEFT}" y="14" class="title">{escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" class="axis"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" class="axis"/>',
        f'<text x="{LEFT - 6}" y="{TOP + plot_h}" class="tick" text-anchor="end">0</text>',
        f'<text x="{LEFT - 6}" y="{TOP + 10}" class="tick" text-anchor="end">{_short(top / 1.1)}</text>',
        f'<text x="{LEFT}" y="{HEIGHT - 8}" class="tick">v{first}</text>',
        f'<text x="{LEFT + plot_w}" y="{HEIGHT - 8}" class="tick" text-anchor="end">v{last}</text>',
    ]
    for level in levels:
        height = y(level.value)
        parts.append(
            f'<line x1="{LEFT}" y1="{height:.1f}" x2="{LEFT + plot_w}" y2="{height:.1f}" class="bound" '
            f'stroke="{escape(level.color)}"/>'
            f'<text x="{LEFT + plot_w - 4}" y="{height - 4:.1f}" class="tick" text-anchor="end" '
            f'fill="{escape(level.color)}">'
            f"{escape(level.label)}</text>"
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
        parts.append(
            f'<text x="{LEFT + plot_w + 6}" y="{TOP + 12 + 14 * row}" class="legend" '
            f'fill="{escape(line.color)}">{escape(line.name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _short(value: float) -> str:
    """A number as an axis shows it: 1234567 -> 1.2M."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:g}"
