"""Across ranks: one row per rank trace, the straggler, and a PNG of per-rank stacked bars.

Each row takes the rank's busiest device (the CPU on a CPU-only trace). Figures are per step,
the mean over the window's ProfilerSteps, when the trace has steps, else over the whole window,
so traces that cover different numbers of steps still compare.

The straggler is the rank furthest above the median of the ranks in step time (the host's
ProfilerStep duration; the device span without steps) or in exposed communication (communication
not hidden by compute), with the gap as a ratio of that median. In a synchronous job the ranks
that wait for a slow one show the waiting as exposed communication, so read the straggler's line
together with the compute column: the slow rank computes more and waits less.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fleetbench.errors import UserError
from fleetbench.fsutil import atomic_path
from fleetbench.profile.trace.breakdown import DeviceBreakdown
from fleetbench.profile.trace.summary import TraceSummary

CATEGORIES = ("compute", "communication", "memory", "idle")
COLOURS = {"compute": "#4c72b0", "communication": "#dd8452", "memory": "#55a868", "idle": "#c7c7c7"}


@dataclass
class RankRow:
    """One rank's figures for the comparison; seconds per step (basis `per step`) or per window."""

    rank: int
    path: str
    device: str
    basis: str  # "per step" or "window"
    steps: int
    step_s: float | None  # mean host ProfilerStep duration; None without steps
    span_s: float
    compute_s: float
    communication_s: float  # exposed: not hidden under compute
    memory_s: float
    idle_s: float
    comm_overlap_ratio: float | None


@dataclass
class Straggler:
    """The rank furthest above the median, in which figure, and by how much."""

    rank: int
    path: str
    metric: str  # "step time", "span" or "exposed communication"
    value_s: float
    median_s: float
    gap_ratio: float  # (value - median) / median


@dataclass
class RankComparison:
    """The rows, sorted by rank, and the straggler when there are two ranks or more."""

    rows: list[RankRow]
    straggler: Straggler | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def _main_device(summary: TraceSummary) -> DeviceBreakdown | None:
    return max(summary.devices, key=lambda d: d.busy_s) if summary.devices else None


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def rank_row(summary: TraceSummary) -> RankRow | None:
    """The comparison row of one trace; None when it has no breakdown."""
    main = _main_device(summary)
    if main is None:
        return None
    per_step = [d for s in summary.steps for d in s.devices if d.device == main.device]
    if summary.steps and per_step:
        count = len(summary.steps)  # a step with no work on the device counts as zero, not as absent

        def mean(get: Callable[[DeviceBreakdown], float]) -> float:
            return sum(get(d) for d in per_step) / count

        return RankRow(
            summary.rank,
            summary.path,
            main.device,
            "per step",
            count,
            _mean([s.duration_s for s in summary.steps]),
            mean(lambda d: d.span_s),
            mean(lambda d: d.compute_s),
            mean(lambda d: d.communication_s),
            mean(lambda d: d.memory_s),
            mean(lambda d: d.idle_s),
            main.comm_overlap_ratio,
        )
    return RankRow(
        summary.rank,
        summary.path,
        main.device,
        "window",
        0,
        None,
        main.span_s,
        main.compute_s,
        main.communication_s,
        main.memory_s,
        main.idle_s,
        main.comm_overlap_ratio,
    )


def find_straggler(rows: list[RankRow]) -> Straggler | None:
    """The rank furthest above the median in step time (span without steps) or exposed communication."""
    if len(rows) < 2:
        return None
    timed = all(r.step_s is not None for r in rows)
    metrics: dict[str, Callable[[RankRow], float]] = {
        "step time" if timed else "span": (lambda r: r.step_s or 0.0) if timed else (lambda r: r.span_s),
        "exposed communication": lambda r: r.communication_s,
    }
    best: Straggler | None = None
    for metric, get in metrics.items():
        median = statistics.median(get(r) for r in rows)
        if median <= 0:
            continue
        for row in rows:
            gap = (get(row) - median) / median
            if gap > 0 and (best is None or gap > best.gap_ratio):
                best = Straggler(row.rank, row.path, metric, get(row), median, gap)
    return best


def compare_ranks(summaries: list[TraceSummary]) -> RankComparison:
    """Rows of every trace with a breakdown, sorted by rank, and the straggler among them."""
    rows = sorted((r for r in map(rank_row, summaries) if r is not None), key=lambda r: (r.rank, r.path))
    straggler = find_straggler(rows)
    if len(rows) < 2:
        note = "one rank: no straggler to find"
    elif straggler is None:
        note = "the ranks are even: none is above the median"
    else:
        note = ""
    return RankComparison(rows, straggler, note)


def plot_ranks(comparison: RankComparison, title: str, path: Path) -> Path:
    """Stacked bars of compute, exposed communication, memory and idle per rank, as a PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = comparison.rows
    labels = [f"rank {r.rank}" for r in rows]
    basis = "per step (mean)" if rows and all(r.basis == "per step" for r in rows) else "over the window"
    fig, ax = plt.subplots(figsize=(max(5.5, 0.8 * len(rows) + 4.0), 4.2), dpi=120)
    bottom = [0.0] * len(rows)
    for category in CATEGORIES:
        heights = [getattr(r, f"{category}_s") * 1e3 for r in rows]
        ax.bar(labels, heights, bottom=bottom, label=category, color=COLOURS[category])
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    straggler = comparison.straggler
    if straggler is not None:
        index = next(i for i, r in enumerate(rows) if r.rank == straggler.rank and r.path == straggler.path)
        ax.annotate(
            f"straggler\n+{straggler.gap_ratio:.0%} {straggler.metric.replace('communication', 'comm')}",
            (index, bottom[index]),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylabel(f"milliseconds {basis}")
    ax.set_ylim(0, max(bottom, default=1.0) * 1.18 or 1.0)  # room for the straggler's label
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    try:
        with atomic_path(path, "trace chart") as tmp:  # a failed write leaves no half PNG and no .tmp
            fig.savefig(tmp, format="png")
    except UserError as exc:
        raise UserError(f"{exc}; pass --out-dir to put it elsewhere") from None
    finally:
        plt.close(fig)
    return path
