"""What the profiling jobs export: metrics and headline figures of peaks, traces, ops and kernels.

Every profiling run (profile, ncu, roofline) records through these functions, so a figure has the
same name and labels whichever command measured it. A figure becomes a headline figure of the run
when the catalogue lists its metric among the headlines of that run's benchmark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleetbench import jsonio
from fleetbench.catalogue import HEADLINES
from fleetbench.gpus import Peaks
from fleetbench.profile.ncu.summary import NcuSummary
from fleetbench.profile.trace.summary import TraceSummary
from fleetbench.telemetry.session import BenchmarkRun


def write_json(path: Path, data: Any) -> Path:
    """Indented JSON of a summary the run keeps beside its record."""
    path.write_text(jsonio.dumps(data, indent=1, default=str), encoding="utf-8")
    return path


def _headline(run: BenchmarkRun, metric: str, value: float, **labels: str) -> None:
    if metric in HEADLINES.get(run.identity.benchmark, ()):
        run.add_headline(metric, value, None, **labels)


def _set(run: BenchmarkRun, metric: str, value: float, **labels: str) -> None:
    run.metrics.set(metric, value, **labels)
    _headline(run, metric, value, **labels)


def record_peaks(run: BenchmarkRun, peaks: Peaks | None) -> None:
    """The roofs: peak FLOP/s per dtype and peak bytes/s, measured or from the datasheet."""
    if peaks is None:
        return
    source = "measured" if peaks.source == "measured" else "datasheet"
    for dtype, value in peaks.flop_per_second.items():
        _set(run, "fleetbench_profile_peak_flop_per_second", value, dtype=dtype, source=source)
    if peaks.bytes_per_second:
        _set(run, "fleetbench_profile_peak_bytes_per_second", peaks.bytes_per_second, source=source)


def record_trace(run: BenchmarkRun, summary: TraceSummary) -> None:
    """Per device: time shares, span and host wait; the top kernels' time and launches."""
    for device in summary.devices:
        for category, share in device.shares.items():
            _set(run, "fleetbench_profile_time_share_ratio", share, gpu=device.device, category=category)
        _set(run, "fleetbench_profile_trace_span_seconds", device.span_s, gpu=device.device)
        if summary.launch is not None:
            run.metrics.set("fleetbench_profile_host_wait_seconds", summary.launch.host_wait_s, gpu=device.device)
    for kernel in summary.top_kernels:
        run.metrics.set("fleetbench_kernel_duration_seconds", kernel.total_s, kernel=kernel.label)
        run.metrics.inc("fleetbench_kernel_launches_total", kernel.count, kernel=kernel.label)


def record_ops(run: BenchmarkRun, rows: list[dict[str, Any]]) -> None:
    """The top ops (rows of `roofline.analysis.op_rows`): self time, class and roofline figures."""
    for row in rows:
        op = row["label"]
        _set(run, "fleetbench_profile_op_seconds", row["self_time_s"], op=op)
        run.metrics.set("fleetbench_profile_op_class_info", 1, op=op, **{"class": row["class"]})
        if row["flop_per_second"] is not None:
            run.metrics.set("fleetbench_profile_op_achieved_flop_per_second", row["flop_per_second"], op=op)
        if row["arithmetic_intensity"] is not None:
            run.metrics.set(
                "fleetbench_profile_op_arithmetic_intensity_flop_per_byte", row["arithmetic_intensity"], op=op
            )
        if row["compute_ratio"] is not None:
            run.metrics.set("fleetbench_profile_op_compute_peak_ratio", row["compute_ratio"], op=op)
        if row["memory_ratio"] is not None:
            run.metrics.set("fleetbench_profile_op_memory_peak_ratio", row["memory_ratio"], op=op)


def record_ncu(run: BenchmarkRun, summary: NcuSummary, top: int) -> None:
    """The top kernels of an Nsight Compute report: duration, speed-of-light, FLOPs, bytes, class."""
    for group in summary.groups[:top]:
        kernel = group.label
        if group.duration_s is not None:
            _set(run, "fleetbench_kernel_duration_seconds", group.duration_s, kernel=kernel)
        run.metrics.inc("fleetbench_kernel_launches_total", group.launches, kernel=kernel)
        for metric, value in (
            ("fleetbench_kernel_compute_sol_ratio", group.compute_sol),
            ("fleetbench_kernel_memory_sol_ratio", group.memory_sol),
            ("fleetbench_kernel_dram_sol_ratio", group.dram_sol),
            ("fleetbench_kernel_achieved_flop_per_second", group.flop_per_second),
            ("fleetbench_kernel_dram_bytes", group.dram_bytes),
            ("fleetbench_kernel_arithmetic_intensity_flop_per_byte", group.arithmetic_intensity),
        ):
            if value is not None:  # absent stays absent: no series rather than a zero
                _set(run, metric, value, kernel=kernel)
        run.metrics.set("fleetbench_kernel_class_info", 1, kernel=kernel, **{"class": group.cls})
