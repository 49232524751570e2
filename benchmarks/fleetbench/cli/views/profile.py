"""What the profiling commands show (rich tables). Absent figures print as `absent`, never as 0.

Notes (what a run could not do, what it left off a chart) are logged where they arise, not printed here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from fleetbench.gpus import Peaks
from fleetbench.profile.classify import DRAM_ROOF
from fleetbench.profile.ncu.guidance import top_rules
from fleetbench.profile.ncu.summary import KernelGroup, KernelSummary, NcuSummary

if TYPE_CHECKING:  # annotations only: a report reader does not load the capture and roofline modules
    from fleetbench.profile.jobs.ncu import NcuOutcome
    from fleetbench.profile.jobs.profile import ProfileOutcome
    from fleetbench.profile.jobs.roofline import RooflineOutcome
    from fleetbench.profile.roofline.analysis import Roofline
    from fleetbench.profile.trace.summary import TraceSummary

ABSENT = "absent"
CACHE_RESIDENT = "> DRAM roof (cache-resident)"


def pct(value: float | None) -> str:
    """A 0-1 ratio as a percentage with one decimal."""
    return ABSENT if value is None else f"{value * 100:.1f}%"


def memory_pct(value: float | None) -> str:
    """A memory utilisation; above the DRAM roof it says cache-resident instead of a share over 100 %."""
    return CACHE_RESIDENT if value is not None and value > DRAM_ROOF else pct(value)


def seconds(value: float | None) -> str:
    """A duration in s, ms or us, whichever reads best."""
    if value is None:
        return ABSENT
    if value >= 1:
        return f"{value:.3f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3f} ms"
    return f"{value * 1e6:.1f} us"


def scaled(value: float | None, unit: str, scale: float = 1e9, digits: int = 1) -> str:
    """`value / scale` with thousands separators and `unit` (GFLOP/s by default)."""
    return ABSENT if value is None else f"{value / scale:,.{digits}f} {unit}"


def number(value: float | None, digits: int = 3) -> str:
    """A plain figure to `digits` significant digits."""
    return ABSENT if value is None else f"{value:.{digits}g}"


def trace_tables(summary: TraceSummary) -> list[Table]:
    """Temporal breakdown and top kernels (when the trace has device events), then the top CPU ops."""
    tables = []
    if summary.devices:
        table = Table(title=f"temporal breakdown (HTA): {summary.path}", title_justify="left")
        for column in ("rank", "device", "span", "compute", "communication", "memory", "idle", "events"):
            table.add_column(column, justify="right")
        for d in summary.devices:
            shares = d.shares
            table.add_row(
                str(d.rank),
                d.device,
                seconds(d.span_s),
                pct(shares["compute"]),
                pct(shares["communication"]),
                pct(shares["memory"]),
                pct(shares["idle"]),
                str(d.events),
            )
        tables.append(table)
        kernels = Table(title="top kernels by total time", title_justify="left")
        for column in ("kernel", "count", "total", "share of busy"):
            kernels.add_column(column, justify="left" if column == "kernel" else "right")
        for k in summary.top_kernels:
            kernels.add_row(k.short, str(k.count), seconds(k.total_s), pct(k.share))
        tables.append(kernels)
    if summary.top_ops:
        ops = Table(title="top CPU ops by self time", title_justify="left")
        for column in ("op", "calls", "self", "inclusive", "share of self"):
            ops.add_column(column, justify="left" if column == "op" else "right")
        for o in summary.top_ops:
            ops.add_row(o.short, str(o.count), seconds(o.self_s), seconds(o.total_s), pct(o.share))
        tables.append(ops)
    return tables


def trace_lines(summary: TraceSummary) -> list[str]:
    """The CPU side in words: launch gaps and how busy the two busiest CPU threads were."""
    lines = []
    if summary.launch is not None:
        launch = summary.launch
        lines.append(
            f"CPU launch gaps: {launch.launches} launches, launch-to-start delay median "
            f"{seconds(launch.delay_median_s)}, p90 {seconds(launch.delay_p90_s)}, max "
            f"{seconds(launch.delay_max_s)}; device idle waiting for the host {seconds(launch.host_wait_s)}; "
            f"{launch.short_kernels} kernels ran shorter than their launch call"
        )
    for thread in summary.cpu_threads[:2]:
        lines.append(f"CPU thread {thread.tid}: ops busy {pct(thread.busy_share)} of {seconds(thread.span_s)}")
    return lines


def ncu_table(summary: NcuSummary, launches: bool = False) -> Table:
    """Speed-of-light, FLOP/s, DRAM bytes, intensity and class per kernel, or per launch with `launches`."""
    table = Table(
        title=f"Nsight Compute: {summary.path} ({summary.format}, {len(summary.kernels)} launches, "
        f"{', '.join(summary.devices)}{'; ' + summary.cut if summary.cut else ''})",
        title_justify="left",
        caption="SM% = compute SOL, mem% = memory SOL (gpu__compute_memory_throughput), DRAM% = DRAM throughput",
    )
    columns = ("kernel", "n", "time", "SM%", "mem%", "DRAM%", "GFLOP/s", "DRAM MB", "FLOP/B", "class")
    for column in columns:
        table.add_column(
            column,
            justify="left" if column in ("kernel", "class") else "right",
            overflow="fold",
            min_width=14 if column == "kernel" else None,
        )
    if launches:
        for k in summary.kernels:
            table.add_row(f"{k.id} {k.short}", str(k.invocations), *_kernel_cells(k))
        return table
    for g in summary.groups:
        table.add_row(g.short, str(g.launches), *_kernel_cells(g))
    return table


def _kernel_cells(k: KernelSummary | KernelGroup) -> tuple[str, ...]:
    """Duration, speed-of-light, FLOP/s, DRAM MB, intensity and class of a launch or a kernel."""
    return (
        seconds(k.duration_s),
        pct(k.compute_sol),
        pct(k.memory_sol),
        pct(k.dram_sol),
        scaled(k.flop_per_second, ""),
        scaled(k.dram_bytes, "", 1e6),
        number(k.arithmetic_intensity),
        class_cell(k.cls, k.level),
    )


def class_cell(cls: str, level: str | None) -> str:
    """The class with the memory level behind it, where one limits: `memory_bound (L2)`."""
    return f"{cls} ({level})" if level else cls


@dataclass
class FixRow:
    """One row of the class-and-fix table, from a kernel group or a torch op."""

    name: str
    time_s: float | None
    compute: float | None  # utilisation 0-1 (SOL, or achieved over peak)
    memory: float | None
    cls: str
    fix: str  # short form, see classify.FIXES_SHORT


def fixes_table(title: str, rows: Iterable[FixRow], caption: str | None = None) -> Table:
    """What limits each kernel or op and the main fix: the answer a profiling command ends with."""
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    table.add_column("kernel / op", overflow="fold", max_width=40)
    for column in ("time", "compute"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("memory", justify="right", min_width=6)  # "> DRAM roof (cache-resident)" may wrap
    table.add_column("class", no_wrap=True)
    table.add_column("main fix", overflow="fold")
    for row in rows:
        table.add_row(row.name, seconds(row.time_s), pct(row.compute), memory_pct(row.memory), row.cls, row.fix)
    return table


def flop_source_caption(rows: Iterable[dict[str, Any]]) -> str:
    """Which source counted each op's FLOPs (profile.flops), the ops without a count classed by bytes."""
    from fleetbench.profile.flops import FLOP_SOURCES  # its op tables: only a profile run needs them

    by_source: dict[str, list[str]] = {}
    for row in rows:
        by_source.setdefault(row.get("flop_source") or "none", []).append(row["short"])
    parts = [
        f"{source if source != 'none' else 'no FLOPs (classed by bytes)'}: {', '.join(by_source[source])}"
        for source in FLOP_SOURCES
        if source in by_source
    ]
    return "FLOPs from " + "; ".join(parts)


