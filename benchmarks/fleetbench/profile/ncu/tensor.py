"""Tensor-core work in an Nsight Compute report, counted as ncu's own tensor roofline counts it.

ncu's "GPU Speed Of Light Hierarchical Roofline Chart (Tensor Core)" section defines
  achieved  smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed x 512 x smsp__cycles_elapsed.avg.per_second
  peak      sm__inst_executed_pipe_tensor.sum.peak_sustained x 512 x sm__cycles_elapsed.avg.per_second
i.e. 512 FLOPs per tensor-pipe instruction; a raw `.sum` count of the same instructions is used when
the report has it. The fp32/fp64/fp16 FMA counters of the ordinary roofline miss all of this work, so
a bf16/fp16 GEMM without these metrics plots far below where it is: `tensor_evidence` says when a
kernel probably used the tensor pipe although its tensor FLOPs could not be counted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

FLOPS_PER_TENSOR_INSTRUCTION = 512  # ncu's SpeedOfLight_HierarchicalTensorRooflineChart definition
TENSOR_COUNTS = ("sm__inst_executed_pipe_tensor.sum", "smsp__inst_executed_pipe_tensor.sum")
TENSOR_RATE = "smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed"
TENSOR_PEAK = "sm__inst_executed_pipe_tensor.sum.peak_sustained"
# Tensor pipe utilisation, whichever the report has (several sets carry one of these, none the counts).
TENSOR_ACTIVE = (
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active",
)
TENSOR_METRICS: tuple[str, ...] = (*TENSOR_COUNTS, TENSOR_RATE, TENSOR_PEAK, *TENSOR_ACTIVE)
# Kernel names of tensor-core GEMMs and attention (cuBLAS/CUTLASS tile names, mma/wmma, flash attention).
TENSOR_NAME = re.compile(r"hmma|imma|wmma|\bmma|xmma|s16816|s1688|h1688|tensorop|cutlass|gemm|flash", re.IGNORECASE)
# Below this the tensor pipe is idle for practical purposes (counters show stray activity).
ACTIVE_FLOOR = 0.01


def _num(metrics: dict[str, Any], name: str) -> float | None:
    value = metrics.get(name)
    return float(value) if isinstance(value, float | int) and math.isfinite(value) else None


@dataclass(frozen=True)
class TensorWork:
    """A launch's tensor-core figures: FLOPs (None when not counted), pipe activity, the roof."""

    flops: float | None
    pipe_active: float | None  # tensor pipe utilisation 0-1, where the report has it
    peak_flop_per_second: float | None  # the report's own tensor roof at its clocks
    evidence: str | None  # why the kernel probably used tensor cores although its FLOPs are uncounted


def tensor_work(metrics: dict[str, Any], name: str, duration_s: float | None) -> TensorWork:
    """Count one launch's tensor FLOPs, its pipe activity and roof, and flag uncounted tensor work."""
    count = next((c for c in (_num(metrics, n) for n in TENSOR_COUNTS) if c is not None), None)
    rate, smsp_hz = _num(metrics, TENSOR_RATE), _num(metrics, "smsp__cycles_elapsed.avg.per_second")
    if count is None and rate is not None and smsp_hz is not None and duration_s is not None:
        count = rate * smsp_hz * duration_s
    flops = count * FLOPS_PER_TENSOR_INSTRUCTION if count is not None else None
    active = next((a / 100.0 for a in (_num(metrics, n) for n in TENSOR_ACTIVE) if a is not None), None)
    peak, sm_hz = _num(metrics, TENSOR_PEAK), _num(metrics, "sm__cycles_elapsed.avg.per_second")
    roof = peak * FLOPS_PER_TENSOR_INSTRUCTION * sm_hz if peak is not None and sm_hz is not None else None
    evidence = None
    if flops is None:
        if active is not None and active > ACTIVE_FLOOR:
            evidence = f"tensor pipe active {active * 100:.1f}% but no tensor instruction counts in the report"
        elif active is None and TENSOR_NAME.search(name):
            evidence = "a tensor-core kernel by its name, and the report has no tensor-pipe metrics"
    return TensorWork(flops=flops, pipe_active=active, peak_flop_per_second=roof, evidence=evidence)


CAPTURE_HINT = (
    "capture the tensor counters: ncu --section SpeedOfLight_HierarchicalTensorRooflineChart "
    "(or --metrics smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed,sm__inst_executed_pipe_tensor.sum.peak_sustained)"
)
