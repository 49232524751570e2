"""Plots of two runs on the same axes, for `report --compare`: train curves and edge latency boxes."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from fleetbench.fsutil import atomic_path
from fleetbench.train.history import StepRow

EDGE_RESULTS = "edge_results.json"
BASE_COLOUR, NEW_COLOUR = "tab:blue", "tab:orange"
BOXES_PER_ROW = 4

# (kernel, dtype, size) -> every dispatch latency of that kernel variant, in seconds.
EdgeLatencies = dict[tuple[str, str, str], list[float]]

log = logging.getLogger(__name__)


def train_overlay(base: list[StepRow], new: list[StepRow], names: tuple[str, str], path: Path) -> Path:
    """Loss and tokens/s per step of both runs, base and new in their own colours; returns `path`."""
    fig, (ax_loss, ax_tput) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, dpi=100)
    # Base dashed and drawn last: two runs of one seed have the same loss, and it must still show.
    for rows, name, colour, style in (
        (new, f"new {names[1]}", NEW_COLOUR, "-"),
        (base, f"base {names[0]}", BASE_COLOUR, "--"),
    ):
        steps = [row.step for row in rows]
        marker = "." if len(rows) < 50 else None
        for ax, values in ((ax_loss, [row.loss for row in rows]), (ax_tput, [row.tokens_per_s for row in rows])):
            ax.plot(steps, values, marker=marker, color=colour, linestyle=style, label=name)
    ax_loss.set_ylabel("loss")
    ax_tput.set_ylabel("tokens/s (whole job)")
    ax_tput.set_xlabel("step")
    for ax in (ax_loss, ax_tput):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"train: base {names[0]} vs new {names[1]}", fontsize=11)
    fig.tight_layout()
    try:
        with atomic_path(path, "comparison plot") as tmp:  # a failed write leaves no half PNG and no .tmp
            fig.savefig(tmp, format="png")
    finally:
        plt.close(fig)
    return path


def read_edge_latencies(run_dir: Path) -> EdgeLatencies:
    """The dispatch latencies of each timed kernel variant in the run's edge_results.json; {} without one.

    A damaged file is a warning, not a failure: the rest of the report still renders.
    """
    path = run_dir / EDGE_RESULTS
    if not path.is_file():
        return {}
    try:
        kernels = json.loads(path.read_text(encoding="utf-8"))["kernels"]
        found = {
            (str(k["kernel"]), str(k["dtype"]), str(k["size"])): [float(x) for x in k.get("latencies_s") or []]
            for k in kernels
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s: not readable as edge results (%s); no latency boxes from it", path, exc)
        return {}
    return {key: [x for x in values if math.isfinite(x)] for key, values in found.items() if values}


def _boxes(ax: Axes, variant: str, base: list[float], new: list[float]) -> None:
    parts = ax.boxplot(
        [[x * 1e3 for x in base], [x * 1e3 for x in new]],
        whis=(1, 99),
        showfliers=True,
        flierprops={"markersize": 2},
        patch_artist=True,
    )
    for patch, colour in zip(parts["boxes"], (BASE_COLOUR, NEW_COLOUR), strict=True):
        patch.set_facecolor(colour)
        patch.set_alpha(0.5)
    ax.set_xticks([1, 2], ["base", "new"])
    ax.set_title(variant, fontsize=9)
    ax.set_ylabel("latency (ms)", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(axis="y", alpha=0.3)


def edge_boxes(
    kernel: str, variants: list[tuple[str, list[float], list[float]]], names: tuple[str, str], path: Path
) -> Path:
    """One kernel's latency distributions, base beside new, one pair of boxes per dtype/size
    (each on its own axis: sizes differ by orders of magnitude); returns `path`."""
    cols = min(len(variants), BOXES_PER_ROW)
    rows = math.ceil(len(variants) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(max(4.0, 2.8 * cols), 2.9 * rows + 0.6), dpi=100, squeeze=False)
    flat = [ax for line in axes for ax in line]
    for ax, (variant, base, new) in zip(flat, variants, strict=False):
        _boxes(ax, variant, base, new)
    for ax in flat[len(variants) :]:
        ax.set_axis_off()
    fig.suptitle(
        f"{kernel}: base {names[0]} vs new {names[1]}\nbox: quartiles, whiskers p1-p99, every dispatch", fontsize=10
    )
    fig.tight_layout()
    try:
        with atomic_path(path, "comparison plot") as tmp:  # a failed write leaves no half PNG and no .tmp
            fig.savefig(tmp, format="png")
    finally:
        plt.close(fig)
    return path