def ncu_fix_rows(summary: NcuSummary, top: int) -> list[FixRow]:
    """The `top` kernel groups of a report as rows of the fixes table."""
    return [
        FixRow(g.short, g.duration_s, g.compute_sol, g.memory_sol, class_cell(g.cls, g.level), g.fix_short)
        for g in summary.groups[:top]
    ]


def peaks_table(peaks: Iterable[Peaks]) -> Table:
    """The roofs: peak FLOP/s per dtype, bandwidth and the ridge point of each."""
    table = Table(title="peaks under the roofline", title_justify="left")
    for column in ("device", "source", "dtype", "peak", "bandwidth", "ridge"):
        table.add_column(column, justify="left" if column in ("device", "source", "dtype") else "right")
    for p in peaks:
        for dtype, flops in sorted(p.flop_per_second.items()):
            ridge = f"{flops / p.bytes_per_second:.3g} FLOP/B" if p.bytes_per_second else ABSENT
            table.add_row(
                p.device,
                p.source,
                dtype,
                scaled(flops, "TFLOP/s", 1e12, 2),
                scaled(p.bytes_per_second, "GB/s", 1e9, 1),
                ridge,
            )
    return table


def roofline_table(roofline: Roofline, top: int) -> Table:
    """The first `top` points: achieved FLOP/s, intensity, which roof caps them and how close they get."""
    table = Table(title=roofline.title, title_justify="left")
    for column in ("point", "time", "GFLOP/s", "FLOP/B", "ridge", "side", "of roof", "class"):
        table.add_column(column, justify="left" if column in ("point", "side", "class") else "right")
    for p in roofline.points[:top]:
        table.add_row(
            p.short,
            seconds(p.time_s),
            scaled(p.flop_per_second, ""),
            number(p.arithmetic_intensity),
            number(p.ridge),
            p.side,
            CACHE_RESIDENT if p.side == "memory" and p.roof_fraction > DRAM_ROOF else pct(p.roof_fraction),
            p.cls,
        )
    return table


