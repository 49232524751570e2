"""Per-kernel figures from Nsight Compute metrics: speed-of-light, FLOPs, DRAM bytes, intensity, class, memory level.

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
                  own peak counters, else the datasheet table or --peak), named in `derived`
  intensity       FLOPs / DRAM bytes
  roofs           peak fp32 FLOP/s = 2 x sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained
                  x sm__cycles_elapsed.avg.per_second; peak DRAM bytes/s =
                  dram__bytes.sum.peak_sustained x dram__cycles_elapsed.avg.per_second
  class           NVIDIA's SOLBottleneck rule on compute and memory SOL (fleetbench.profile.classify),
                  on DRAM throughput where memory SOL is absent
  memory level    L1, L2 or DRAM: the unit metric at the top of memory SOL's breakdown (a .ncu-rep's
                  `breakdown:` list, read as NVIDIA's rule reads it, for the launches NVIDIA's
                  thresholds class memory_bound or balanced), else the highest of the SOL section's
                  L1/TEX, L2 and DRAM throughputs, else the level NVIDIA's rule names
A launch ncu returned NaN for (its replay failed) is `not_measured`: its figures are None and it
is left out of every aggregate. Launches of the same kernel (same label, see
fleetbench.profile.names) are grouped: durations, FLOPs and bytes add up, utilisations are averaged
weighted by duration. An entry of ncu's --print-summary stands for its invocations (their average
figures, counted `invocations` times). NVIDIA's own rule results travel with each launch (`rules`);
its SOLBottleneck verdict is read into our class names (`nvidia_class`, `nvidia_level`) and compared
with our class for every class (`disagreement`, with the reason where one is known).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.gpus import DatasheetPeak, datasheet_peak, unknown_gpu
from fleetbench.profile.classify import (
    VERDICTS,
    Classification,
    Thresholds,
    classify,
    not_measured,
    with_level,
)
from fleetbench.profile.names import label, short_name
from fleetbench.profile.ncu.guidance import bottleneck, disagreement, headline, nvidia_verdict
from fleetbench.profile.ncu.model import FLOP_OPS, KernelResult, NcuReport
from fleetbench.profile.ncu.pipes import Pipe, busiest_pipe, compute_fix
from fleetbench.profile.ncu.readers import read_report
from fleetbench.profile.ncu.rules import RuleResult
from fleetbench.profile.ncu.tensor import TENSOR_NAME, TensorWork, tensor_work

DURATION = "gpu__time_duration.sum"
COMPUTE_SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_SOL = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_SOL = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
L1_SOL = "l1tex__throughput.avg.pct_of_peak_sustained_active"
L2_SOL = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
SMSP_HZ = "smsp__cycles_elapsed.avg.per_second"
PRECISIONS = {"fp32": ("fadd", "fmul", "ffma"), "fp64": ("dadd", "dmul", "dfma"), "fp16": ("hadd", "hmul", "hfma")}
assert {op for ops in PRECISIONS.values() for op in ops} == set(FLOP_OPS)
# NVIDIA's rule names the level of a breakdown metric by its unit prefix (its get_max_pipe).
PIPE_LEVELS = (("dram", "DRAM"), ("l1tex", "L1"), ("lts", "L2"), ("ltc", "L2"), ("fbp", "DRAM"), ("fbpa", "DRAM"))
# What the top breakdown metric says about the level, for the fix.
PIPE_HINTS = (
    ("l1tex__data_bank", "L1/shared data banks: bank conflicts or shared-memory traffic"),
    ("l1tex__data_pipe_lsu_wavefronts", "L1 LSU wavefronts: bank conflicts or uncoalesced accesses"),
    ("l1tex__lsuin_requests", "L1 LSU requests: many narrow loads and stores"),
    ("l1tex__m_", "L1-L2 traffic: accesses that miss L1"),
    ("l1tex__t", "L1 tag stage: uncoalesced or scattered accesses"),
    ("lts__t_", "L2 tag and sector lookups"),
    ("lts__d", "L2 data banks"),
    ("lts__", "L2 crossbar traffic"),
)
# An FP32 SIMT GEMM by its name (cuBLAS's sgemm, CUTLASS's OpClassSimt kernels): FMA-pipe work, no tensor cores.
SIMT_GEMM = re.compile(r"sgemm|simt", re.IGNORECASE)
# A console log or CSV prints figures to 2 decimals: at a threshold within this (in 0-1), it may round across.
PRINT_PRECISION = 0.00005
TEXT_FORMATS = ("csv-details", "csv-raw", "console", "console-summary")


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
    disagreement: str | None = None  # our class against NVIDIA's bottleneck rule, where they differ
    level: str | None = None  # L1, L2 or DRAM: the memory level that limits (see the module docstring)
    level_source: str | None = None  # the figure the level was read from
    fix_short: str = ""  # the fix in a few words, for tables
    nvidia_class: str | None = None  # NVIDIA's SOLBottleneck verdict in our class names, where the file has it
    nvidia_level: str | None = None  # the memory level NVIDIA's rule names, where it names one
    disagreement_why: str | None = None  # why our class differs from NVIDIA's, where it is known
    invocations: int = 1  # launches this entry stands for (ncu's --print-summary averages)
    pipe: Pipe | None = None  # the busiest SM pipe, where the report has pipe utilisation


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


def _bandwidth(metrics: dict[str, Any], sheet: DatasheetPeak | None) -> tuple[float, str] | None:
    """The device's peak DRAM bytes/s and where it comes from: the report's counters, else the datasheet or --peak."""
    peak, hz = _num(metrics, "dram__bytes.sum.peak_sustained"), _num(metrics, "dram__cycles_elapsed.avg.per_second")
    if peak is not None and hz is not None:
        return peak * hz, "the report's peak counters"
    if sheet is not None and sheet.memory_bytes_per_second:
        return sheet.memory_bytes_per_second, _sheet_name(sheet)
    return None


def _sheet_name(sheet: DatasheetPeak) -> str:
    return sheet.source if sheet.source.startswith("--peak") else f"datasheet {sheet.model}"


def _derived_dram(
    metrics: dict[str, Any], dram_bytes: float | None, duration_s: float | None, sheet: DatasheetPeak | None
) -> tuple[float | None, dict[str, str]]:
    """The DRAM throughput: measured where the report has it, else bytes / duration over the peak."""
    measured = _ratio(metrics, DRAM_SOL)
    if measured is not None or dram_bytes is None or not duration_s:
        return measured, {}
    bandwidth = _bandwidth(metrics, sheet)
    if bandwidth is None:
        return None, {}
    achieved = dram_bytes / duration_s
    how = (
        f"DRAM bytes / gpu__time_duration.sum = {achieved / 1e9:.4g} GB/s over the peak "
        f"{bandwidth[0] / 1e9:.4g} GB/s ({bandwidth[1]}); no {DRAM_SOL} in the report"
    )
    return achieved / bandwidth[0], {"dram_sol": how}


def _compute_peak(tensor: TensorWork, fp32_peak: float | None, sheet: DatasheetPeak | None) -> tuple[float, str] | None:
    """The compute roof over a launch: tensor for tensor-core work, else fp32; counters, else datasheet or --peak."""
    if tensor.flops:
        if tensor.peak_flop_per_second is not None:
            return tensor.peak_flop_per_second, "the report's tensor peak counters"
        dense = (
            max((v for v in (sheet.bf16_tensor, sheet.fp16_tensor) if v is not None), default=None) if sheet else None
        )
        return (dense, f"{_sheet_name(sheet)} dense tensor peak") if sheet and dense else None
    if fp32_peak is not None:
        return fp32_peak, "the report's fp32 peak counters"
    return (sheet.fp32, f"{_sheet_name(sheet)} fp32 peak") if sheet and sheet.fp32 else None


def _derived_compute(
    metrics: dict[str, Any],
    achieved: float | None,
    tensor: TensorWork,
    fp32_peak: float | None,
    sheet: DatasheetPeak | None,
) -> tuple[float | None, dict[str, str]]:
    """The compute SOL: measured where the report has it, else achieved FLOP/s over the compute roof."""
    measured = _ratio(metrics, COMPUTE_SOL)
    if measured is not None or achieved is None:
        return measured, {}
    peak = _compute_peak(tensor, fp32_peak, sheet)
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


def memory_level(kernel: KernelResult) -> tuple[str | None, str | None]:
    """The memory level that limits a launch and the figure that shows it (see the module docstring)."""
    breakdown = kernel.breakdown
    if breakdown:
        top, value = max(breakdown.items(), key=lambda item: item[1])  # the first of equal maxima
        level = next((name for prefix, name in PIPE_LEVELS if top.startswith(prefix)), None)
        if level is not None and value > 0:
            unit = top.split(".")[0]
            hint = next((said for prefix, said in PIPE_HINTS if top.startswith(prefix)), None)
            return level, f"{unit} {value:.1f}% of peak, the top of memory SOL's breakdown" + (
                f": {hint}" if hint else ""
            )
    m = kernel.metrics
    levels = (("L1", _ratio(m, L1_SOL)), ("L2", _ratio(m, L2_SOL)), ("DRAM", _ratio(m, DRAM_SOL)))
    figures = [(name, value) for name, value in levels if value is not None]
    if figures:
        level, value = max(figures, key=lambda item: item[1])
        if value > 0:
            shown = ", ".join(f"{name} {v * 100:.1f}%" for name, v in figures)
            return level, f"the highest of the speed-of-light section's {shown}"
    rule = bottleneck(kernel.rules)
    level = nvidia_verdict(rule)[1] if rule is not None else None
    return (level, "named by NVIDIA's SOLBottleneck rule") if level else (None, None)


def _unknown(
    verdict: Classification,
    sol: tuple[float | None, float | None, float | None],
    inputs: tuple[float | None, float | None, float | None],
    device: str,
    derivable: tuple[bool, bool],
) -> Classification:
    """An unknown verdict's fix: name the GPU where its peaks would derive what is missing, else capture it."""
    compute, memory, dram = sol
    flops, dram_bytes, duration_s = inputs
    bandwidth_known, compute_peak_known = derivable
    need: list[str] = []
    if memory is None and dram is None and dram_bytes is not None and duration_s and not bandwidth_known:
        need.append("DRAM%")
    if compute is None and flops is not None and duration_s and not compute_peak_known:
        need.append("compute%")
    if not need:
        return verdict
    what = " and ".join(need)
    fix = f"name it with --gpu to derive {what} from the report's bytes, FLOPs and duration: {unknown_gpu(device)}"
    return Classification(verdict.cls, verdict.reason, fix, fix_short=f"name it with --gpu to derive {what}")


