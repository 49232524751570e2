"""What `fleetbench collectives` shows: nccl-tests' table (size, count, time, algbw, busbw) per operation."""

from __future__ import annotations

from rich.table import Table

from fleetbench.collectives.run import CollectivesView


def collectives_table(view: CollectivesView) -> Table:
    """One row per operation and size, with nccl-tests' units (bytes, microseconds, GB/s = 1e9 B/s)."""
    table = Table(
        title=f"collectives on {view.ranks} ranks ({view.backend}, {view.device})",
        caption="size in bytes, times in microseconds, bandwidths in GB/s (1e9 B/s)",
    )
    # nccl-tests' columns; "max" is the slowest rank's mean time (nccl-tests shows the average of the ranks).
    for column in ("operation", "size", "count", "time", "max", "algbw", "busbw"):
        table.add_column(column, justify="left" if column == "operation" else "right", no_wrap=True)
    for row in view.rows:
        table.add_row(
            row.op.replace("_", "-"),
            str(row.size_bytes),
            str(row.count),
            f"{row.seconds * 1e6:.1f}",
            f"{row.slowest_rank_seconds * 1e6:.1f}",
            f"{row.algbw / 1e9:.4f}",
            f"{row.busbw / 1e9:.4f}",
        )
    return table


def average_lines(view: CollectivesView) -> list[str]:
    """nccl-tests' closing line, per operation: the mean bus bandwidth over the sizes."""
    lines = []
    for op in dict.fromkeys(row.op for row in view.rows):
        mine = [row.busbw for row in view.rows if row.op == op]
        lines.append(f"avg bus bandwidth {op.replace('_', '-')}: {sum(mine) / len(mine) / 1e9:.4f} GB/s")
    return lines