def show_profile(console: Console, outcome: ProfileOutcome) -> None:
    """What `fleetbench profile` prints: the trace breakdown, peaks, roofline, where the files are,
    and last what limits the top ops and the fix for each (the answer a reader came for)."""
    files = outcome.capture.files
    for table in trace_tables(outcome.summary):
        console.print(table)
    for line in trace_lines(outcome.summary):
        console.print(line)
    console.print(peaks_table([outcome.peaks]))
    if outcome.roofline.points:
        console.print(roofline_table(outcome.roofline, outcome.top))
    console.print(
        f"trace (ui.perfetto.dev): {files['trace']}\nroofline: {files['roofline_png']}\n"
        f"key_averages: {files['key_averages']}\nresult record: {outcome.run_dir / 'records.jsonl'}",
        soft_wrap=True,
    )
    if not outcome.rows:
        console.print("no torch ops were recorded: nothing to classify")
        return
    console.print(
        fixes_table(
            f"top ops on {outcome.device}: class and main fix",
            [
                FixRow(r["short"], r["self_time_s"], r["compute_ratio"], r["memory_ratio"], r["class"], r["fix_short"])
                for r in outcome.rows
            ],
            flop_source_caption(outcome.rows),
        )
    )


def _gist(title: str, message: str, limit: int = 150) -> str:
    """A rule's title and first sentence, cut to `limit` characters: the table is a guide, --json the text."""
    first = message.split(". ")[0].split("\n")[0]
    text = f"{title}: {first}" if title else first
    return text if len(text) <= limit else text[: limit - 3] + "..."


def nvidia_table(summary: NcuSummary, top: int, per_kernel: int = 3) -> Table | None:
    """NVIDIA's guided analysis of the top kernels: their first rules, beside our class; None without rules."""
    table = Table(
        title="NVIDIA's guided analysis (top rules per kernel; --json has them all)",
        title_justify="left",
        caption="! = NVIDIA's bottleneck rule and our class disagree: both are shown, read the rule",
        caption_justify="left",
    )
    table.add_column("kernel", overflow="fold", max_width=28)
    table.add_column("ours", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("rule", no_wrap=True)
    table.add_column("est. speedup", justify="right", no_wrap=True)
    table.add_column("NVIDIA says", overflow="fold")
    shown = 0
    for group in summary.groups[:top]:
        launch = next((k for k in summary.kernels if k.label == group.label and k.rules), None)
        if launch is None:
            continue
        ours = class_cell(group.cls, group.level) + (" !" if group.disagreement else "")
        for index, rule in enumerate(top_rules(launch.rules, per_kernel)):
            speedup = f"{rule.speedup_pct:.1f}% {rule.speedup_type or ''}".strip() if rule.speedup_pct else ""
            table.add_row(
                group.short if index == 0 else "",
                ours if index == 0 else "",
                rule.kind,
                rule.rule,
                speedup,
                _gist(rule.title, rule.message),
            )
            shown += 1
    return table if shown else None


def kernel_notes(summary: NcuSummary, top: int) -> list[str]:
    """What a reader must know beside the tables: unmeasured kernels, derived figures, uncounted tensor work."""
    lines: list[str] = []
    for group in summary.groups[:top]:
        if group.not_measured:
            lines.append(f"{group.short}: {group.not_measured} of {group.launches} launches not measured (NaN)")
        if group.derived:
            launch = next(k for k in summary.kernels if k.label == group.label and k.derived)
            lines += [f"{group.short}: {figure} derived: {how}" for figure, how in launch.derived.items()]
        if group.tensor_uncounted:
            said = "FLOPs may be far too low" if group.flops is not None else "its tensor-core FLOPs are not counted"
            lines.append(f"{group.short}: {said}: {group.tensor_uncounted}")
        if group.disagreement:
            said = "" if group.disagreement_why else "; no known reason: read NVIDIA's rule and the figures"
            lines.append(f"{group.short}: class and NVIDIA disagree ({group.disagreement}{said})")
    lines += [note.removeprefix("note: ") for note in summary.notes if note.startswith("note: ")]
    return lines


def show_ncu(console: Console, outcome: NcuOutcome) -> None:
    """The kernels of an Nsight Compute report, their class and fix, NVIDIA's rules, and where the outputs went."""
    summary, top, files = outcome.summary, outcome.top, outcome.files
    console.print(ncu_table(summary))
    console.print(fixes_table("kernels: class and main fix", ncu_fix_rows(summary, top)))
    rules = nvidia_table(summary, top)
    if rules is not None:
        console.print(rules)
    report_notes = [
        note for note in summary.notes if not note.startswith(("==", "note: ")) or note.startswith(("==W", "==E"))
    ]
    for line in report_notes + kernel_notes(summary, top):
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    console.print("\n".join(str(path) for path in files), soft_wrap=True)


def show_roofline(console: Console, outcome: RooflineOutcome) -> None:
    """The roofs, the points under them and the chart's path."""
    console.print(peaks_table(outcome.shown))
    if outcome.roofline.points:
        console.print(roofline_table(outcome.roofline, outcome.top))
    console.print(f"roofline: {outcome.png}", soft_wrap=True)
