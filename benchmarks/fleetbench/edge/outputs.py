"""The files `edge run` writes beside its record: edge_results.json and .csv, a latency PNG per kernel."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from fleetbench import jsonio
from fleetbench.edge.rows import KernelRow
from fleetbench.fsutil import atomic_path, write_text_atomic


def _atomic_text(path: Path, text: str) -> None:
    write_text_atomic(path, text, "edge results")


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write `payload` as indented JSON, atomically, with NaN and infinities as null."""

    _atomic_text(path, jsonio.dumps(payload, indent=2) + "\n")


def write_csv(path: Path, rows: list[KernelRow]) -> None:
    """Write one CSV row per kernel (KernelRow.CSV_FIELDS), atomically."""
    with atomic_path(path, "edge results") as partial, partial.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=KernelRow.CSV_FIELDS)
        writer.writeheader()
        for r in rows:
            data = r.summary()
            writer.writerow({k: data[k] for k in KernelRow.CSV_FIELDS})


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
        try:
            with atomic_path(path, "edge latency plot") as tmp:
                fig.savefig(tmp, format="png")
        finally:
            plt.close(fig)
        paths.append(path)
    return paths
