"""Tensor-core work in an Nsight Compute report: FLOPs, pipe activity, the tensor roof.

Three sources, best first:
  ops        sm__ops_path_tensor_src_<in>_dst_<out>.sum: the tensor path's operations, counted by the
             hardware (Hopper, Blackwell); summed over the formats the report has
  instructions  sm__inst_executed_pipe_tensor.sum (or the per-cycle rate x SMSP clock x duration)
             x FLOPs per warp-level MMA instruction = 2 x m x n x k of its shape: read from the kernel
             name (CUTLASS's smallest `GemmShape<m, n, k>`, the instruction shape; cuBLAS/CUTLASS
             tile tokens `s16816`, `h1688`, `i8816`); Volta's HMMA.884 counts 512. Where the shape is
             unknown, ncu's own tensor-roofline constant (512, exact only on Volta) is used and said.
             Checked on real A100 and V100 exports of a 20480^3 GEMM: 2 x 20480^3 FLOPs per launch.
  evidence   only the tensor pipe's utilisation, or MMA evidence in the kernel's name (`TENSOR_NAME`:
             HMMA/WGMMA/mma/tensorop tokens, never "gemm" alone): FLOPs not counted, the point may sit
             low (`evidence` says why)
The tensor roof: sm__inst_executed_pipe_tensor.sum.peak_sustained x 512 x SM clock (ncu's
SpeedOfLight_HierarchicalTensorRooflineChart), else the datasheet's dense bf16/fp16 peak.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

FLOPS_PER_TENSOR_INSTRUCTION = 512  # ncu's SpeedOfLight_HierarchicalTensorRooflineChart definition
_OPS_FORMATS = ("fp64", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8", "int4")
_OPS_RESULTS = ("fp64", "fp32", "fp16", "bf16", "int32")
TENSOR_OPS = tuple(f"sm__ops_path_tensor_src_{src}_dst_{dst}.sum" for src in _OPS_FORMATS for dst in _OPS_RESULTS)
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
TENSOR_METRICS: tuple[str, ...] = (*TENSOR_OPS, *TENSOR_COUNTS, TENSOR_RATE, TENSOR_PEAK, *TENSOR_ACTIVE)
# Evidence of tensor-core work in a kernel's name: its MMA instructions or their wrappers (HMMA/IMMA/DMMA,
# wmma, mma.sync, xmma, Hopper's GMMA/WGMMA), CUTLASS's and cuBLAS's tensor-op names (OpClassTensorOp,
# `tensorop`, MMA tile tokens s16816/h1688/i8816/h884), CuTe's MMA atoms (SM80_16x8x16_F32F16F16F32_TN,
# SM90_64x128x16_...). Never "gemm", "cutlass" or "flash" alone: SIMT GEMMs (a hand-written FP32
# gemm_vectorized_kernel, CUTLASS OpClassSimt) carry those names and run no tensor core.
TENSOR_NAME = re.compile(
    r"(?<![a-z])(?:h|i|d|w|x|g|hg|wg)?mma(?![a-z])|tensor_?op|[shdib](?:16816|16832|1688|1684|8816|884)(?![0-9])"
    r"|\bsm_?[0-9]{2,3}_[0-9]+x[0-9]+x[0-9]+_",
    re.IGNORECASE,
)
_GEMM_SHAPE = re.compile(r"GemmShape<\s*(?:\(int\))?(\d+),\s*(?:\(int\))?(\d+),\s*(?:\(int\))?(\d+)\s*>")
_TILE_TOKEN = re.compile(r"(?<![0-9a-z])[shdib](16816|16832|1688|1684|8816|884)(?![0-9])", re.IGNORECASE)
_VOLTA = re.compile(r"CC 7\.[02]\b|volta|_70_|sm70", re.IGNORECASE)
# Below this the tensor pipe is idle for practical purposes (counters show stray activity).
ACTIVE_FLOOR = 0.01


def _num(metrics: dict[str, Any], name: str) -> float | None:
    value = metrics.get(name)
    return float(value) if isinstance(value, float | int) and math.isfinite(value) else None


def _token_shape(token: str) -> tuple[int, int, int]:
    """'16816' -> (16, 8, 16), '1688' -> (16, 8, 8), '884' -> (8, 8, 4): m and n first, k the rest."""
    m = 16 if token.startswith("16") else 8
    rest = token[2:] if m == 16 else token[1:]
    return m, int(rest[0]), int(rest[1:])


def flops_per_instruction(name: str, device: str) -> tuple[int, str | None]:
    """FLOPs of one warp-level tensor instruction of this kernel, and a caveat when it is a guess."""
    if _VOLTA.search(device) or _VOLTA.search(name):
        return 512, None  # HMMA.884: one quad-pair's m8n8k4 per counted instruction
    shapes = [tuple(int(v) for v in match) for match in _GEMM_SHAPE.findall(name)]
    if shapes:
        m, n, k = min(shapes, key=lambda shape: shape[0] * shape[1] * shape[2])
        return 2 * m * n * k, None
    token = _TILE_TOKEN.search(name)
    if token:
        m, n, k = _token_shape(token.group(1))
        return 2 * m * n * k, None
    return FLOPS_PER_TENSOR_INSTRUCTION, (
        "instruction shape unknown from the kernel name: ncu's 512 FLOPs per tensor instruction assumed "
        "(m16n8k8 instructions do 2048, m16n8k16 4096)"
    )


@dataclass(frozen=True)
class TensorWork:
    """A launch's tensor-core figures: FLOPs (None when not counted), pipe activity, the roof."""

    flops: float | None
    pipe_active: float | None  # tensor pipe utilisation 0-1, where the report has it
    peak_flop_per_second: float | None  # the report's own tensor roof at its clocks
    evidence: str | None  # why the kernel probably used tensor cores although its FLOPs are uncounted
    source: str | None = None  # how the FLOPs were counted, with any caveat


