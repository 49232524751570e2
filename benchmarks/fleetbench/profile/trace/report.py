"""`fleetbench trace summarize`: the summaries of one or more rank traces, compared, with a chart."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetbench import jsonio
from fleetbench.errors import UserError
from fleetbench.profile.trace.breakdown import DEFAULT_RULES
from fleetbench.profile.trace.comm import CommRules
from fleetbench.profile.trace.load import find_traces
from fleetbench.profile.trace.ranks import RankComparison, compare_ranks, plot_ranks
from fleetbench.profile.trace.summary import TraceSummary, summarize_trace

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


def check_ranks(paths: list[Path], summaries: list[TraceSummary], every: bool = False) -> None:
    """Refuse two traces of one rank in a folder given (a folder holds one run, one trace per rank);
    with `every`, two of one rank anywhere (their records would be one rank's twice)."""
    folders = {path.resolve() for path in paths if path.is_dir()}
    seen: dict[tuple[Path | None, int], TraceSummary] = {}
    for summary in summaries:
        parent = Path(summary.path).resolve().parent
        if not every and parent not in folders:
            continue
        first = seen.setdefault((None if every else parent, summary.rank), summary)
        if first is not summary:
            where = "" if every else f" in folder {parent}"
            hint = "--record takes one trace per rank" if every else "a folder holds one trace per rank of one run"
            raise UserError(
                f"traces {first.path} and {summary.path}{where} are both rank {summary.rank}: {hint}; "
                "pass the traces of one run (or the files one by one, without --record)"
            )


def build_report(  # noqa: PLR0913 - one keyword per `trace summarize` flag; the demo stage and train pass the first four positionally
    paths: list[Path],
    window: str,
    top: int,
    out_dir: Path | None,
    chart: bool,
    one_trace_per_rank: bool = False,
    rules: CommRules = DEFAULT_RULES,
) -> TraceReport:
    """Summarise the traces `paths` name (files or folders); UserError on bad input, before any output.

    A folder must hold one trace per rank; `one_trace_per_rank` asks the same of all the traces.
    `rules` say which kernels are communication.
    """
    files = find_traces(paths)
    summaries = [summarize_trace(path, top=top, window=window, rules=rules) for path in files]
    check_ranks(paths, summaries, every=one_trace_per_rank)
    ranks = compare_ranks(summaries)
    drawn = None
    if chart and ranks.rows:
        drawn = plot_ranks(ranks, chart_title(summaries[0]), chart_dir(paths, out_dir) / CHART_NAME)
    return TraceReport(window, summaries, ranks, drawn)
