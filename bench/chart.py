"""The PNG chart of the report: the engine's time over each baseline's, per case, on a log scale."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a benchmark machine

import matplotlib.pyplot as plt

from bench.summary import BASELINES, CaseSummary

COLOURS = {
    "floor": "#4c72b0",
    "deltalake-streamed": "#dd8452",
    "deltalake-non-streamed": "#55a868",
    "delta-spark": "#c44e52",
    "delta-spark-warm": "#8172b3",
}
TARGET_OVER_FLOOR = 1.5


def draw_ratios(summaries: Sequence[CaseSummary], path: Path, *, title: str) -> None:
    """Horizontal bars, one group per case (top to bottom in the report's order), one bar per baseline."""
    height = 0.8 / len(BASELINES)
    figure, axes = plt.subplots(figsize=(11, 0.55 * len(summaries) + 1.8))
    for offset, baseline in enumerate(BASELINES):
        rows = [(i, s.ratios[baseline]) for i, s in enumerate(summaries) if baseline in s.ratios]
        axes.barh(
            [i + (offset - 1) * height for i, _ in rows],
            [ratio for _, ratio in rows],
            height=height,
            color=COLOURS[baseline],
            label=f"engine ÷ {baseline}",
        )
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.axvline(
        TARGET_OVER_FLOOR,
        color=COLOURS["floor"],
        linestyle="--",
        linewidth=0.8,
        label=f"target: engine ≤ {TARGET_OVER_FLOOR}x the floor",
    )
    axes.set_xscale("log")
    axes.set_yticks(range(len(summaries)), [s.case for s in summaries], fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("engine seconds ÷ baseline seconds (median; log scale, < 1: engine faster)")
    axes.set_title(title, pad=40)
    # Above the bars, so that no bar hides under it; two columns fit beside the long case names.
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8, frameon=False)
    axes.grid(axis="x", which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
