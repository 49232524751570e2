"""The busiest SM pipe of a launch, from the report's pipe utilisation, and the fix that fits a compute-bound one.

Nsight Compute's Compute Workload Analysis section reports every pipe's utilisation twice: issued
instructions (`sm__inst_executed_pipe_<pipe>.avg.pct_of_peak_sustained_active`) and active cycles
(`sm__pipe_<pipe>_cycles_active.avg.pct_of_peak_sustained_active`); NVIDIA's "High Pipe Utilization"
rule names the pipe that is highest on either. So does `busiest_pipe`: the highest figure over both
kinds, read into a family whose fix differs:

  tensor          tensor cores (hmma, imma, dmma, gmma and the rest): a tensor-core GEMM
  fma             FP32 multiply-add (fma, fmaheavy, fmalite) and packed FP16 (fp16)
  alu             integer, logic, compare, conversion (alu)
  fp64            double precision (fp64, dfma)
  transcendental  the XU unit: sin, cos, exp, log, reciprocal square root, integer<->float conversion
  lsu             loads and stores to shared and global memory (lsu)
  other           branch (cbu), address (adu), uniform, texture

Compute-bound advice then names that pipe and gives its fix (`compute_fix`). FP8/FP4 is advised only for
a tensor-core GEMM on a GPU the GPU table marks as having FP8 (FP4: Blackwell); where the report has no pipe
metrics, the pipe NVIDIA's HighPipeUtilization rule names is taken; a kernel with neither gets the
advice that needs none (capture the section, cut redundant work), the FMA fix where its name says a
SIMT FP32 GEMM, and FP8 only for a tensor-core kernel (MMA name, active tensor pipe) on an FP8 GPU.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fleetbench.gpus import DatasheetPeak
from fleetbench.profile.ncu.rules import RuleResult

_PIPE_METRIC = re.compile(
    r"^sm__(?:inst_executed_pipe_(?P<issued>[a-z0-9_]+?)|pipe_(?P<active>[a-z0-9_]+?)_cycles_active)"
    r"\.avg\.pct_of_peak_sustained_active$"
)
# A pipe's name (as the metric spells it) to its family; the first prefix that matches wins.
FAMILIES: tuple[tuple[str, str], ...] = (
    ("tensor", "tensor"),
    ("shared_pipe_tensor", "tensor"),
    ("fp64", "fp64"),
    ("dfma", "fp64"),
    ("fma", "fma"),
    ("fp16", "fma"),
    ("alu", "alu"),
    ("xu", "transcendental"),
    ("lsu", "lsu"),
)
# Pipes that are not a unit of their own (sums over pipes, or the shared pipe that several units use).
_SKIP = ("shared", "fp16_fmaheavy", "uniform")
NAMES = {
    "tensor": "tensor-core pipe",
    "fma": "FMA pipe (FP32 multiply-add)",
    "alu": "ALU pipe (integer, logic, compare, conversion)",
    "fp64": "FP64 pipe (double precision)",
    "transcendental": "XU pipe (transcendentals: sin, cos, exp, rsqrt, conversions)",
    "lsu": "LSU pipe (loads and stores)",
    "other": "pipe",
}
_REDUNDANT = "and cut redundant work (recomputation the graph does twice, operations on values nobody reads)"
FIXES: dict[str, str] = {
    "tensor": "the tensor cores are the limit: keep GEMM dimensions multiples of the tensor-core tile (64/128) so "
    "no tile runs part-empty, fuse the epilogue into the GEMM, " + _REDUNDANT,
    "fma": "the FP32 FMA pipe is the limit: move matmul-shaped work onto the tensor cores (bf16/fp16 autocast, "
    "TF32 via torch.backends.cuda.matmul.allow_tf32), use packed half2/bfloat162 arithmetic, " + _REDUNDANT,
    "alu": "the integer/logic ALU is the limit: cut index arithmetic (precompute offsets, powers of two for / and %, "
    "32-bit instead of 64-bit indices), avoid type conversions and predication-heavy branches, " + _REDUNDANT,
    "fp64": "the FP64 pipe is the limit: compute in FP32 where accuracy allows (most GPUs run FP64 at 1/2 to 1/64 "
    "of FP32), keep float literals single precision (1.0f), " + _REDUNDANT,
    "transcendental": "the XU (transcendental) unit is the limit: use the fast intrinsics (__expf, __sinf, rsqrtf; "
    "--use_fast_math), hoist transcendentals out of loops, cut int<->float conversions, " + _REDUNDANT,
    "lsu": "the load/store unit is the limit: issue fewer, wider loads (128-bit vectors), keep reused values in "
    "registers, stage tiles in shared memory once, " + _REDUNDANT,
    "other": "look at the Compute Workload Analysis section for the unit that issues most, " + _REDUNDANT,
}
SHORT: dict[str, str] = {
    "tensor": "tensor pipe: tile-aligned dims, fuse epilogue",
    "fma": "FMA pipe: move to tensor cores (bf16/TF32), half2",
    "alu": "ALU pipe: cut index math and conversions",
    "fp64": "FP64 pipe: compute in FP32",
    "transcendental": "XU pipe: fast intrinsics, hoist exp/sin",
    "lsu": "LSU pipe: wider loads, registers, shared memory",
    "other": "see compute workload analysis; cut redundant work",
}
# The pipes Compute Workload Analysis reports (ncu's sections), each as issued instructions and active cycles:
# the metrics the report readers keep (fleetbench.profile.ncu.model.WANTED).
PIPES = ("alu", "fma", "fmaheavy", "fmalite", "fp16", "fp64", "xu", "lsu", "adu", "cbu", "uniform", "tex", "tensor",
         "tensor_op_hmma", "tensor_op_imma", "tensor_op_dmma", "tensor_op_gmma")  # fmt: skip
PIPE_METRICS: tuple[str, ...] = tuple(
    metric
    for pipe in PIPES
    for metric in (
        f"sm__inst_executed_pipe_{pipe}.avg.pct_of_peak_sustained_active",
        f"sm__pipe_{pipe}_cycles_active.avg.pct_of_peak_sustained_active",
    )
)
# NVIDIA's HighPipeUtilization rule: "ALU is the highest-utilized pipeline (55.7%) based on active cycles ..."
_RULE = re.compile(r"\b([A-Za-z0-9]+) is the highest-utilized pipeline \(([0-9.]+)%\)")
# A tensor pipe this busy makes the kernel a tensor-core kernel, whatever its name says.
TENSOR_KERNEL_AT = 0.05


@dataclass(frozen=True)
class Pipe:
    """The busiest pipe of a launch: its family, the metric's own pipe name, utilisation 0-1 and the metric."""

    family: str
    name: str
    utilisation: float
    metric: str

    @property
    def said(self) -> str:
        """'ALU pipe (...) 71% (sm__inst_executed_pipe_alu...)'."""
        return f"{NAMES[self.family]} {self.utilisation * 100:.0f}% busy ({self.metric})"


