"""What `fleetbench trace summarize` (and `trace diff`, `trace critical-path`) prints: the same grids as rich tables or as Markdown.

Absent figures print as `absent`, never as 0. Torch is not imported here: the command reads traces only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fleetbench.cli.views.profile import ABSENT, pct, seconds
from fleetbench.profile.trace.breakdown import DeviceBreakdown
from fleetbench.profile.trace.critical import KIND_WORDS, CriticalPath
from fleetbench.profile.trace.diff import KINDS, TraceDiff
from fleetbench.profile.trace.ranks import RankComparison
from fleetbench.profile.trace.report import TraceReport
from fleetbench.profile.trace.summary import TraceSummary

BREAKDOWN_COLUMNS = ["span", "compute", "communication", "memory", "idle", "comm overlap"]


def time_and_share(value_s: float, span_s: float) -> str:
    """`1.234 ms (12.3%)`: a category's time and its share of the span."""
    return f"{seconds(value_s)} ({pct(value_s / span_s if span_s else 0.0)})"


@dataclass
class Grid:
    """A table as plain data: the first `left` columns are text, the others figures."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    left: int = 1


def _breakdown_cells(d: DeviceBreakdown) -> list[str]:
    return [
        seconds(d.span_s),
        time_and_share(d.compute_s, d.span_s),
        time_and_share(d.communication_s, d.span_s),
        time_and_share(d.memory_s, d.span_s),
        time_and_share(d.idle_s, d.span_s),
        pct(d.comm_overlap_ratio),
    ]


def breakdown_grid(summaries: list[TraceSummary]) -> Grid:
    """The window's breakdown, one row per rank and device."""
    grid = Grid(
        "temporal breakdown over the window (HTA's definitions; communication and memory: the parts not "
        "hidden under compute; comm overlap: share of communication under compute)",
        ["rank", "device", *BREAKDOWN_COLUMNS, "events"],
        left=2,
    )
    for s in summaries:
        for d in s.devices:
            grid.rows.append([str(s.rank), d.device, *_breakdown_cells(d), str(d.events)])
    return grid


def steps_grid(summaries: list[TraceSummary]) -> Grid:
    """Per ProfilerStep of the window: the host's step time and the breakdown of what the step launched."""
    grid = Grid("per step", ["rank", "step", "device", "host step", *BREAKDOWN_COLUMNS], left=3)
    for s in summaries:
        for step in s.steps:
            if not step.devices:
                grid.rows.append([str(s.rank), step.name, ABSENT, seconds(step.duration_s)] + [ABSENT] * 6)
            for d in step.devices:
                grid.rows.append([str(s.rank), step.name, d.device, seconds(step.duration_s), *_breakdown_cells(d)])
    return grid


def ranks_grid(ranks: RankComparison) -> Grid:
    """Across ranks, per step (mean) or over the window: the figures the straggler is picked from."""
    grid = Grid(
        "across ranks",
        ["rank", "basis", "step time", "compute", "exposed comm", "memory", "idle", "comm overlap"],
        left=2,
    )
    for r in ranks.rows:
        grid.rows.append(
            [
                str(r.rank),
                r.basis,
                seconds(r.step_s),
                seconds(r.compute_s),
                seconds(r.communication_s),
                seconds(r.memory_s),
                seconds(r.idle_s),
                pct(r.comm_overlap_ratio),
            ]
        )
    return grid


def idle_grid(summaries: list[TraceSummary]) -> Grid:
    """HTA's idle-time breakdown per stream, inside the window: host wait, kernel wait, other."""
    grid = Grid(
        "idle time per stream over the window (HTA's idle-time breakdown: host wait = the next launch came after "
        "the stream ran dry; kernel wait = shorter gaps than 30 us; other)",
        ["rank", "device", "stream", "events", "span", "idle", "host wait", "kernel wait", "other"],
        left=3,
    )
    for s in summaries:
        for st in s.idle_streams:
            grid.rows.append(
                [
                    str(s.rank),
                    st.device,
                    st.stream,
                    str(st.events),
                    seconds(st.span_s),
                    time_and_share(st.idle_s, st.span_s),
                    time_and_share(st.host_wait_s, st.span_s),
                    time_and_share(st.kernel_wait_s, st.span_s),
                    time_and_share(st.other_s, st.span_s),
                ]
            )
    return grid


