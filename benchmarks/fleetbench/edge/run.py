"""`fleetbench edge run`: the kernel set on one wgpu adapter, the MPS path, an ExecuTorch program.

Plan (plan.py) -> time the kernels (measure.py) -> the model paths (models.py) -> metrics and
headline (export.py), edge_results.json/.csv and latency PNGs (outputs.py) -> tables (display.py).
A kernel or model whose output is wrong fails the run (exit 1) after everything else was written.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.edge import gpu, outputs
from fleetbench.edge.discipline import Watch
from fleetbench.edge.energy import edge_meter, unmetered
from fleetbench.edge.export import (
    peak_ratios,
    record_adapter,
    record_kernel_headline,
    record_peak_ratios,
    record_run_thermal,
    refused_ratios,
)
from fleetbench.edge.measure import run_coopmat, run_kernels
from fleetbench.edge.models import run_mps_path, run_program
from fleetbench.edge.plan import EdgePlan, plan_edge
from fleetbench.edge.rows import KernelRow
from fleetbench.job import Job, JobFailed, JobResult, RunContext
from fleetbench.telemetry.energy import record_energy
from fleetbench.telemetry.session import BenchmarkRun, open_run

BENCHMARK = "edge"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EdgeOutcome:
    """What an edge run measured, as its tables need it."""

    device: str
    backend: str
    timing: str
    rows: list[KernelRow]
    ratios: dict[str, float]
    models: list[dict[str, Any]]
    thermal: dict[str, Any]
    energy: dict[str, Any] = field(default_factory=dict)  # the record's summary["energy"]


def yes_no(flag: bool) -> str:
    """`yes` or `no`, as the adapter lines spell a flag."""
    return "yes" if flag else "no"


def log_adapter(rep: gpu.AdapterReport, timing: str) -> None:
    """Log the adapter, its timing source and the features the kernel set depends on."""
    how = " (GPU timestamp queries)" if timing == "timestamp" else " (host clock around a synchronised submit)"
    log.info(
        "adapter %s (%s, %s, driver %s); timing: %s%s",
        rep.device,
        rep.backend,
        rep.adapter_type,
        rep.driver,
        timing,
        how,
    )
    coop = ", ".join(f"{ext} {'unknown' if v is None else yes_no(v)}" for ext, v in rep.cooperative_matrix.items())
    log.info(
        "features: %s%s%s",
        ", ".join(f"{f} {yes_no(rep.has(f))}" for f in ("shader-f16", "subgroup", "timestamp-query")),
        f" (subgroup size {rep.subgroup_size})" if rep.subgroup_size else "",
        f"; {coop}" if coop else "",
    )


def _adapter_summary(rep: gpu.AdapterReport | None) -> dict[str, Any] | None:
    if rep is None:
        return None
    data = rep.as_dict()
    data.pop("vulkan_extensions")  # long; the full list is in edge_results.json
    return data


def write_outputs(
    bench: BenchmarkRun,
    plan: EdgePlan,
    rows: list[KernelRow],
    models: list[dict[str, Any]],
    ratios: dict[str, float],
    thermal: dict[str, Any],
) -> None:
    """edge_results.json (with every latency), edge_results.csv and one latency PNG per kernel."""
    json_path = bench.run_dir / "edge_results.json"
    outputs.write_json(
        json_path,
        {
            "run_id": bench.identity.run_id,
            "adapter": plan.adapter.as_dict() if plan.adapter else None,
            "timing": plan.timing,
            "kernels": [{**r.summary(), "thermal": r.thermal, "latencies_s": r.latencies_s} for r in rows],
            "gemm_peak_ratio": ratios,
            "gemm_peak_ratio_refused": refused_ratios(rows),
            "models": models,
            "thermal": thermal,
            "cooperative_matrix": plan.coopmat.as_dict() if plan.coopmat else None,
            "notes": plan.notes,
        },
    )
    bench.add_artifact(json_path)
    if rows:
        csv_path = bench.run_dir / "edge_results.csv"
        outputs.write_csv(csv_path, rows)
        bench.add_artifact(csv_path)
    if plan.cfg.plot and rows:
        for path in outputs.write_latency_plots(bench.run_dir, rows, plan.runs_on()[0]):
            bench.add_artifact(path)


def wrong_kernels(rows: list[KernelRow]) -> list[str]:
    """One line per kernel whose output disagreed with the numpy reference."""
    return [
        f"{r.kernel} {r.dtype} {r.size} (max rel error {r.max_rel_error:.2e} > {r.tolerance:g})"
        for r in rows
        if not r.correct
    ]


def run(config: FleetbenchConfig, context: RunContext) -> JobResult[EdgeOutcome]:
    """Plan, time the kernels, run the model paths, record and write everything; wrong results fail last
    (JobFailed: the record says failed, and what was measured is still returned)."""
    cfg = config.edge
    plan = plan_edge(cfg)
    device, backend = plan.runs_on()
    models: list[dict[str, Any]] = []
    failures: list[str] = []
    bench = open_run(config, context, BENCHMARK, cfg, device, backend)
    with bench:
        if plan.adapter is not None:
            log_adapter(plan.adapter, plan.timing)
            record_adapter(bench, plan.adapter)
        for note in plan.notes:
            log.warning(note)
        watch = Watch.start(cfg)
        meter = edge_meter(cfg, plan.adapter)
        started = time.monotonic()
        if meter is not None:
            meter.start()
        rows = run_kernels(plan, bench, context.progress, watch)
        rows += run_coopmat(plan, bench, context.progress, watch)
        ratios = peak_ratios(rows)
        record_peak_ratios(bench, rows)
        record_kernel_headline(bench, rows)
        for refusal in refused_ratios(rows).values():
            log.warning("%s (not published)", refusal)
        mps_summary = run_mps_path(cfg, bench, models, watch)
        failures = wrong_kernels(rows) + run_program(plan, bench, models, watch)
        # the kernels' and models' work with their cooldowns: a device's draw over the whole run
        reading = meter.stop() if meter is not None else unmetered(time.monotonic() - started)
        end = watch.read()
        record_run_thermal(bench, watch, end)
        thermal = watch.summary(end)
        bench.summary.update(
            {
                "adapter": _adapter_summary(plan.adapter),
                "timing": plan.timing,
                "timestamp_period_ns": plan.period_ns if plan.timing == "timestamp" else None,
                "kernels": [r.summary() for r in rows],
                "gemm_peak_ratio": ratios,
                "gemm_peak_ratio_refused": refused_ratios(rows),
                "notes": plan.notes,
                "spirv_files": plan.spirv_files,
                "mps": mps_summary,
                "models": models,
                "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                "failures": failures,
                "thermal": thermal,
                "cooperative_matrix": plan.coopmat.as_dict() if plan.coopmat else None,
                "warnings": [w for r in watch.records for w in r.warnings],
            }
        )
        record_energy(bench, reading, steps=0, tokens=0)
        write_outputs(bench, plan, rows, models, ratios, thermal)
        if failures:
            bench.finish(error="wrong results: " + "; ".join(failures))
    result = JobResult(
        [bench.result()],
        EdgeOutcome(device, backend, plan.timing, rows, ratios, models, thermal, bench.summary.get("energy", {})),
    )
    if failures:
        raise JobFailed("wrong results: " + "; ".join(failures), result)
    return result


JOB: Job[EdgeOutcome] = run