def _why(
    sol: tuple[float | None, float | None, float | None],
    derived: set[str],
    thresholds: Thresholds,
    text_format: bool,
) -> str | None:
    """Why our class differs from NVIDIA's rule, where it is known; None: unexplained."""
    compute, memory, dram = sol
    reasons = []
    if not thresholds.nvidias():
        t = thresholds
        reasons.append(
            f"profile.thresholds set to {t.high_throughput_at:g}/{t.latency_bound_below:g}/{t.leads_by:g}, "
            "NVIDIA's rule uses 0.8/0.6/0.1"
        )
    if memory is None:
        reasons.append("memory SOL is absent: ours is judged on DRAM throughput, NVIDIA's rule on memory SOL")
    if derived:
        reasons.append(f"ours is judged on derived figures ({', '.join(sorted(derived))}), NVIDIA's on measured SOL")
    if text_format and compute is not None and (memory if memory is not None else dram) is not None:
        other = memory if memory is not None else dram
        assert other is not None
        t = Thresholds()
        edges = [
            abs(figure - edge) for figure in (compute, other) for edge in (t.high_throughput_at, t.latency_bound_below)
        ]
        edges.append(abs(abs(compute - other) - t.leads_by))
        if min(edges) <= 2 * PRINT_PRECISION:
            reasons.append("a figure sits at a threshold to the 2 decimals the file prints, so rounding decides")
    return "; ".join(reasons) or None