def queue_grid(summaries: list[TraceSummary]) -> Grid:
    """HTA's queue-length summary per stream: launches waiting to start (near 0: the device waits for the host)."""
    grid = Grid(
        "queue length per stream (HTA: launched, not yet started; its values at each change)",
        ["rank", "device", "stream", "changes", "mean", "median", "max"],
        left=3,
    )
    for s in summaries:
        for q in s.queues:
            grid.rows.append(
                [str(s.rank), q.device, q.stream, str(q.changes), f"{q.mean:.2f}", f"{q.median:g}", str(q.max)]
            )
    return grid


def launches_grid(summaries: list[TraceSummary]) -> Grid:
    """Launch-to-start delay step by step, with HTA's outlier counts."""
    grid = Grid(
        "launches per step (delay: launch call to device start; outliers as HTA: delay > 100 us, runtime call > 50 us)",
        ["rank", "step", "launches", "delay median", "delay p90", "delay max", "delay outliers", "runtime outliers"],
        left=2,
    )
    for s in summaries:
        for row in s.step_launches:
            grid.rows.append(
                [
                    str(s.rank),
                    row.step,
                    str(row.launches),
                    seconds(row.delay_median_s),
                    seconds(row.delay_p90_s),
                    seconds(row.delay_max_s),
                    str(row.delay_outliers),
                    str(row.runtime_outliers),
                ]
            )
    return grid


def top_grids(summary: TraceSummary) -> list[Grid]:
    """The top kernels (by total time) and top CPU ops (by self time) of one trace."""
    grids = []
    if summary.top_kernels:
        kernels = Grid(f"rank {summary.rank}: top kernels by total time", ["kernel", "count", "total", "share of busy"])
        for k in summary.top_kernels:
            kernels.rows.append([k.short, str(k.count), seconds(k.total_s), pct(k.share)])
        grids.append(kernels)
    if summary.top_ops:
        ops = Grid(
            f"rank {summary.rank}: top CPU ops by self time", ["op", "calls", "self", "inclusive", "share of self"]
        )
        for o in summary.top_ops:
            ops.rows.append([o.short, str(o.count), seconds(o.self_s), seconds(o.total_s), pct(o.share)])
        grids.append(ops)
    return grids


def trace_lines(summary: TraceSummary) -> list[str]:
    """One trace in words: its file, notes, launch gaps, busiest threads, where HTA would differ."""
    lines = [f"rank {summary.rank}: {summary.path}"]
    if summary.note:
        lines.append(f"  {summary.note}")
    if summary.left_out:
        lines.append(f"  {summary.left_out}")
    if summary.launch is not None:
        launch = summary.launch
        lines.append(
            f"  CPU launch gaps: {launch.launches} launches, launch-to-start delay median "
            f"{seconds(launch.delay_median_s)}, p90 {seconds(launch.delay_p90_s)}, max "
            f"{seconds(launch.delay_max_s)}; device idle waiting for the host {seconds(launch.host_wait_s)} "
            f"(no stream running, one waiting for a launch); {launch.short_kernels} kernels ran shorter than "
            "their launch call"
        )
    if summary.communication and summary.has_device_events:
        used = "; ".join(f"{u.rule}: {u.kernels} kernels, {seconds(u.total_s)}" for u in summary.comm_rules)
        lines.append(f"  {summary.communication}: {used or 'no kernel matched'}")
    for thread in summary.cpu_threads[:2]:
        lines.append(f"  CPU thread {thread.tid}: ops busy {pct(thread.busy_share)} of {seconds(thread.span_s)}")
    lines.extend(f"  differs from HTA: {text}" for text in summary.hta_differences)
    return lines


