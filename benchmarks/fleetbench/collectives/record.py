"""Rank 0's record of a sweep: metrics of the catalogue, the typed headline, the rows and the bus-bandwidth chart."""

from __future__ import annotations

from pathlib import Path

from fleetbench.collectives.measure import Measurement
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.devices import DeviceInfo
from fleetbench.job import RunContext
from fleetbench.results.record import ResultRecord
from fleetbench.telemetry.session import open_run

BENCHMARK = "collectives"
CHART = "busbw.png"


def record_sweep(
    config: FleetbenchConfig, context: RunContext, rows: list[Measurement], device: DeviceInfo, rank: int = 0
) -> ResultRecord:
    """Open the run of `rank` (a node's first rank: each node keeps what its ranks timed), set every row's
    metrics, the headline (bus bandwidth at the largest size and time at the smallest, per operation), and
    draw the chart into the run folder."""
    with open_run(config, context, BENCHMARK, config.collectives, device.name, device.backend, rank=rank) as run:
        for row in rows:
            labels = {"op": row.op, "size": str(row.size_bytes), "ranks": str(row.ranks)}
            run.metrics.set("fleetbench_collective_op_seconds", row.seconds, **labels)
            run.metrics.set("fleetbench_collective_algorithm_bytes_per_second", row.algbw, **labels)
            run.metrics.set("fleetbench_collective_bus_bytes_per_second", row.busbw, **labels)
            run.step_done()
        for op in dict.fromkeys(row.op for row in rows):
            mine = [row for row in rows if row.op == op]
            largest, smallest = max(mine, key=lambda r: r.size_bytes), min(mine, key=lambda r: r.size_bytes)
            for metric, row, value in (
                ("fleetbench_collective_bus_bytes_per_second", largest, largest.busbw),
                ("fleetbench_collective_op_seconds", smallest, smallest.seconds),
            ):
                run.add_headline(metric, value, op=op, size=str(row.size_bytes), ranks=str(row.ranks))
        chart = draw_chart(rows, run.run_dir / BENCHMARK / CHART)
        run.add_artifact(chart)
        run.summary.update(
            {
                "ranks": rows[0].ranks if rows else 0,
                "rows": [row.as_dict() for row in rows],
                "chart": str(chart.relative_to(run.run_dir)),
                "average_busbw_bytes_per_second": {
                    op: sum(r.busbw for r in rows if r.op == op) / sum(1 for r in rows if r.op == op)
                    for op in dict.fromkeys(row.op for row in rows)
                },
            }
        )
    return run.result()


def draw_chart(rows: list[Measurement], path: Path) -> Path:
    """Bus bandwidth by message size, one line per operation (log-log, as nccl-tests' plots usually are)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for op in dict.fromkeys(row.op for row in rows):
        mine = sorted((row for row in rows if row.op == op), key=lambda r: r.size_bytes)
        axes.plot([r.size_bytes for r in mine], [r.busbw / 1e9 for r in mine], marker="o", label=op.replace("_", "-"))
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("bus bandwidth (GB/s)")
    ranks = rows[0].ranks if rows else 0
    axes.set_title(f"Bus bandwidth by message size, {ranks} ranks (nccl-tests' busbw)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
