"""What `edge llm` shows: the runtimes side by side (pp, tg, time to first token, load, RSS, agreement)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table

from fleetbench.cli.views.edge import show

if TYPE_CHECKING:
    from fleetbench.edge.llm.job import LlmOutcome, LlmRow


def _num(value: float, digits: int = 0) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "-"


def _mib(value: int) -> str:
    return f"{value / 2**20:.0f}" if value else "-"


def _cells(row: LlmRow) -> list[str]:
    mode = "mmap" if row.mmap else "read"
    if not row.ok:
        return [row.label, row.dtype, mode, row.device or "-", *["-"] * 9, f"[red]{row.error}[/]", "-"]
    agrees = "[green]yes[/]" if row.agrees else "[red]NO[/]"
    return [
        row.label,
        row.dtype,
        mode,
        _device(row),
        f"{_num(row.pp['p50'])}/{_num(row.pp['p99'])}",
        f"{_num(row.tg['p50'], 1)}/{_num(row.tg['p99'], 1)}" if row.tg else "-",
        _num(row.ttft["p50"] * 1e3, 1),
        f"{_num(row.cold_load_s * 1e3, 1)}/{_num(row.load_s * 1e3, 1)}"
        + (" lazy" if row.load_kind.startswith("lazy") else ""),
        f"{_mib(row.rss_model_bytes)}/{_mib(row.peak_rss_model_bytes)} (+{_mib(row.rss_imports_bytes)})",
        f"{row.tries} {_num(row.cv * 100, 1)}%",
        f"{row.logit_error:.0e}",
        f"{row.greedy_equal}/{row.greedy_total}",
        agrees,
        _status(row),
        _thermal(row),
    ]


def _device(row: LlmRow) -> str:
    """What ran the row: llama.cpp's device as its driver names it and its count of offloaded layers; MLX's
    gpu (Metal) or cpu; ExecuTorch's CPU with its delegate."""
    if row.runtime != "llama.cpp":
        return row.device or "-"
    layers = f" {row.offloaded_layers}/{row.layers} layers" if row.layers else ""
    return f"{row.device or '-'}{layers}"


def _status(row: LlmRow) -> str:
    """ok only where the tries met the CV target and the runtime agrees with eager."""
    if not row.agrees:
        return "[red]WRONG[/]"
    return {"stable": "ok", "unstable": "[yellow]unstable[/]"}.get(row.verdict, row.verdict or "-")


def _thermal(row: LlmRow) -> str:
    before, after = row.thermal.get("celsius_before"), row.thermal.get("celsius_after")
    if before is None and after is None:
        return "-"
    shown = f"{'-' if before is None else f'{before:.1f}'}>{'-' if after is None else f'{after:.1f}'}"
    return shown + (" [red]throttled[/]" if row.thermal.get("throttled") else "")


def show_llm(console: Console, outcome: LlmOutcome | None) -> None:
    """The side-by-side table, the skipped paths with why, the failures and the PNG's path."""
    if outcome is None:
        return
    table = Table(
        title=f"edge llm: {outcome.model} ({outcome.params / 1e6:.1f}M params), pp{outcome.prompt_tokens} "
        f"tg{outcome.gen_tokens}, {outcome.threads} thread(s) (tok/s p50/p99, p99 only from 100 tries; "
        "status: ok only when the tries met the CV target)",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
    )
    for column in (
        "runtime",
        "dtype",
        "weights",
        "device",
        "pp tok/s",
        "tg tok/s",
        "TTFT ms",
        "load ms cold/warm",
        "model RSS MiB load/peak (+imports)",
        "tries CV",
        "logit err",
        "greedy",
        "agrees",
        "status",
        "C before>after",
    ):
        left = column in ("runtime", "dtype", "device", "weights", "agrees", "status")
        table.add_column(column, justify="left" if left else "right", no_wrap=True)
    for row in outcome.rows:
        table.add_row(*_cells(row))
    show(console, table)  # full width in logs and pipes, as the kernel table
    for what, why in outcome.skipped:
        console.print(f"skipped {what}: {why}")
    for failure in outcome.failures:
        console.print(f"[red]wrong:[/] {failure}")
    for line in energy_lines(outcome.rows):
        console.print(line, markup=False, highlight=False)
    if outcome.png is not None:
        console.print(f"plot: {outcome.png}")


def energy_lines(rows: list[LlmRow]) -> list[str]:
    """Joules per token of each row's tries where a power source read; else one line with the reasons."""
    metered = [r for r in rows if r.ok and r.energy.get("joules_per_token") is not None]
    if metered:
        return [
            f"energy: {r.label} {r.dtype} {'mmap' if r.mmap else 'read'}: {r.energy['joules_per_token'] * 1e3:.3g} mJ/token, "
            f"{r.energy['average_watts']:.3g} W ({r.energy['source']})"
            for r in metered
        ]
    reasons = next((r.energy.get("reason") for r in rows if r.ok and r.energy.get("reason")), None)
    return [f"energy: none read ({reasons})"] if reasons else []