def straggler_line(ranks: RankComparison) -> str:
    """Who the straggler is and by how much, or why there is none."""
    s = ranks.straggler
    if s is None:
        return f"straggler: none ({ranks.note})"
    return (
        f"straggler: rank {s.rank}, {s.metric} {seconds(s.value_s)} against a median of {seconds(s.median_s)} "
        f"(+{s.gap_ratio:.1%})"
    )


def report_grids(report: TraceReport) -> list[Grid]:
    """Every grid of the report, in print order (empty ones left out)."""
    grids = [
        breakdown_grid(report.summaries),
        steps_grid(report.summaries),
        idle_grid(report.summaries),
        queue_grid(report.summaries),
        launches_grid(report.summaries),
    ]
    if len(report.ranks.rows) > 1:
        grids.append(ranks_grid(report.ranks))
    for summary in report.summaries:
        grids.extend(top_grids(summary))
    return [g for g in grids if g.rows]


def report_lines(report: TraceReport) -> list[str]:
    """The words around the grids: window, each trace, the straggler, the chart."""
    window = report.summaries[0].window.description if report.summaries else f"window {report.window}"
    lines = [window]
    for summary in report.summaries:
        if summary.window.description != window:
            lines.append(f"rank {summary.rank}: {summary.window.description}")
    for summary in report.summaries:
        lines.extend(trace_lines(summary))
    lines.append(straggler_line(report.ranks))
    if report.chart is not None:
        lines.append(f"chart: {report.chart}")
    return lines


def to_rich(grid: Grid) -> Table:
    """A grid as a rich table."""
    table = Table(title=grid.title, title_justify="left")
    for index, column in enumerate(grid.columns):
        table.add_column(column, justify="left" if index < grid.left else "right", overflow="fold")
    for row in grid.rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(grid: Grid) -> str:
    """A grid as a GitHub-flavoured Markdown table under a bold title."""
    align = [":---" if i < grid.left else "---:" for i in range(len(grid.columns))]
    lines = [f"**{_md_cell(grid.title)}**", "", "| " + " | ".join(grid.columns) + " |", "| " + " | ".join(align) + " |"]
    lines.extend("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in grid.rows)
    return "\n".join(lines)


def print_report(console: Console, report: TraceReport, fmt: str) -> None:
    """Print the report as rich tables (`table`) or Markdown (`md`)."""
    lines = report_lines(report)
    if fmt == "md":
        # a trace's own lines are indented under it: a nested list item
        text = [
            "# Trace summary",
            "",
            *(f"{line[: len(line) - len(line.lstrip())]}- {line.strip()}" for line in lines),
            "",
        ]
        for grid in report_grids(report):
            text.extend([to_markdown(grid), ""])
        console.print("\n".join(text), markup=False, highlight=False, soft_wrap=True)
        return
    console.print(lines[0], markup=False, soft_wrap=True)
    for grid in report_grids(report):
        console.print(to_rich(grid))
    for line in lines[1:]:
        console.print(line, markup=False, soft_wrap=True)


def recorded_line(report: TraceReport) -> str:
    """How many rank traces a run recorded, and its straggler if one stands out."""
    straggler = report.ranks.straggler
    return f"trace: {len(report.summaries)} rank traces recorded" + (
        f"; straggler rank {straggler.rank} (+{straggler.gap_ratio:.1%} {straggler.metric})" if straggler else ""
    )


def diff_grid(result: TraceDiff, top: int) -> Grid:
    """The `top` rows of a trace diff, largest time change first."""
    grid = Grid(
        f"changed from A to B (window {result.window}; the {top} largest time changes of {len(result.rows)})",
        ["kind", "name", "status", "count A", "count B", "time A", "time B", "delta"],
        left=3,
    )
    for row in result.rows[:top]:
        sign = "+" if row.delta_s > 0 else ("-" if row.delta_s < 0 else "")
        grid.rows.append(
            [
                row.kind,
                row.short,
                row.status,
                str(row.count_a),
                str(row.count_b),
                seconds(row.time_a_s),
                seconds(row.time_b_s),
                sign + seconds(abs(row.delta_s)),
            ]
        )
    return grid


def diff_lines(result: TraceDiff) -> list[str]:
    """What each side held, its totals, and how many names did not change."""
    lines = []
    for side, name in ((result.a, "A"), (result.b, "B")):
        first = side.paths[0] + (f" and {len(side.paths) - 1} more" if len(side.paths) > 1 else "")
        lines.append(f"{name}: {first}; {side.steps} ProfilerSteps in the window")
    for kind in KINDS:
        total_a, total_b = result.totals(kind)
        lines.append(
            f"{kind}s: total {seconds(total_a)} -> {seconds(total_b)}; "
            f"{sum(1 for r in result.rows if r.kind == kind)} names changed, {result.unchanged[kind]} unchanged"
        )
    return lines


def print_diff(console: Console, result: TraceDiff, fmt: str, top: int) -> None:
    """Print a trace diff as a rich table (`table`) or Markdown (`md`)."""
    grid = diff_grid(result, top)
    lines = diff_lines(result)
    if fmt == "md":
        text = ["# Trace diff", "", *(f"- {line}" for line in lines), ""]
        if grid.rows:
            text.extend([to_markdown(grid), ""])
        console.print("\n".join(text), markup=False, highlight=False, soft_wrap=True)
        return
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)
    if grid.rows:
        console.print(to_rich(grid))
    else:
        console.print("no kernel or op changed in count or time", markup=False)


