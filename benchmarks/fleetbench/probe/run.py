"""`fleetbench probe`: time matmul and copy on the local device and ship the figures as metrics."""

from __future__ import annotations

import torch

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.devices import resolve_device
from fleetbench.job import Job, JobResult, RunContext
from fleetbench.probe.compute import ProbeResult, ProbeView, copy_probe, matmul_probe
from fleetbench.telemetry.session import BenchmarkRun, open_run

BENCHMARK = "probe"


def record_probe(run: BenchmarkRun, result: ProbeResult) -> None:
    """Metrics and headline figures of one timed operation."""
    labels = {"probe": result.probe, "dtype": result.dtype, "size": result.size}
    run.metrics.set("fleetbench_probe_op_seconds", result.median_s, **labels)
    run.metrics.set("fleetbench_probe_op_spread_ratio", result.spread_ratio, **labels)
    run.metrics.inc("fleetbench_probe_operations_total", result.operations, **labels)
    run.metrics.set("fleetbench_probe_achieved_bytes_per_second", result.bytes_per_second, **labels)
    byte_rates = [result.bytes_moved / s for s in result.samples_s]
    if result.flops:
        run.metrics.set("fleetbench_probe_achieved_flop_per_second", result.flop_per_second, **labels)
        flop_rates = [result.flops / s for s in result.samples_s]
        run.add_headline("fleetbench_probe_achieved_flop_per_second", result.flop_per_second, flop_rates, **labels)
    else:
        run.add_headline("fleetbench_probe_achieved_bytes_per_second", result.bytes_per_second, byte_rates, **labels)


def run(config: FleetbenchConfig, context: RunContext) -> JobResult[ProbeView]:
    """Time every configured matmul and copy, one run folder, one record."""
    probe_cfg = config.probe
    device = resolve_device(probe_cfg.device)
    dtype = getattr(torch, probe_cfg.dtype)
    threads = probe_cfg.threads or torch.get_num_threads()
    jobs = [("matmul", n) for n in probe_cfg.matmul_sizes] + [("copy", mib) for mib in probe_cfg.copy_mib]
    results: list[ProbeResult] = []
    with open_run(config, context, BENCHMARK, probe_cfg, device.name, device.backend) as bench:
        if device.backend == "cuda":
            torch.cuda.reset_peak_memory_stats(device.torch_device)
        with context.progress.task(BENCHMARK, total=len(jobs)) as task:
            for kind, size in jobs:
                task.update(f"{kind} {size}")
                probe = matmul_probe if kind == "matmul" else copy_probe
                result = probe(size, dtype, device, probe_cfg.min_run_time_s, threads)
                results.append(result)
                record_probe(bench, result)
                bench.step_done()
                task.advance()
        if device.backend == "cuda":
            bench.metrics.set(
                "fleetbench_memory_peak_allocated_bytes", torch.cuda.max_memory_allocated(device.torch_device)
            )
            bench.metrics.set(
                "fleetbench_memory_peak_reserved_bytes", torch.cuda.max_memory_reserved(device.torch_device)
            )
        best = max((r for r in results if r.flops), key=lambda r: r.flop_per_second, default=None)
        bench.summary.update(
            {
                "threads": threads,
                "best_matmul_flop_per_second": best.flop_per_second if best else None,
                "best_copy_bytes_per_second": max(
                    (r.bytes_per_second for r in results if r.probe == "copy"), default=None
                ),
            }
        )
    return JobResult([bench.result()], ProbeView(results, device.name, device.backend))


JOB: Job[ProbeView] = run
