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
  tensor FLOPs    the tensor path's op counters, else tensor instructions x 2mnk of the kernel's MMA
                  shape (see fleetbench.profile.ncu.tensor); added to FLOPs, `tensor` in flop_precisions
  DRAM (derived)  where the report has DRAM bytes and the duration but no DRAM throughput (a narrow
                  --metrics list): bytes / duration over the device's peak bandwidth (the report's
                  own peak counters, else the datasheet table), named in `derived`
  intensity       FLOPs / DRAM bytes
  roofs           peak fp32 FLOP/s = 2 x sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained
                  x sm__cycles_elapsed.avg.per_second; peak DRAM bytes/s =
                  dram__bytes.sum.peak_sustained x dram__cycles_elapsed.avg.per_second
A launch ncu returned NaN for (its replay failed) is `not_measured`: its figures are None and it
is left out of every aggregate. Launches of the same kernel (same label, see
fleetbench.profile.names) are grouped: durations, FLOPs and bytes add up, utilisations are averaged
weighted by duration. NVIDIA's own rule results travel with each launch (`rules`), the speed-of-light
bottleneck rule is compared with our class (`disagreement`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.profile.classify import Classification, Thresholds, classify, not_measured
from fleetbench.profile.datasheet import datasheet_peak
from fleetbench.profile.names import label, short_name
from fleetbench.profile.ncu.guidance import disagreement
from fleetbench.profile.ncu.readers import FLOP_OPS, KernelResult, NcuReport, read_report
from fleetbench.profile.ncu.rules import RuleResult
from fleetbench.profile.ncu.tensor import TensorWork, tensor_work

DURATION = "gpu__time_duration.sum"
COMPUTE_SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_SOL = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_SOL = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
L1_SOL = "l1tex__throughput.avg.pct_of_peak_sustained_active"
L2_SOL = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
SMSP_HZ = "smsp__cycles_elapsed.avg.per_second"
PRECISIONS = {"fp32": ("fadd", "fmul", "ffma"), "fp64": ("dadd", "dmul", "dfma"), "fp16": ("hadd", "hmul", "hfma")}
assert {op for ops in PRECISIONS.values() for op in ops} == set(FLOP_OPS)


# The figures a launch is judged on: NaN in any of them means ncu did not measure the launch.
JUDGED = {DURATION: "duration", COMPUTE_SOL: "compute SOL", MEMORY_SOL: "memory SOL", DRAM_SOL: "DRAM throughput"}


def _num(metrics: dict[str, Any], name: str) -> float | None:
    """A numeric metric; None when absent, a string, or NaN/inf (not measured)."""
    value = metrics.get(name)
    return float(value) if isinstance(value, float | int) and math.isfinite(value) else None


def unmeasured(metrics: dict[str, Any]) -> list[str]:
    """The judged figures ncu returned NaN for (its mark of a replay that failed)."""
    return [said for name, said in JUDGED.items() if isinstance(metrics.get(name), float) and math.isnan(metrics[name])]


# Other names of the same figures, as narrow --metrics captures spell them.
ALIASES = {DRAM_SOL: "dram__throughput.avg.pct_of_peak_sustained_elapsed"}


def _ratio(metrics: dict[str, Any], name: str) -> float | None:
    value = _num(metrics, name)
    if value is None and name in ALIASES:
        value = _num(metrics, ALIASES[name])
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
    tensor_flops: float | None = None
    tensor_pipe_active: float | None = None
    peak_tensor_flop_per_second: float | None = None
    tensor_uncounted: str | None = None  # why the launch probably did uncounted tensor-core work
    derived: dict[str, str] = field(default_factory=dict)  # figure -> how it was derived, and from what
    rules: list[RuleResult] = field(default_factory=list)  # NVIDIA's guided analysis
    disagreement: str | None = None  # our class against NVIDIA's bottleneck rule, where they contradict


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


def _duration(metrics: dict[str, Any]) -> tuple[float | None, dict[str, str]]:
    """The launch's duration in s: gpu__time_duration, else SM cycles over the SM clock (marked derived)."""
    ns = _num(metrics, DURATION)
    if ns is not None:
        return ns * 1e-9, {}
    cycles, hz = _num(metrics, "sm__cycles_elapsed.avg"), _num(metrics, "sm__cycles_elapsed.avg.per_second")
    if cycles is None or not hz:
        return None, {}
    return cycles / hz, {
        "duration_s": "sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second (no gpu__time_duration)"
    }


def _bandwidth(metrics: dict[str, Any], device: str) -> tuple[float, str] | None:
    """The device's peak DRAM bytes/s and where it comes from: the report's counters, else the datasheet."""
    peak, hz = _num(metrics, "dram__bytes.sum.peak_sustained"), _num(metrics, "dram__cycles_elapsed.avg.per_second")
    if peak is not None and hz is not None:
        return peak * hz, "the report's peak counters"
    sheet = datasheet_peak(device)
    if sheet is not None:
        return sheet.memory_bytes_per_second, f"datasheet {sheet.model}"
    return None


def _derived_dram(
    metrics: dict[str, Any], dram_bytes: float | None, duration_s: float | None, device: str
) -> tuple[float | None, dict[str, str]]:
    """The DRAM throughput: measured where the report has it, else bytes / duration over the peak."""
    measured = _ratio(metrics, DRAM_SOL)
    if measured is not None or dram_bytes is None or not duration_s:
        return measured, {}
    bandwidth = _bandwidth(metrics, device)
    if bandwidth is None:
        return None, {}
    achieved = dram_bytes / duration_s
    how = (
        f"DRAM bytes / gpu__time_duration.sum = {achieved / 1e9:.4g} GB/s over the peak "
        f"{bandwidth[0] / 1e9:.4g} GB/s ({bandwidth[1]}); no {DRAM_SOL} in the report"
    )
    return achieved / bandwidth[0], {"dram_sol": how}


def _compute_peak(tensor: TensorWork, fp32_peak: float | None, device: str) -> tuple[float, str] | None:
    """The compute roof over a launch: tensor for tensor-core work, else fp32; counters, else datasheet."""
    sheet = datasheet_peak(device)
    if tensor.flops:
        if tensor.peak_flop_per_second is not None:
            return tensor.peak_flop_per_second, "the report's tensor peak counters"
        dense = (
            max((v for v in (sheet.bf16_tensor, sheet.fp16_tensor) if v is not None), default=None) if sheet else None
        )
        return (dense, f"datasheet {sheet.model} dense tensor peak") if sheet and dense else None
    if fp32_peak is not None:
        return fp32_peak, "the report's fp32 peak counters"
    return (sheet.fp32, f"datasheet {sheet.model} fp32 peak") if sheet and sheet.fp32 else None


def _derived_compute(
    metrics: dict[str, Any], achieved: float | None, tensor: TensorWork, fp32_peak: float | None, device: str
) -> tuple[float | None, dict[str, str]]:
    """The compute SOL: measured where the report has it, else achieved FLOP/s over the compute roof."""
    measured = _ratio(metrics, COMPUTE_SOL)
    if measured is not None or achieved is None:
        return measured, {}
    peak = _compute_peak(tensor, fp32_peak, device)
    if peak is None:
        return None, {}
    how = (
        f"achieved {achieved / 1e12:.4g} TFLOP/s over {peak[0] / 1e12:.4g} TFLOP/s ({peak[1]}); "
        f"no {COMPUTE_SOL} in the report"
    )
    clock = _num(metrics, "sm__cycles_elapsed.avg.per_second")
    if peak[1].startswith("datasheet") and clock is not None:
        how += f"; the datasheet peak is at boost clock, ncu ran the SMs at {clock / 1e9:.3g} GHz"
    return achieved / peak[0], {"compute_sol": how}


def _verdict(
    metrics: dict[str, Any],
    sol: tuple[float | None, float | None, float | None],
    derived: set[str] | list[str],
    thresholds: Thresholds | None,
) -> Classification:
    """Not measured on NaN; else by compute and memory SOL, or DRAM throughput where memory SOL is absent."""
    nan = unmeasured(metrics)
    if nan:
        return not_measured(nan)
    compute, memory, dram = sol
    compute_name = "compute (derived)" if "compute_sol" in derived else "compute SOL"
    if memory is None and dram is not None:
        name = "DRAM throughput (derived)" if "dram_sol" in derived else "DRAM throughput"
        return classify(compute, dram, thresholds, compute_name, name)
    return classify(compute, memory, thresholds, compute_name, "memory SOL")


def _absent(metrics: dict[str, Any], flops: float | None, dram_bytes: float | None, device_known: bool) -> list[str]:
    absent = [name for name in (DURATION, COMPUTE_SOL, MEMORY_SOL, DRAM_SOL, L1_SOL, L2_SOL) if name not in metrics]
    if flops is None:
        absent.append("fp32 FLOP counters (smsp__sass_thread_inst_executed_op_f*_pred_on)")
    if dram_bytes is None:
        absent.append("DRAM byte counters (dram__bytes*)")
    elif DRAM_SOL not in metrics and not device_known:
        absent.append("the device's peak bandwidth (unknown GPU: name it with --gpu to derive DRAM throughput)")
    return absent


def summarize_kernel(
    kernel: KernelResult, thresholds: Thresholds | None = None, device_name: str | None = None
) -> KernelSummary:
    """Derive one launch's figures from its metrics and classify it by its speed-of-light.

    `device_name` names the GPU where the report does not (a CSV or console log says only "device 0").
    """
    m = kernel.metrics
    device = device_name or kernel.device
    duration_s, derived = _duration(m)
    fp_flops, precisions = _flops(m, duration_s)
    tensor = tensor_work(m, kernel.name, duration_s, kernel.device)
    flops = fp_flops
    if tensor.flops is not None and (fp_flops is not None or tensor.flops > 0):
        flops, precisions = (fp_flops or 0.0) + tensor.flops, [*precisions, "tensor"]
    dram_bytes = _dram_bytes(m, duration_s)
    memory = _ratio(m, MEMORY_SOL)
    dram, derived_dram = _derived_dram(m, dram_bytes, duration_s, device)
    derived.update(derived_dram)
    ffma_peak, sm_hz = (
        _num(m, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"),
        _num(m, "sm__cycles_elapsed.avg.per_second"),
    )
    fp32_peak = 2 * ffma_peak * sm_hz if ffma_peak is not None and sm_hz is not None else None
    achieved = flops / duration_s if flops is not None and duration_s else None
    compute, derived_compute = _derived_compute(m, achieved, tensor, fp32_peak, device)
    derived.update(derived_compute)
    verdict = _verdict(m, (compute, memory, dram), set(derived), thresholds)
    bandwidth = _bandwidth(m, device)
    per_second = duration_s if duration_s else None
    return KernelSummary(
        index=kernel.index,
        id=kernel.id,
        name=kernel.name,
        short=short_name(kernel.name),
        label=label(kernel.name),
        device=device,
        duration_s=duration_s,
        compute_sol=compute,
        memory_sol=memory,
        dram_sol=dram,
        l1_sol=_ratio(m, L1_SOL),
        l2_sol=_ratio(m, L2_SOL),
        flops=flops,
        flop_precisions=precisions,
        flop_per_second=flops / per_second if flops is not None and per_second else None,
        dram_bytes=dram_bytes,
        dram_bytes_per_second=dram_bytes / per_second if dram_bytes is not None and per_second else None,
        arithmetic_intensity=flops / dram_bytes if flops is not None and dram_bytes else None,
        peak_fp32_flop_per_second=fp32_peak,
        peak_dram_bytes_per_second=bandwidth[0] if bandwidth and bandwidth[1].startswith("the report") else None,
        cls=verdict.cls,
        reason=verdict.reason,
        fix=verdict.fix,
        absent=_absent(m, flops, dram_bytes, bandwidth is not None),
        tensor_flops=tensor.flops,
        tensor_pipe_active=tensor.pipe_active,
        peak_tensor_flop_per_second=tensor.peak_flop_per_second,
        tensor_uncounted=tensor.evidence,
        derived=derived,
        rules=kernel.rules,
        disagreement=disagreement(verdict.cls, kernel.rules),
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
    not_measured: int = 0  # launches ncu returned NaN for, left out of the figures above
    tensor_flops: float | None = None
    tensor_uncounted: str | None = None
    derived: list[str] = field(default_factory=list)  # figures derived rather than measured
    disagreement: str | None = None


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


def _group(key: str, members: list[KernelSummary], thresholds: Thresholds | None) -> KernelGroup:
    """One kernel's launches: figures over the measured ones, classified again on the weighted SOL.

    A kernel none of whose launches was measured keeps their not_measured verdict and no figures.
    """
    measured = [k for k in members if k.cls != "not_measured"]
    first = members[0]
    duration = _total(measured, "duration_s") if measured else None
    flops = _total(measured, "flops") if measured else None
    dram_bytes = _total(measured, "dram_bytes") if measured else None
    compute, memory = _weighted(measured, "compute_sol"), _weighted(measured, "memory_sol")
    dram = _weighted(measured, "dram_sol")
    derived = sorted({figure for k in measured for figure in k.derived})
    if measured:
        verdict = _verdict({}, (compute, memory, dram), derived, thresholds)
    else:
        verdict = Classification(first.cls, first.reason, first.fix)
    return KernelGroup(
        label=key,
        short=first.short,
        name=first.name,
        device=first.device,
        launches=len(members),
        duration_s=duration,
        compute_sol=compute,
        memory_sol=memory,
        dram_sol=dram,
        flops=flops,
        flop_per_second=flops / duration if flops is not None and duration else None,
        dram_bytes=dram_bytes,
        arithmetic_intensity=flops / dram_bytes if flops is not None and dram_bytes else None,
        cls=verdict.cls,
        reason=verdict.reason,
        fix=verdict.fix,
        not_measured=len(members) - len(measured),
        tensor_flops=_total(measured, "tensor_flops") if measured else None,
        tensor_uncounted=next((k.tensor_uncounted for k in measured if k.tensor_uncounted), None),
        derived=derived,
        disagreement=disagreement(verdict.cls, [rule for k in measured for rule in k.rules]),
    )


def group_kernels(kernels: list[KernelSummary], thresholds: Thresholds | None = None) -> list[KernelGroup]:
    """Launches grouped by label and classified again on their weighted figures, longest total first."""
    by_label: dict[str, list[KernelSummary]] = defaultdict(list)
    for kernel in kernels:
        by_label[kernel.label].append(kernel)
    groups = [_group(key, members, thresholds) for key, members in by_label.items()]
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


def summarize_report(
    report: NcuReport, thresholds: Thresholds | None = None, device_name: str | None = None
) -> NcuSummary:
    """Summarise every launch of a report that has been read, then group them by kernel."""
    kernels = [summarize_kernel(k, thresholds, device_name) for k in report.kernels]
    devices = sorted({k.device for k in kernels})
    return NcuSummary(
        path=report.path,
        format=report.format,
        devices=devices,
        kernels=kernels,
        groups=group_kernels(kernels, thresholds),
        notes=report.notes,
    )


def summarize_path(path: Path, thresholds: Thresholds | None = None, device_name: str | None = None) -> NcuSummary:
    """Read an .ncu-rep, ncu CSV or ncu console log and summarise it (`device_name`: see summarize_kernel)."""
    return summarize_report(read_report(path), thresholds, device_name)


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