def summarize_kernel(
    kernel: KernelResult,
    thresholds: Thresholds | None = None,
    device_name: str | None = None,
    sheet: DatasheetPeak | None = None,
    text_format: bool = False,
) -> KernelSummary:
    """Derive one launch's figures from its metrics, classify it and name its memory level.

    `device_name` names the GPU where the report does not (a CSV or console log says only "device 0");
    `sheet` is the peaks to derive with (--peak), else the datasheet entry of the device.
    """
    m = kernel.metrics
    t = thresholds or Thresholds()
    device = device_name or kernel.device
    sheet = sheet or datasheet_peak(device)
    duration_s, derived = _duration(m)
    fp_flops, precisions = _flops(m, duration_s)
    tensor = tensor_work(m, kernel.name, duration_s, kernel.device)
    flops = fp_flops
    if tensor.flops is not None and (fp_flops is not None or tensor.flops > 0):
        flops, precisions = (fp_flops or 0.0) + tensor.flops, [*precisions, "tensor"]
    dram_bytes = _dram_bytes(m, duration_s)
    memory = _ratio(m, MEMORY_SOL)
    dram, derived_dram = _derived_dram(m, dram_bytes, duration_s, sheet)
    derived.update(derived_dram)
    ffma_peak, sm_hz = (
        _num(m, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"),
        _num(m, "sm__cycles_elapsed.avg.per_second"),
    )
    fp32_peak = 2 * ffma_peak * sm_hz if ffma_peak is not None and sm_hz is not None else None
    achieved = flops / duration_s if flops is not None and duration_s else None
    compute, derived_compute = _derived_compute(m, achieved, tensor, fp32_peak, sheet)
    derived.update(derived_compute)
    sol = (compute, memory, dram)
    verdict = _verdict(m, sol, set(derived), t)
    bandwidth = _bandwidth(m, sheet)
    rule = bottleneck(kernel.rules)
    theirs, their_level = nvidia_verdict(rule) if rule is not None else (None, None)
    needs_level = verdict.cls in ("memory_bound", "balanced") or their_level is not None
    level, level_source = memory_level(kernel) if needs_level else (None, None)
    if verdict.cls == "unknown":
        verdict = _unknown(
            verdict,
            sol,
            (flops, dram_bytes, duration_s),
            device,
            (bandwidth is not None, _compute_peak(tensor, fp32_peak, sheet) is not None),
        )
    elif verdict.cls != "not_measured":
        verdict = with_level(verdict, level, level_source or "")
    pipe = busiest_pipe(m, kernel.rules)
    if verdict.cls == "compute_bound":
        verdict = _compute_verdict(verdict, pipe, tensor, kernel.name, sheet)
    why = None
    if theirs is not None and verdict.cls in VERDICTS and theirs != verdict.cls:
        why = _why(sol, set(derived), t, text_format)
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
        absent=_absent(m, flops, dram_bytes, bandwidth is not None, device),
        tensor_flops=tensor.flops,
        tensor_pipe_active=tensor.pipe_active,
        peak_tensor_flop_per_second=tensor.peak_flop_per_second,
        tensor_uncounted=tensor.evidence,
        derived=derived,
        rules=kernel.rules,
        disagreement=disagreement(verdict.cls, kernel.rules, why),
        level=verdict.level if verdict.cls not in ("unknown", "not_measured") else None,
        level_source=level_source if verdict.level else None,
        fix_short=verdict.short,
        nvidia_class=theirs,
        nvidia_level=their_level,
        disagreement_why=why,
        invocations=kernel.invocations,
        pipe=pipe,
    )


