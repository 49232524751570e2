"""`fleetbench trace summarize`: the summaries of one or more rank traces, compared, with a chart."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetbench import jsonio
from fleetbench.profile.trace.load import find_traces
from fleetbench.profile.trace.ranks import RankComparison, compare_ranks, plot_ranks
from fleetbench.profile.trace_summary import TraceSummary, summarize_trace

CHART_NAME = "trace_breakdown.png"


@dataclass
class TraceReport:
    """Every trace's summary, the comparison across ranks, and where the chart went (None: not drawn)."""

    window: str
    summaries: list[TraceSummary]
    ranks: RankComparison
    chart: Path | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (strict JSON: no NaN or infinity can occur in it)."""
        return {
            "window": self.window,
            "traces": [s.to_dict() for s in self.summaries],
            "ranks": self.ranks.to_dict(),
            "chart": None if self.chart is None else str(self.chart),
        }

    def to_json(self) -> str:
        """The report as strict JSON text."""
        return jsonio.dumps(self.to_dict(), indent=1)


def chart_dir(paths: list[Path], out_dir: Path | None) -> Path:
    """Where the chart goes: `out_dir`, else the folder given, else the first trace's folder."""
    if out_dir is not None:
        return out_dir
    first = paths[0]
    return first if first.is_dir() else first.parent


def chart_title(summary: TraceSummary) -> str:
    """The window in a few words: its kind, the steps it covers, the step left out."""
    window = summary.window
    steps = ", ".join(window.steps) if len(window.steps) <= 2 else f"{len(window.steps)} ProfilerSteps"
    title = f"time per rank, window {window.kind}: {steps or 'the whole trace'}"
    if window.left_out:
        title += f" ({', '.join(window.left_out)} left out)"
    return textwrap.fill(title, 70)


def build_report(paths: list[Path], window: str, top: int, out_dir: Path | None, chart: bool) -> TraceReport:
    """Summarise the traces `paths` name (files or folders); UserError on bad input, before any output."""
    files = find_traces(paths)
    summaries = [summarize_trace(path, top=top, window=window) for path in files]
    ranks = compare_ranks(summaries)
    drawn = None
    if chart and ranks.rows:
        drawn = plot_ranks(ranks, chart_title(summaries[0]), chart_dir(paths, out_dir) / CHART_NAME)
    return TraceReport(window, summaries, ranks, drawn)
