"""`fleetbench probe`: time matmul and copy on the local device and ship the figures as metrics."""

from __future__ import annotations

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.devices import resolve_device
from fleetbench.probe.compute import ProbeResult, copy_probe, matmul_probe
from fleetbench.results.record import ResultRecord
from fleetbench.runinfo import host_name, new_run_id
from fleetbench.telemetry.recorder import RunIdentity
from fleetbench.telemetry.session import BenchmarkRun

BENCHMARK = "probe"


def record_probe(run: BenchmarkRun, result: ProbeResult) -> None:
    labels = {"probe": result.probe, "dtype": result.dtype, "size": result.size}
    run.metrics.set("fleetbench_probe_op_seconds", result.median_s, **labels)
    run.metrics.set("fleetbench_probe_op_spread_ratio", result.spread_ratio, **labels)
    run.metrics.inc("fleetbench_probe_operations_total", result.operations, **labels)
    run.metrics.set("fleetbench_probe_achieved_bytes_per_second", result.bytes_per_second, **labels)
    if result.flops:
        run.metrics.set("fleetbench_probe_achieved_flop_per_second", result.flop_per_second, **labels)


def run_probe(config: FleetbenchConfig, console: Console) -> ResultRecord:
    probe_cfg = config.probe
    device = resolve_device(probe_cfg.device)
    dtype = getattr(torch, probe_cfg.dtype)
    threads = probe_cfg.threads or torch.get_num_threads()
    identity = RunIdentity(
        benchmark=BENCHMARK,
        run_id=config.run.run_id or new_run_id(),
        host=host_name(),
        device=device.name,
        backend=device.backend,
        rank=0,
    )
    jobs = [("matmul", n) for n in probe_cfg.matmul_sizes] + [("copy", mib) for mib in probe_cfg.copy_mib]
    results: list[ProbeResult] = []
    with BenchmarkRun(
        identity, config.run.results_dir, config.telemetry, config=probe_cfg.model_dump(mode="json"), console=console
    ) as run:
        if device.backend == "cuda":
            torch.cuda.reset_peak_memory_stats(device.torch_device)
        with Progress(
            TextColumn("[bold]probe[/] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            task = progress.add_task("", total=len(jobs))
            for kind, size in jobs:
                progress.update(task, description=f"{kind} {size}")
                probe = matmul_probe if kind == "matmul" else copy_probe
                result = probe(size, dtype, device, probe_cfg.min_run_time_s, threads)
                results.append(result)
                record_probe(run, result)
                run.step_done()
                progress.advance(task)
        if device.backend == "cuda":
            run.metrics.set(
                "fleetbench_memory_peak_allocated_bytes", torch.cuda.max_memory_allocated(device.torch_device)
            )
            run.metrics.set(
                "fleetbench_memory_peak_reserved_bytes", torch.cuda.max_memory_reserved(device.torch_device)
            )
        best = max((r for r in results if r.flops), key=lambda r: r.flop_per_second, default=None)
        run.summary.update(
            {
                "threads": threads,
                "best_matmul_flop_per_second": best.flop_per_second if best else None,
                "best_copy_bytes_per_second": max(
                    (r.bytes_per_second for r in results if r.probe == "copy"), default=None
                ),
            }
        )
    console.print(probe_table(results, device.name, device.backend))
    assert run.record is not None
    return run.record


def probe_table(results: list[ProbeResult], device: str, backend: str) -> Table:
    table = Table(title=f"probe on {device} ({backend})")
    for column in ("probe", "dtype", "size", "median", "spread", "GFLOP/s", "GB/s"):
        table.add_column(column, justify="right" if column not in ("probe", "dtype") else "left")
    for r in results:
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
