"""Per-kernel figures from Nsight Compute metrics: speed-of-light, FLOPs, DRAM bytes, intensity, class.

Definitions (metric names as Nsight Compute spells them; a figure whose inputs are absent is None):
  duration        gpu__time_duration.sum (ns -> s)
  compute SOL     sm__throughput.avg.pct_of_peak_sustained_elapsed / 100
  memory SOL      gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed / 100
  DRAM            gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed / 100
  L1 / L2         l1tex__throughput.avg.pct_of_peak_sustained_active,
                  lts__throughput.avg.pct_of_peak_sustained_elapsed (/ 100)
  FLOPs           as ncu's SpeedOfLight roofline counts them: add + mul + 2 x fma SASS thread
                  instructions for fp32 (required), fp64 and fp16 (when present), from the raw `.sum`
                  counts or from `.sum.per_cycle_elapsed` x smsp__cycles_elapsed.avg.per_second x
                  duration. Tensor-core work is not in these counters, so a tensor-core GEMM shows
                  few FLOPs here; its compute SOL still tells the truth.
  DRAM bytes      dram__bytes.sum, else read + write (dram__bytes_read/_write or _op_read/_op_write),
                  else dram__bytes.sum.per_second x duration
  intensity       FLOPs / DRAM bytes
  roofs           peak fp32 FLOP/s = 2 x sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained
                  x sm__cycles_elapsed.avg.per_second; peak DRAM bytes/s =
                  dram__bytes.sum.peak_sustained x dram__cycles_elapsed.avg.per_second
Launches of the same kernel (same label, see fleetbench.profile.names) are grouped: durations, FLOPs
and bytes add up, utilisations are averaged weighted by duration.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.profile.classify import Thresholds, classify
from fleetbench.profile.names import label, short_name
from fleetbench.profile.ncu.readers import FLOP_OPS, KernelResult, NcuReport, read_report

DURATION = "gpu__time_duration.sum"
COMPUTE_SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_SOL = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_SOL = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
L1_SOL = "l1tex__throughput.avg.pct_of_peak_sustained_active"
L2_SOL = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
SMSP_HZ = "smsp__cycles_elapsed.avg.per_second"
PRECISIONS = {"fp32": ("fadd", "fmul", "ffma"), "fp64": ("dadd", "dmul", "dfma"), "fp16": ("hadd", "hmul", "hfma")}
assert {op for ops in PRECISIONS.values() for op in ops} == set(FLOP_OPS)


def _num(metrics: dict[str, Any], name: str) -> float | None:
    value = metrics.get(name)
    return float(value) if isinstance(value, float | int) else None


def _ratio(metrics: dict[str, Any], name: str) -> float | None:
    value = _num(metrics, name)
    return None if value is None else value / 100.0


@dataclass
class KernelSummary:
    """The figures of one launch (see the module docstring); `absent` names the metrics it lacked."""

    index: int
    id: str
    name: str
    short: str
    label: str
    device: str
    duration_s: float | None
    compute_sol: float | None
    memory_sol: float | None
    dram_sol: float | None
    l1_sol: float | None
    l2_sol: float | None
    flops: float | None
    flop_precisions: list[str]
    flop_per_second: float | None
    dram_bytes: float | None
    dram_bytes_per_second: float | None
    arithmetic_intensity: float | None
    peak_fp32_flop_per_second: float | None
    peak_dram_bytes_per_second: float | None
    cls: str
    reason: str
    fix: str
    absent: list[str] = field(default_factory=list)


def _flops(metrics: dict[str, Any], duration_s: float | None) -> tuple[float | None, list[str]]:
    total = 0.0
    counted: list[str] = []
    hz = _num(metrics, SMSP_HZ)
    for precision, (add, mul, fma) in PRECISIONS.items():
        names = [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in (add, mul, fma)]
        counts = [_num(metrics, n) for n in names]
        if all(c is not None for c in counts):
            a, m, f = (float(c or 0.0) for c in counts)
            total += a + m + 2 * f
            counted.append(precision)
            continue
        rates = [_num(metrics, f"{n}.per_cycle_elapsed") for n in names]
        if all(r is not None for r in rates) and hz is not None and duration_s is not None:
            a, m, f = (float(r or 0.0) for r in rates)
            total += (a + m + 2 * f) * hz * duration_s
            counted.append(precision)
    if "fp32" not in counted:
        return None, []
    return total, counted


def _dram_bytes(metrics: dict[str, Any], duration_s: float | None) -> float | None:
    total = _num(metrics, "dram__bytes.sum")
    if total is not None:
        return total
    for read, write in (
        ("dram__bytes_read.sum", "dram__bytes_write.sum"),
        ("dram__bytes_op_read.sum", "dram__bytes_op_write.sum"),
    ):
        r, w = _num(metrics, read), _num(metrics, write)
        if r is not None and w is not None:
            return r + w
    rate = _num(metrics, "dram__bytes.sum.per_second")
    return rate * duration_s if rate is not None and duration_s is not None else None


def summarize_kernel(kernel: KernelResult, thresholds: Thresholds | None = None) -> KernelSummary:
    """Derive one launch's figures from its metrics and classify it by its speed-of-light."""
    m = kernel.metrics
    ns = _num(m, DURATION)
    duration_s = ns * 1e-9 if ns is not None else None
    flops, precisions = _flops(m, duration_s)
    dram_bytes = _dram_bytes(m, duration_s)
    compute, memory = _ratio(m, COMPUTE_SOL), _ratio(m, MEMORY_SOL)
    verdict = classify(compute, memory, thresholds, "compute SOL", "memory SOL")
    ffma_peak, sm_hz = (
        _num(m, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"),
        _num(m, "sm__cycles_elapsed.avg.per_second"),
    )
    dram_peak, dram_hz = _num(m, "dram__bytes.sum.peak_sustained"), _num(m, "dram__cycles_elapsed.avg.per_second")
    absent = [name for name in (DURATION, COMPUTE_SOL, MEMORY_SOL, DRAM_SOL, L1_SOL, L2_SOL) if name not in m]
    if flops is None:
        absent.append("fp32 FLOP counters (smsp__sass_thread_inst_executed_op_f*_pred_on)")
    if dram_bytes is None:
        absent.append("DRAM byte counters (dram__bytes*)")
    per_second = duration_s if duration_s else None
    return KernelSummary(
        index=kernel.index,
        id=kernel.id,
        name=kernel.name,
        short=short_name(kernel.name),
        label=label(kernel.name),
        device=kernel.device,
        duration_s=duration_s,
        compute_sol=compute,
        memory_sol=memory,
        dram_sol=_ratio(m, DRAM_SOL),
        l1_sol=_ratio(m, L1_SOL),
        l2_sol=_ratio(m, L2_SOL),
        flops=flops,
        flop_precisions=precisions,
        flop_per_second=flops / per_second if flops is not None and per_second else None,
        dram_bytes=dram_bytes,
        dram_bytes_per_second=dram_bytes / per_second if dram_bytes is not None and per_second else None,
        arithmetic_intensity=flops / dram_bytes if flops is not None and dram_bytes else None,
        peak_fp32_flop_per_second=2 * ffma_peak * sm_hz if ffma_peak is not None and sm_hz is not None else None,
        peak_dram_bytes_per_second=dram_peak * dram_hz if dram_peak is not None and dram_hz is not None else None,
        cls=verdict.cls,
        reason=verdict.reason,
        fix=verdict.fix,
        absent=absent,
    )


@dataclass
class KernelGroup:
    """All launches of one kernel (one label)."""

    label: str
    short: str
    name: str
    device: str
    launches: int
    duration_s: float | None
    compute_sol: float | None
    memory_sol: float | None
    dram_sol: float | None
    flops: float | None
    flop_per_second: float | None
    dram_bytes: float | None
    arithmetic_intensity: float | None
    cls: str
    reason: str
    fix: str


def _weighted(kernels: list[KernelSummary], attr: str) -> float | None:
    pairs: list[tuple[float, float]] = []
    for kernel in kernels:
        value, duration = getattr(kernel, attr), kernel.duration_s
        if value is not None and duration is not None:
            pairs.append((float(value), duration))
    if not pairs:
        return None
    weight = sum(d for _, d in pairs)
    if weight == 0:
        return sum(v for v, _ in pairs) / len(pairs)
    return sum(v * d for v, d in pairs) / weight


def _total(kernels: list[KernelSummary], attr: str) -> float | None:
    values = [getattr(k, attr) for k in kernels]
    return None if any(v is None for v in values) else float(sum(values))


def group_kernels(kernels: list[KernelSummary], thresholds: Thresholds | None = None) -> list[KernelGroup]:
    """Launches grouped by label and classified again on their weighted figures, longest total first."""
    by_label: dict[str, list[KernelSummary]] = defaultdict(list)
    for kernel in kernels:
        by_label[kernel.label].append(kernel)
    groups = []
    for key, members in by_label.items():
        duration = _total(members, "duration_s")
        flops, dram_bytes = _total(members, "flops"), _total(members, "dram_bytes")
        compute, memory = _weighted(members, "compute_sol"), _weighted(members, "memory_sol")
        verdict = classify(compute, memory, thresholds, "compute SOL", "memory SOL")
        groups.append(
            KernelGroup(
                label=key,
                short=members[0].short,
                name=members[0].name,
                device=members[0].device,
                launches=len(members),
                duration_s=duration,
                compute_sol=compute,
                memory_sol=memory,
                dram_sol=_weighted(members, "dram_sol"),
                flops=flops,
                flop_per_second=flops / duration if flops is not None and duration else None,
                dram_bytes=dram_bytes,
                arithmetic_intensity=flops / dram_bytes if flops is not None and dram_bytes else None,
                cls=verdict.cls,
                reason=verdict.reason,
                fix=verdict.fix,
            )
        )
    return sorted(groups, key=lambda g: g.duration_s or 0.0, reverse=True)


@dataclass
class NcuSummary:
    """A summarised report: every launch, the kernel groups and the devices it ran on."""

    path: str
    format: str
    devices: list[str]
    kernels: list[KernelSummary]
    groups: list[KernelGroup]
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as ncu_summary.json holds it."""
        return asdict(self)


def summarize_report(report: NcuReport, thresholds: Thresholds | None = None) -> NcuSummary:
    """Summarise every launch of a report that has been read, then group them by kernel."""
    kernels = [summarize_kernel(k, thresholds) for k in report.kernels]
    devices = sorted({k.device for k in kernels})
    return NcuSummary(
        path=report.path,
        format=report.format,
        devices=devices,
        kernels=kernels,
        groups=group_kernels(kernels, thresholds),
        notes=report.notes,
    )


def summarize_path(path: Path, thresholds: Thresholds | None = None) -> NcuSummary:
    """Read an .ncu-rep or ncu CSV file and summarise it."""
    return summarize_report(read_report(path), thresholds)


def overview(summary: NcuSummary, top: int) -> dict[str, Any]:
    """The short form a result record keeps: the report, its devices, counts and the top kernels."""
    return {
        "report": summary.path,
        "format": summary.format,
        "devices": summary.devices,
        "launches": len(summary.kernels),
        "kernels": len(summary.groups),
        "top_kernels": [asdict(g) for g in summary.groups[:top]],
    }
