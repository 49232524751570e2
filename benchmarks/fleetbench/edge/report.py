"""What `edge run` shows and writes: a rich table, edge_results.json, edge_results.csv, latency PNGs."""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from fleetbench.edge.pte import ModelTiming
from fleetbench.edge.timing import percentile, trimmed_mean

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0))


@dataclass
class KernelRow:
    kernel: str
    lang: str
    dtype: str
    size: str
    timing: str
    correct: bool
    max_abs_error: float
    max_rel_error: float
    tolerance: float
    flops: float = 0.0
    bytes_moved: float = 0.0
    p50_s: float = math.nan
    p90_s: float = math.nan
    p99_s: float = math.nan
    mean_s: float = math.nan
    min_s: float = math.nan
    variation: float = math.nan  # CV of the tries' medians
    stable: bool = False
    tries: int = 0
    dispatches: int = 0
    flop_per_second: float = 0.0
    bytes_per_second: float = 0.0
    peak_ratio: float | None = None
    try_medians_s: list[float] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)

    CSV_FIELDS = (
        "kernel",
        "lang",
        "dtype",
        "size",
        "timing",
        "correct",
        "max_abs_error",
        "max_rel_error",
        "tolerance",
        "p50_s",
        "p90_s",
        "p99_s",
        "mean_s",
        "min_s",
        "variation",
        "stable",
        "tries",
        "dispatches",
        "flop_per_second",
        "bytes_per_second",
        "peak_ratio",
    )

    def summary(self) -> dict[str, Any]:
        """Everything but the raw latencies (those go to edge_results.json only)."""
        data = asdict(self)
        data.pop("latencies_s")
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}


def model_summary(t: ModelTiming, trim_ratio: float) -> dict[str, Any]:
    out: dict[str, Any] = {
        "runtime": t.runtime,
        "model": t.model,
        "load_s": t.load_s,
        "iterations": len(t.latencies),
        "mean_s": sum(t.latencies) / len(t.latencies),
        "trimmed_mean_s": trimmed_mean(t.latencies, trim_ratio),
        "trim_ratio": trim_ratio,
        "max_abs_error": t.max_abs_error,
        "max_rel_error": t.max_rel_error,
        "agrees": t.agrees,
        "note": t.note,
        "memory_bytes": t.memory,
    }
    out.update({f"{name}_s": percentile(t.latencies, q) for name, q in PERCENTILES})
    return out


def _ms(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e3:.3f}" if seconds < 10 else f"{seconds * 1e3:.0f}"


def kernel_table(rows: list[KernelRow], title: str) -> Table:
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
        "ok",
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
            "yes" if r.correct else "[red]NO[/]",
        )
    return table


def model_table(models: list[dict[str, Any]]) -> Table:
    table = Table(title="model latency", box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in ("runtime", "model", "load ms", "mean ms", "trimmed ms", "p90 ms", "rel err", "agrees"):
        table.add_column(column, justify="left" if column in ("runtime", "model") else "right", no_wrap=True)
    for m in models:
        table.add_row(
            m["runtime"],
            m["model"],
            _ms(m["load_s"]),
            _ms(m["mean_s"]),
            _ms(m["trimmed_mean_s"]),
            _ms(m["p90_s"]),
            "-" if m["max_rel_error"] is None else f"{m['max_rel_error']:.1e}",
            {True: "yes", False: "[red]NO[/]", None: "-"}[m["agrees"]],
        )
    return table


def show(console: Console, renderable: Table) -> None:
    """Full width in logs and pipes (no terminal to wrap for); the terminal's width otherwise."""
    if console.is_terminal:
        console.print(renderable)
        return
    needed = Measurement.get(console, console.options.update(width=400), renderable).maximum
    Console(file=console.file, width=min(max(needed, console.width), 400)).print(renderable)


def _atomic_text(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def write_json(path: Path, payload: dict[str, Any]) -> None:
    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    _atomic_text(path, json.dumps(clean(payload), indent=2) + "\n")


def write_csv(path: Path, rows: list[KernelRow]) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with partial.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=KernelRow.CSV_FIELDS)
        writer.writeheader()
        for r in rows:
            data = r.summary()
            writer.writerow({k: data[k] for k in KernelRow.CSV_FIELDS})
    os.replace(partial, path)


def write_latency_plots(run_dir: Path, rows: list[KernelRow], device: str) -> list[Path]:
    """One PNG per kernel: the latency distribution of each dtype/size as a box plot over every dispatch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for kernel in dict.fromkeys(r.kernel for r in rows):
        mine = [r for r in rows if r.kernel == kernel and r.latencies_s]
        if not mine:
            continue
        fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(mine) + 2), 3.6), dpi=100)
        data = [[x * 1e3 for x in r.latencies_s] for r in mine]
        ax.boxplot(data, whis=(1, 99), showfliers=True, flierprops={"markersize": 2})
        ax.set_xticks(range(1, len(mine) + 1), [f"{r.dtype}\n{r.size}" for r in mine])
        for i, r in enumerate(mine, start=1):
            ax.plot([i], [r.p90_s * 1e3], marker="_", color="tab:red", markersize=14)
        ax.set_ylabel(f"latency (ms, {mine[0].timing})")
        ax.set_title(f"{kernel} on {device}\nbox: quartiles, whiskers p1-p99, red: p90", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        path = run_dir / f"edge_latency_{kernel}.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths
