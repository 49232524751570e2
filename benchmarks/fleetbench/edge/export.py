"""What `edge run` records: kernel and model metrics, the headline figures, the GEMM/peak ratio."""

from __future__ import annotations

import math
from typing import Any

from fleetbench.edge import gpu
from fleetbench.edge.discipline import ThermalRecord, Watch
from fleetbench.edge.pte import ModelTiming
from fleetbench.edge.rows import PERCENTILES, KernelRow, model_summary
from fleetbench.edge.thermal import ThermalState
from fleetbench.telemetry.session import BenchmarkRun


def record_kernel(run: BenchmarkRun, row: KernelRow) -> None:
    """A kernel's error and correctness series; its latency, rate and try series when it was timed."""
    ident = {"kernel": row.kernel, "dtype": row.dtype, "size": row.size}
    run.metrics.set("fleetbench_edge_kernel_max_abs_error", row.max_abs_error, **ident)
    run.metrics.set("fleetbench_edge_kernel_max_rel_error", row.max_rel_error, **ident)
    run.metrics.set("fleetbench_edge_kernel_correct", 1 if row.correct else 0, **ident)
    record_kernel_thermal(run, row, ident)
    if not row.latencies_s:
        return
    timed = {**ident, "timing": row.timing}
    for value in row.latencies_s:
        run.metrics.observe("fleetbench_edge_kernel_latency_seconds", value, **timed)
    for name, _q in PERCENTILES:
        value = getattr(row, f"{name}_s")
        if math.isfinite(value):  # NaN: too few dispatches for that percentile
            run.metrics.set("fleetbench_edge_kernel_latency_percentile_seconds", value, percentile=name, **timed)
    if row.flops:
        run.metrics.set("fleetbench_edge_kernel_achieved_flop_per_second", row.flop_per_second, **timed)
    run.metrics.set("fleetbench_edge_kernel_achieved_bytes_per_second", row.bytes_per_second, **timed)
    run.metrics.set("fleetbench_edge_kernel_variation_ratio", row.variation, **timed)
    run.metrics.inc("fleetbench_edge_kernel_tries_total", row.tries, **timed)
    run.metrics.inc("fleetbench_edge_kernel_dispatches_total", row.dispatches, **timed)


def peak_ratios(rows: list[KernelRow]) -> dict[str, float]:
    """GEMM FLOP/s over the best float32 FMA-peak FLOP/s measured in this run.

    Every GEMM kernel multiplies and accumulates in f32 whatever its storage dtype (f16 only halves
    the bytes it loads), so its FLOPs are f32 FMAs and the f32 probe is their ceiling. Against the
    f16 probe, a float16 GEMM on an adapter without fast f16 (lavapipe converts every f16 FMA) read
    195 % of "peak". A ratio above 1 means the probe did not reach the device's peak (on an H100 an
    unsized probe read 4.65): it is refused, with the reason on the row (`peak_ratio_refused`), and
    never published.
    """
    peak = max(
        (r.flop_per_second for r in rows if r.kernel.startswith("peak_fma") and r.dtype == "float32" and r.latencies_s),
        default=0.0,
    )
    out = {}
    for r in rows:
        # gemm_coopmat runs on the matrix units, not the FMA pipes the probe measures.
        if r.kernel.startswith("gemm") and r.kernel != "gemm_coopmat" and r.latencies_s and peak:
            ratio = r.flop_per_second / peak
            if ratio > 1.0:
                r.peak_ratio = None
                r.peak_ratio_refused = (
                    f"GEMM/peak ratio {ratio:.3f} > 1: {r.flop_per_second / 1e9:.1f} GFLOP/s against a measured "
                    f"f32 FMA peak of {peak / 1e9:.1f} GFLOP/s; the probe did not reach the device's peak"
                )
                continue
            r.peak_ratio = ratio
            out[f"{r.kernel} {r.dtype} {r.size}"] = r.peak_ratio
    return out


def refused_ratios(rows: list[KernelRow]) -> dict[str, str]:
    """`kernel dtype size` -> why its GEMM/peak ratio was refused (set by `peak_ratios`)."""
    return {f"{r.kernel} {r.dtype} {r.size}": r.peak_ratio_refused for r in rows if r.peak_ratio_refused}


def record_peak_ratios(run: BenchmarkRun, rows: list[KernelRow]) -> None:
    """The GEMM/peak ratios `peak_ratios` set on the rows, as metrics and headline figures."""
    for r in rows:
        if r.peak_ratio is not None:
            labels = {"kernel": r.kernel, "dtype": r.dtype, "size": r.size}
            run.metrics.set("fleetbench_edge_gemm_peak_ratio", r.peak_ratio, **labels)
            run.add_headline("fleetbench_edge_gemm_peak_ratio", r.peak_ratio, None, **labels)


def record_model(run: BenchmarkRun, t: ModelTiming, trim_ratio: float, cv_target: float) -> dict[str, Any]:
    """A model path's load, latency, error and memory series and its headline figures; returns its summary."""
    summary = model_summary(t, trim_ratio, cv_target)
    labels = {"runtime": t.runtime, "model": t.model}
    run.metrics.set("fleetbench_edge_model_load_seconds", t.load_s, **labels)
    for value in t.latencies:
        run.metrics.observe("fleetbench_edge_model_latency_seconds", value, **labels)
    run.metrics.set("fleetbench_edge_model_latency_mean_seconds", summary["mean_s"], **labels)
    run.metrics.set("fleetbench_edge_model_latency_trimmed_mean_seconds", summary["trimmed_mean_s"], **labels)
    for name, _q in PERCENTILES:
        if summary[f"{name}_s"] is not None:  # None: too few iterations for that percentile
            run.metrics.set(
                "fleetbench_edge_model_latency_percentile_seconds", summary[f"{name}_s"], percentile=name, **labels
            )
    if t.max_abs_error is not None:
        run.metrics.set("fleetbench_edge_model_max_abs_error", t.max_abs_error, **labels)
    for kind, value in t.memory.items():
        run.metrics.set("fleetbench_edge_model_memory_bytes", value, model=t.model, kind=kind)
    run.add_headline(
        "fleetbench_edge_model_latency_percentile_seconds", summary["p50_s"], t.latencies, percentile="p50", **labels
    )
    run.add_headline("fleetbench_edge_model_latency_trimmed_mean_seconds", summary["trimmed_mean_s"], None, **labels)
    return summary


def record_kernel_headline(run: BenchmarkRun, rows: list[KernelRow]) -> None:
    """Per timed kernel: p50 latency and achieved FLOP/s, with the tries' medians as samples (each try
    is one independent sample; dispatches within a try are not)."""
    for r in rows:
        if not r.latencies_s:
            continue
        labels = {"kernel": r.kernel, "dtype": r.dtype, "size": r.size, "timing": r.timing}
        run.add_headline(
            "fleetbench_edge_kernel_latency_percentile_seconds", r.p50_s, r.try_medians_s, percentile="p50", **labels
        )
        if r.flops:
            rates = [r.flops / m for m in r.try_medians_s if m > 0]
            run.add_headline("fleetbench_edge_kernel_achieved_flop_per_second", r.flop_per_second, rates, **labels)


def record_adapter(run: BenchmarkRun, rep: gpu.AdapterReport) -> None:
    """The adapter as an info series: vendor, type, driver and the features that decide the kernel set."""
    run.metrics.set(
        "fleetbench_edge_adapter_info",
        1,
        vendor=rep.vendor,
        adapter_type=rep.adapter_type,
        driver=rep.driver,
        shader_f16=yes_no(rep.has("shader-f16")),
        timestamp_query=yes_no(rep.has("timestamp-query")),
        subgroups=yes_no(rep.has("subgroup")),
        cooperative_matrix=rep.cooperative_matrix_label,
    )


def yes_no(flag: bool) -> str:
    """`yes` or `no`, as the adapter info series spells a flag."""
    return "yes" if flag else "no"


def record_kernel_thermal(run: BenchmarkRun, row: KernelRow, ident: dict[str, str]) -> None:
    """The kernel's hottest temperature before and after, whether it throttled, and its cooldown."""
    for phase, value in (("before", row.celsius_before), ("after", row.celsius_after)):
        if value is not None:
            run.metrics.set("fleetbench_edge_kernel_temperature_celsius", value, phase=phase, **ident)
    if row.throttled is not None:
        run.metrics.set("fleetbench_edge_kernel_throttled", 1 if row.throttled else 0, **ident)
    run.metrics.set("fleetbench_edge_kernel_cooldown_seconds", row.cooldown_s, **ident)


def record_model_thermal(run: BenchmarkRun, record: ThermalRecord, runtime: str, model: str) -> None:
    """A model path's hottest temperature before and after its timed passes, and whether it throttled."""
    summary = record.summary()
    for phase in ("before", "after"):
        value = summary[f"celsius_{phase}"]
        if value is not None:
            run.metrics.set(
                "fleetbench_edge_model_temperature_celsius", value, runtime=runtime, model=model, phase=phase
            )
    if record.throttled is not None:
        run.metrics.set("fleetbench_edge_model_throttled", 1 if record.throttled else 0, runtime=runtime, model=model)


def record_run_thermal(run: BenchmarkRun, watch: Watch, end: ThermalState) -> None:
    """Per source whether it read; every sensor at the idle baseline and at the end; cooldown timeouts."""
    for source in watch.sources:
        run.metrics.set("fleetbench_edge_thermal_source_up", 0 if source in watch.baseline.absent else 1, source=source)
    for phase, state in (("baseline", watch.baseline), ("end", end)):
        for sensor in state.sensors:
            run.metrics.set(
                "fleetbench_edge_thermal_sensor_celsius",
                sensor.celsius,
                source=sensor.source,
                sensor=sensor.name,
                phase=phase,
            )
    run.metrics.inc("fleetbench_edge_cooldown_timeouts_total", sum(1 for r in watch.records if r.cooldown.warning))
