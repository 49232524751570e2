"""The PNG of `fleetbench history`: a metric's series over the stored runs, each step marked and named."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from fleetbench.compare.history import Series, Step
from fleetbench.fsutil import atomic_path

MAX_PANELS = 8  # series on one page; more are left to a narrower --label


def _panel(ax: Axes, series: Series, found: list[Step]) -> None:
    """One series: its points in run order, each segment's median, a line and a label at each step."""
    xs = list(range(len(series.points)))
    ax.plot(xs, [p.value for p in series.points], marker=".", linestyle="-", color="tab:blue", alpha=0.6, label="run")
    bounds = [0, *[s.index for s in found], len(xs)]
    for start, stop in itertools.pairwise(bounds):
        median = median_or_nan([p.value for p in series.points[start:stop]])
        ax.hlines(median, start - 0.4, stop - 0.6, colors="tab:orange", linewidth=2)
    for step in found:
        ax.axvline(step.index - 0.5, color="tab:red", linestyle="--", linewidth=1)
        ax.annotate(
            f"{step.change_pct:+.1f}% at {step.run_id}\n{step.commit[:12]}",
            (step.index - 0.5, 1.0),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            ha="left",
            va="top",
            color="tab:red",
        )
    labels = " ".join(f"{k}={v}" for k, v in sorted(series.labels.items()))
    ax.set_title(f"{series.benchmark} {series.metric.removeprefix('fleetbench_')} {labels}".strip(), fontsize=9)
    ax.set_ylabel("value (median of each run's samples)", fontsize=7)
    ax.grid(alpha=0.3)


# Written into every plot (a PNG tEXt chunk): how `history --png` knows a file it may replace.
PNG_MARK = b"fleetbench history"


def history_png(panels: list[tuple[Series, list[Step]]], path: Path) -> Path:
    """Every series (at most MAX_PANELS) in its own panel, run order on x; written to `path`, returned."""
    shown = panels[:MAX_PANELS]
    rows = max(1, len(shown))
    fig, axes = plt.subplots(rows, 1, figsize=(10, 2.6 * rows), dpi=100, squeeze=False)
    for ax, (series, found) in zip(axes[:, 0], shown, strict=True):
        _panel(ax, series, found)
    axes[-1, 0].set_xlabel("run, oldest first")
    if len(panels) > MAX_PANELS:
        fig.suptitle(f"first {MAX_PANELS} of {len(panels)} series (narrow with --label)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(path, "history plot") as tmp:  # a reader never sees half a PNG
            fig.savefig(tmp, format="png", metadata={"Software": PNG_MARK.decode()})
    finally:
        plt.close(fig)
    return path


def median_or_nan(values: list[float]) -> float:
    """The median of `values` (NaN for none)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