def family(pipe: str) -> str:
    """The family of a pipe as its metric names it ('fmaheavy' -> 'fma', 'tensor_op_hmma' -> 'tensor')."""
    return next((fam for prefix, fam in FAMILIES if pipe.startswith(prefix)), "other")


def pipe_figures(metrics: dict[str, Any]) -> list[Pipe]:
    """Every pipe utilisation the report has for a launch, as Pipe values (finite figures only)."""
    found = []
    for name, value in metrics.items():
        match = _PIPE_METRIC.match(name)
        if match is None or not isinstance(value, float | int) or not math.isfinite(value):
            continue
        pipe = match["issued"] or match["active"]
        if pipe in _SKIP or pipe.endswith("_pred_on"):
            continue
        found.append(Pipe(family(pipe), pipe, float(value) / 100.0, name))
    return found


def busiest_pipe(metrics: dict[str, Any], rules: Iterable[RuleResult] = ()) -> Pipe | None:
    """The pipe with the highest utilisation (issued or active cycles); else the pipe NVIDIA's HighPipeUtilization
    rule names (console logs and exports carry its text, not the metrics); None without either."""
    figures = pipe_figures(metrics)
    if figures:
        return max(figures, key=lambda p: (p.utilisation, p.family != "other", p.family == "tensor"))
    for rule in rules:
        match = _RULE.search(rule.message)
        if match is not None:
            pipe = match[1].lower()
            return Pipe(
                family(pipe), pipe, float(match[2]) / 100.0, f"NVIDIA {rule.rule or 'HighPipeUtilization'} rule"
            )
    return None


def fp8_advice(sheet: DatasheetPeak | None) -> str | None:
    """The lower-precision step a tensor-core GEMM can take on this GPU, or None where it has no FP8."""
    if sheet is None or not sheet.has_fp8:
        return None
    fp4 = " or NVFP4/MXFP4" if sheet.has_fp4 else ""
    return f"train the GEMMs in FP8{fp4} ({sheet.model} has FP8 tensor cores: train.float8 with torchao)"


def compute_fix(
    pipe: Pipe | None,
    tensor_active: float | None,
    tensor_named: bool,
    sheet: DatasheetPeak | None,
    simt_gemm: bool = False,
) -> tuple[str, str, str]:
    """A compute-bound launch's (reason clause, fix, short fix): its busiest pipe's fix, FP8 only where it fits.

    A tensor-core GEMM is a launch whose busiest pipe is the tensor pipe, or, without pipe figures, one
    whose tensor pipe is active or whose name carries MMA evidence; `simt_gemm`: without pipe figures, its
    name says an FP32 SIMT GEMM (cuBLAS/CUTLASS `sgemm`, `simt`), the FMA pipe's work.
    """
    if pipe is not None:
        tensor_gemm = pipe.family == "tensor" or (tensor_active or 0.0) >= TENSOR_KERNEL_AT
        fix, short, reason = FIXES[pipe.family], SHORT[pipe.family], f"busiest: {pipe.said}"
    elif simt_gemm:
        tensor_gemm = False
        fix, short = FIXES["fma"], SHORT["fma"]
        reason = "no pipe figures in the report; its name says an FP32 SIMT GEMM (the FMA pipe's work)"
    else:
        tensor_gemm = tensor_named or (tensor_active or 0.0) >= TENSOR_KERNEL_AT
        fix = "no pipe utilisation in the report: capture --section ComputeWorkloadAnalysis to name the busy unit, " + (
            _REDUNDANT
        )
        short, reason = "capture ComputeWorkloadAnalysis; cut redundant work", ""
    lower = fp8_advice(sheet) if tensor_gemm and (pipe is None or pipe.family == "tensor") else None
    if lower:
        fix, short = f"{fix}; {lower}", f"{short}; FP8"
    return reason, fix, short