def _instructions(metrics: dict[str, Any], duration_s: float | None) -> float | None:
    count = next((c for c in (_num(metrics, n) for n in TENSOR_COUNTS) if c is not None), None)
    rate, smsp_hz = _num(metrics, TENSOR_RATE), _num(metrics, "smsp__cycles_elapsed.avg.per_second")
    if count is None and rate is not None and smsp_hz is not None and duration_s is not None:
        count = rate * smsp_hz * duration_s
    return count


def _counted(metrics: dict[str, Any], name: str, device: str, duration_s: float | None) -> tuple[float, str] | None:
    ops = [value for value in (_num(metrics, n) for n in TENSOR_OPS if n in metrics) if value is not None]
    if ops:
        return sum(ops), "sm__ops_path_tensor_* operation counters"
    count = _instructions(metrics, duration_s)
    if count is None:
        return None
    per_instruction, caveat = flops_per_instruction(name, device)
    said = f"tensor instructions x {per_instruction} FLOPs each" + (f" ({caveat})" if caveat else "")
    return count * per_instruction, said


def tensor_work(metrics: dict[str, Any], name: str, duration_s: float | None, device: str = "") -> TensorWork:
    """Count one launch's tensor FLOPs, its pipe activity and roof, and flag uncounted tensor work."""
    counted = _counted(metrics, name, device, duration_s)
    active = next((a / 100.0 for a in (_num(metrics, n) for n in TENSOR_ACTIVE) if a is not None), None)
    peak, sm_hz = _num(metrics, TENSOR_PEAK), _num(metrics, "sm__cycles_elapsed.avg.per_second")
    roof = peak * FLOPS_PER_TENSOR_INSTRUCTION * sm_hz if peak is not None and sm_hz is not None else None
    evidence = None
    if counted is None:
        if active is not None and active > ACTIVE_FLOOR:
            evidence = f"tensor pipe active {active * 100:.1f}% but no tensor instruction counts in the report"
        elif active is None and (token := TENSOR_NAME.search(name)) is not None:
            evidence = (
                f"its name carries tensor-core MMA evidence ({token[0]!r}), and the report has no tensor-pipe metrics"
            )
    return TensorWork(
        flops=counted[0] if counted else None,
        pipe_active=active,
        peak_flop_per_second=roof,
        evidence=evidence,
        source=counted[1] if counted else None,
    )


CAPTURE_HINT = (
    "capture the tensor counters: ncu --section SpeedOfLight_HierarchicalTensorRooflineChart "
    "(or --metrics smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed,sm__inst_executed_pipe_tensor.sum.peak_sustained)"
)