def _compute_verdict(
    verdict: Classification, pipe: Pipe | None, tensor: TensorWork, name: str, sheet: DatasheetPeak | None
) -> Classification:
    """A compute-bound verdict whose fix is its busiest pipe's (fleetbench.profile.ncu.pipes)."""
    named, simt = TENSOR_NAME.search(name) is not None, SIMT_GEMM.search(name) is not None
    clause, fix, short = compute_fix(pipe, tensor.pipe_active, named, sheet, simt and not named)
    reason = f"{verdict.reason}; {clause}" if clause else verdict.reason
    return Classification(verdict.cls, reason, fix, verdict.level, short)


def _absent(
    metrics: dict[str, Any], flops: float | None, dram_bytes: float | None, device_known: bool, device: str
) -> list[str]:
    absent = [name for name in (DURATION, COMPUTE_SOL, MEMORY_SOL, DRAM_SOL, L1_SOL, L2_SOL) if name not in metrics]
    if flops is None:
        absent.append("fp32 FLOP counters (smsp__sass_thread_inst_executed_op_f*_pred_on)")
    if dram_bytes is None:
        absent.append("DRAM byte counters (dram__bytes*)")
    elif DRAM_SOL not in metrics and not device_known:
        absent.append(f"the device's peak bandwidth, to derive DRAM throughput: {unknown_gpu(device)}")
    return absent


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
    level: str | None = None  # the memory level behind a memory-side class
    fix_short: str = ""
    nvidia_class: str | None = None  # NVIDIA's verdict on most of the launches, in our class names
    disagreement_why: str | None = None


