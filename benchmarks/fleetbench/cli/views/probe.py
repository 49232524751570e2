"""What `fleetbench probe` shows: one table of the timed operations."""

from __future__ import annotations

from rich.table import Table

from fleetbench.probe.compute import ProbeView


def probe_table(view: ProbeView) -> Table:
    """Median time, spread and achieved rates of every probe operation."""
    table = Table(title=f"probe on {view.device} ({view.backend})")
    for column in ("probe", "dtype", "size", "median", "spread", "GFLOP/s", "GB/s"):
        table.add_column(column, justify="right" if column not in ("probe", "dtype") else "left")
    for r in view.results:
        table.add_row(
            r.probe,
            r.dtype,
            r.size,
            f"{r.median_s * 1e3:.3f} ms",
            f"{r.spread_ratio:.1%}",
            f"{r.flop_per_second / 1e9:.1f}" if r.flops else "-",
            f"{r.bytes_per_second / 1e9:.2f}",
        )
    return table
