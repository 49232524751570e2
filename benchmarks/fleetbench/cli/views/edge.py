"""What `edge run` shows: the kernel and model tables, the GEMM/peak ratios."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from fleetbench.edge.rows import KernelRow

if TYPE_CHECKING:
    from fleetbench.edge.run import EdgeOutcome


def _ms(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e3:.3f}" if seconds < 10 else f"{seconds * 1e3:.0f}"


def kernel_table(rows: list[KernelRow], title: str) -> Table:
    """One row per kernel, dtype and size: latency percentiles (ms), rates, variation, error, correctness."""
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in (
        "kernel",
        "dtype",
        "size",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "GFLOP/s",
        "GB/s",
        "var",
        "tries",
        "rel err",
        "status",
        "C before>after",
        "throttled",
    ):
        table.add_column(column, justify="left" if column in ("kernel", "dtype", "size") else "right", no_wrap=True)
    for r in rows:
        table.add_row(
            r.kernel,
            r.dtype,
            r.size,
            _ms(r.p50_s),
            _ms(r.p90_s),
            _ms(r.p99_s),
            f"{r.flop_per_second / 1e9:.1f}" if r.flops and r.latencies_s else "-",
            f"{r.bytes_per_second / 1e9:.2f}" if r.bytes_moved and r.latencies_s else "-",
            (f"{r.variation:.1%}" + ("" if r.stable else "!")) if math.isfinite(r.variation) else "-",
            str(r.tries),
            f"{r.max_rel_error:.1e}",
            _status(r),
            _celsius(r.celsius_before, r.celsius_after),
            {True: "[red]YES[/]", False: "no", None: "-"}[r.throttled],
        )
    return table


def _status(row: KernelRow) -> str:
    """ok only for a correct row whose tries met the CV target; unstable and single sample said as such."""
    if not row.correct:
        return "[red]WRONG[/]"
    if not row.verdict:
        return "-"
    return {"stable": "ok", "unstable": "[yellow]unstable[/]"}.get(row.verdict, row.verdict)


def _celsius(before: float | None, after: float | None) -> str:
    if before is None and after is None:
        return "-"
    return f"{'-' if before is None else f'{before:.1f}'}>{'-' if after is None else f'{after:.1f}'}"


def thermal_lines(thermal: dict[str, Any]) -> list[str]:
    """The run's thermal sources (read, or absent and why) and its cooldown timeouts, one line each."""
    if not thermal:
        return []
    read = [s for s in thermal["sources"] if s not in thermal["absent"]]
    lines = [f"thermal sources read: {', '.join(read) or 'none'}"]
    lines += [f"thermal source {source} absent: {why}" for source, why in thermal["absent"].items()]
    if thermal["cooldown_timeouts"]:
        lines.append(f"[yellow]{thermal['cooldown_timeouts']} cooldown(s) timed out (see the warnings)[/]")
    return lines


def model_table(models: list[dict[str, Any]]) -> Table:
    """One row per model path: load and latency figures (ms), error against eager, agreement."""
    table = Table(title="model latency", box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in ("runtime", "model", "load ms", "mean ms", "trimmed ms", "p90 ms", "n CV", "rel err", "agrees"):
        table.add_column(column, justify="left" if column in ("runtime", "model") else "right", no_wrap=True)
    for m in models:
        table.add_row(
            m["runtime"],
            m["model"],
            _ms(m["load_s"]),
            _ms(m["mean_s"]),
            _ms(m["trimmed_mean_s"]),
            _ms(m["p90_s"]),
            _stability(m["stability"]),
            "-" if m["max_rel_error"] is None else f"{m['max_rel_error']:.1e}",
            {True: "yes", False: "[red]NO[/]", None: "-"}[m["agrees"]],
        )
    return table


def _stability(entry: dict[str, Any]) -> str:
    cv = "-" if entry["cv"] is None else f"{entry['cv']:.1%}"
    verdict = "" if entry["verdict"] == "stable" else f" [yellow]{entry['verdict']}[/]"
    return f"{entry['samples']} {cv}{verdict}"


def show(console: Console, renderable: Table) -> None:
    """Full width in logs and pipes (no terminal to wrap for); the terminal's width otherwise."""
    if console.is_terminal:
        console.print(renderable)
        return
    needed = Measurement.get(console, console.options.update(width=400), renderable).maximum
    Console(file=console.file, width=min(max(needed, console.width), 400)).print(renderable)


def show_results(console: Console, outcome: EdgeOutcome) -> None:
    """The kernel table, the GEMM/peak ratios and the model table."""
    if outcome.rows:
        title = (
            f"edge kernels on {outcome.device} ({outcome.backend}, {outcome.timing} timing; "
            "var = CV of the tries' medians, ! = not stable)"
        )
        show(console, kernel_table(outcome.rows, title))
    if outcome.ratios:
        console.print("GEMM / f32 FMA peak: " + ", ".join(f"{k} {v:.1%}" for k, v in outcome.ratios.items()))
    for row in outcome.rows:
        if row.peak_ratio_refused:
            console.print(f"[yellow]{row.kernel} {row.dtype} {row.size}: {row.peak_ratio_refused} (not published)[/]")
    if outcome.models:
        show(console, model_table(outcome.models))
    for line in thermal_lines(outcome.thermal):
        console.print(line, highlight=False)
    if outcome.energy:
        console.print(energy_line(outcome.energy), highlight=False, markup=False)


def energy_line(energy: dict[str, Any]) -> str:
    """The run's energy in one line: joules and average watts from which source, or why there is none."""
    if energy.get("joules") is None:
        return f"energy: none read ({energy.get('reason') or 'no source'})"
    covered = energy.get("covered_share")
    sampled = f", samples span {covered:.0%} of it" if covered is not None else ""
    return (
        f"energy: {energy['joules']:.3g} J over {energy['seconds']:.1f} s, {energy['average_watts']:.3g} W average "
        f"({energy['source']}{sampled})"
    )