def critical_kinds_grid(result: CriticalPath) -> Grid:
    """The path's time by what it is spent on, with the count of its edges of each kind."""
    grid = Grid(
        f"critical path of {result.step}: {seconds(result.length_s)} by kind",
        ["kind", "what", "time", "share", "edges"],
        left=2,
    )
    for kind, words in KIND_WORDS.items():
        value = result.by_kind[kind]
        share = value / result.length_s if result.length_s else 0.0
        grid.rows.append([kind, words, seconds(value), pct(share), str(result.edges_by_kind[kind])])
    return grid


def critical_top_grid(result: CriticalPath, top: int) -> Grid:
    """The ops, runtime calls and kernels that hold most of the path."""
    grid = Grid(
        f"the {min(top, len(result.top))} names with most time on the path (of {len(result.top)})",
        ["kind", "name", "edges", "time", "share"],
        left=2,
    )
    for entry in result.top[:top]:
        grid.rows.append([entry.kind, entry.short, str(entry.edges), seconds(entry.time_s), pct(entry.share)])
    return grid


def critical_lines(result: CriticalPath) -> list[str]:
    """Which trace and step, the path's length against the step's span, the communication rule."""
    return [
        f"trace {result.path} (rank {result.rank}), {result.step}: critical path {seconds(result.length_s)} "
        f"over a host span of {seconds(result.span_s)}, {len(result.edges)} edges",
        result.comm,
    ]


def print_critical_path(console: Console, result: CriticalPath, fmt: str, top: int) -> None:
    """Print a critical path as rich tables (`table`) or Markdown (`md`)."""
    grids = [critical_kinds_grid(result), critical_top_grid(result, top)]
    lines = critical_lines(result)
    if fmt == "md":
        text = ["# Critical path", "", *(f"- {line}" for line in lines), ""]
        for grid in grids:
            text.extend([to_markdown(grid), ""])
        console.print("\n".join(text), markup=False, highlight=False, soft_wrap=True)
        return
    console.print(lines[0], markup=False, soft_wrap=True)
    for grid in grids:
        console.print(to_rich(grid))
    console.print(lines[1], markup=False, soft_wrap=True)