def _weighted(kernels: list[KernelSummary], attr: str) -> float | None:
    """The duration-weighted mean of a figure over launches (a summary entry counts for its invocations)."""
    pairs: list[tuple[float, float]] = []
    for kernel in kernels:
        value, duration = getattr(kernel, attr), kernel.duration_s
        if value is not None and duration is not None:
            pairs.append((float(value), duration * kernel.invocations))
    if not pairs:
        return None
    weight = sum(d for _, d in pairs)
    if weight == 0:
        return sum(v for v, _ in pairs) / len(pairs)
    return sum(v * d for v, d in pairs) / weight


def _total(kernels: list[KernelSummary], attr: str) -> float | None:
    values = [getattr(k, attr) for k in kernels]
    if any(v is None for v in values):
        return None
    return float(sum(v * k.invocations for v, k in zip(values, kernels, strict=True)))


def _group_level(measured: list[KernelSummary]) -> str | None:
    """The level most of a kernel's time is limited by (each launch weighted by its duration)."""
    weights: dict[str, float] = defaultdict(float)
    for k in measured:
        if k.level is not None:
            weights[k.level] += (k.duration_s or 0.0) * k.invocations or 1e-30
    return max(weights, key=lambda level: weights[level]) if weights else None


def _group_nvidia(cls: str, measured: list[KernelSummary], launches: int) -> tuple[str | None, str | None, str | None]:
    """NVIDIA's verdict on a kernel's launches against the kernel's class: (theirs, disagreement, why)."""
    verdicts = [k for k in measured if k.nvidia_class is not None]
    if not verdicts:
        return None, None, None
    counts: dict[str, int] = defaultdict(int)
    for k in verdicts:
        counts[k.nvidia_class or ""] += k.invocations
    theirs = max(counts, key=lambda c: counts[c])
    other = [k for k in verdicts if k.nvidia_class != cls]
    if cls not in VERDICTS or not other:
        return theirs, None, None
    n = sum(k.invocations for k in other)
    rule = bottleneck(other[0].rules)
    said = f"ours: {cls}; NVIDIA SOLBottleneck: {headline(rule) if rule else ''} ({other[0].nvidia_class})"
    if n < launches:
        said += f" on {n} of {launches} launches"
    why: str | None = None
    if all(k.cls == k.nvidia_class for k in other):
        why = (
            "each of those launches is classed as NVIDIA classes it; the kernel's duration-weighted figures "
            "cross a threshold"
        )
    elif all(k.disagreement_why for k in other):
        why = "; ".join(sorted({k.disagreement_why or "" for k in other}))
    return theirs, f"{said}; why: {why}" if why else said, why


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
    launches = sum(k.invocations for k in members)
    if measured:
        verdict = _verdict({}, (compute, memory, dram), derived, thresholds)
        if verdict.cls == "unknown":  # the launches' own fix says what would derive the figures
            verdict = Classification(verdict.cls, verdict.reason, first.fix, fix_short=first.fix_short)
        else:
            level = _group_level(measured)
            source = next((k.level_source for k in measured if k.level == level and k.level_source), "")
            verdict = with_level(verdict, level, source or "")
    else:
        verdict = Classification(first.cls, first.reason, first.fix, fix_short=first.fix_short)
    if verdict.cls == "compute_bound" and measured:  # the fix of the launch that takes most of the kernel's time
        main = max(measured, key=lambda k: (k.duration_s or 0.0) * k.invocations)
        tensor = TensorWork(main.tensor_flops, main.tensor_pipe_active, None, None)
        verdict = _compute_verdict(verdict, main.pipe, tensor, main.name, datasheet_peak(main.device))
    theirs, disagrees, why = _group_nvidia(verdict.cls, measured, launches)
    return KernelGroup(
        label=key,
        short=first.short,
        name=first.name,
        device=first.device,
        launches=launches,
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
        not_measured=sum(k.invocations for k in members) - sum(k.invocations for k in measured),
        tensor_flops=_total(measured, "tensor_flops") if measured else None,
        tensor_uncounted=next((k.tensor_uncounted for k in measured if k.tensor_uncounted), None),
        derived=derived,
        disagreement=disagrees,
        level=verdict.level,
        fix_short=verdict.short,
        nvidia_class=theirs,
        disagreement_why=why,
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
    peaks: DatasheetPeak | None = None  # --peak, else the datasheet entry of the (named) device
    cut: str | None = None  # "cut: N of M kernels read" where the file was cut short (NcuReport.cut_label)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as ncu_summary.json holds it."""
        return asdict(self)


def summarize_report(
    report: NcuReport,
    thresholds: Thresholds | None = None,
    device_name: str | None = None,
    sheet: DatasheetPeak | None = None,
) -> NcuSummary:
    """Summarise every launch of a report that has been read, then group them by kernel."""
    text = report.format in TEXT_FORMATS
    kernels = [summarize_kernel(k, thresholds, device_name, sheet, text) for k in report.kernels]
    devices = sorted({k.device for k in kernels})
    peaks = sheet or (datasheet_peak(devices[0]) if devices else None)
    notes = list(report.notes)
    unknown = [d for d in devices if sheet is None and datasheet_peak(d) is None]
    if unknown and any(k.cls == "unknown" or k.derived for k in kernels):
        notes.append(f"note: {unknown_gpu(unknown[0])}")
    return NcuSummary(
        path=report.path,
        format=report.format,
        devices=devices,
        kernels=kernels,
        groups=group_kernels(kernels, thresholds),
        notes=notes,
        peaks=peaks,
        cut=report.cut_label,
    )


def summarize_path(
    path: Path, thresholds: Thresholds | None = None, device_name: str | None = None, peak: str | None = None
) -> NcuSummary:
    """Read an .ncu-rep, ncu CSV or ncu console log and summarise it (`device_name`, `peak`: see summarize_kernel;
    `peak` is --peak's text, parsed by fleetbench.gpus.parse_peak)."""
    from fleetbench.gpus import parse_peak

    sheet = parse_peak(peak) if peak else None
    return summarize_report(read_report(path), thresholds, device_name, sheet)


def overview(summary: NcuSummary, top: int) -> dict[str, Any]:
    """The short form a result record keeps: the report, its devices, counts and the top kernels."""
    return {
        "report": summary.path,
        "format": summary.format,
        "devices": summary.devices,
        "launches": sum(k.invocations for k in summary.kernels),
        "kernels": len(summary.groups),
        "top_kernels": [asdict(g) for g in summary.groups[:top]],
    }
