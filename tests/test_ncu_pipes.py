"""Compute-bound advice that fits the kernel: the busiest pipe named from the report, FP8 only where it fits.

On the real reports and exports of the test data (tests/testdata.py) every compute-bound launch is
checked against its own pipe figures, read here from the metrics with a pattern of this test's own:
the pipe named is the one with the highest utilisation, and FP8/FP4 advice appears only for a launch
whose busiest pipe is the tensor pipe on a GPU whose GPU-table entry has FP8. The PyTorch
random-number kernels (the ALU pipe busy, the tensor pipe idle) and the FP32 sgemm on an A10G (no
FP8) were told "FP8/NVFP4" before; they are not now, and the L4's fp16 GEMM, named as an L4, is.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleetbench.gpus import datasheet_peak
from fleetbench.profile.ncu.pipes import Pipe, compute_fix, family
from fleetbench.profile.ncu.readers import read_report
from fleetbench.profile.ncu.summary import KernelSummary, summarize_report
from testdata import listed, missing_reason

FILES = [
    p
    for p in listed("ncu-rep", ".ncu-rep") + listed("ncu-csv", ".csv") + listed("ncu-console", ".txt")
    if p.name != "b200_raw_failed_capture.csv"
]
PIPE = re.compile(r"^sm__(?:inst_executed_pipe_|pipe_)(\w+?)(?:_cycles_active)?\.avg\.pct_of_peak_sustained_active$")


def _compute_bound(gpu: str | None = None) -> list[tuple[Path, KernelSummary, dict[str, float]]]:
    if (reason := missing_reason()) is not None:
        pytest.skip(reason)
    pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")
    found = []
    for path in FILES:
        report = read_report(path)
        summary = summarize_report(report, device_name=gpu)
        for kernel, raw in zip(summary.kernels, report.kernels, strict=True):
            if kernel.cls == "compute_bound":
                figures = {
                    name: float(value)
                    for name, value in raw.metrics.items()
                    if PIPE.match(name) and isinstance(value, float | int)
                }
                found.append((path, kernel, figures))
    return found


@pytest.mark.realdata
def test_random_number_kernels_and_the_a10g_sgemm_are_not_told_fp8() -> None:
    launches = _compute_bound()
    rng = [k for _, k, _ in launches if "distribution_elementwise" in k.name]
    sgemm = [k for _, k, _ in launches if "sgemm" in k.name]
    assert len(rng) == 5 and len(sgemm) == 2  # over the test data: 3 launches on an H800, 2 on an L4; 2 on an A10G
    for kernel in rng:  # Philox and the distribution's transform: integer work, the tensor pipe idle
        assert kernel.pipe is not None and kernel.pipe.family == "alu", kernel.reason
        assert "index arithmetic" in kernel.fix
    for kernel in sgemm:  # FP32 SIMT GEMM on an A10G (no FP8, no pipe figures in the report)
        assert "A10G" in kernel.device and kernel.pipe is None
        assert "SIMT GEMM" in kernel.reason and "tensor cores" in kernel.fix
    for _path, kernel, _figures in launches:
        assert "FP8" not in kernel.fix and "NVFP4" not in kernel.fix and "FP8" not in kernel.fix_short, kernel.name
        assert "bigger GPU" not in kernel.fix


@pytest.mark.realdata
def test_the_pipe_named_is_the_busiest_of_the_report() -> None:
    named = 0
    for path, kernel, figures in _compute_bound():
        if figures:  # the report's pipe metrics: the highest of them, issued or active
            top = max(figures.values())
            assert kernel.pipe is not None and kernel.pipe.utilisation * 100 == pytest.approx(top), path.name
            named += 1
        elif kernel.pipe is not None:  # else NVIDIA's own rule names it, with its figure
            rule = next(r for r in kernel.rules if r.rule == "HighPipeUtilization")
            assert f"({kernel.pipe.utilisation * 100:.1f}%)" in rule.message
            assert rule.message.lower().startswith(kernel.pipe.name)
            named += 1
        if kernel.pipe is not None:
            assert f"{kernel.pipe.utilisation * 100:.0f}% busy" in kernel.reason, kernel.reason
    assert named >= 40


@pytest.mark.realdata
def test_a_tensor_core_gemm_on_an_fp8_gpu_is_told_fp8() -> None:
    """The L4 export's fp16 GEMM launches (tensor pipe the busiest, per NVIDIA's rule), named as an L4 (FP8)."""
    launches = _compute_bound("NVIDIA L4")
    gemms = [k for _, k, _ in launches if "s1688gemm" in k.name]
    assert len(gemms) == 35
    assert all(k.pipe is not None and k.pipe.family == "tensor" and "FP8" in k.fix for k in gemms)
    rng = [k for _, k, _ in launches if "distribution_elementwise" in k.name and "L4" in k.device]
    assert rng and all("FP8" not in k.fix for k in rng)  # same GPU, not a tensor-core kernel


H100, A100, A10G = (datasheet_peak(n) for n in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA A10G"))


def _pipe(fam: str, pct: float) -> Pipe:
    return Pipe(fam, fam, pct / 100, f"sm__inst_executed_pipe_{fam}.avg.pct_of_peak_sustained_active")


@pytest.mark.parametrize(
    ("pipe", "sheet", "fp8"),
    [
        (_pipe("tensor", 91), H100, True),  # a tensor-core GEMM on Hopper: FP8 fits
        (_pipe("tensor", 91), A100, False),  # Ampere has no FP8
        (_pipe("fma", 70), H100, False),  # FP32 on the FMA pipe: move it to the tensor cores first
        (_pipe("alu", 80), H100, False),
        (_pipe("tensor", 91), None, False),  # unknown GPU: no FP8 claim
    ],
)
def test_fp8_only_for_a_tensor_core_gemm_on_a_gpu_with_fp8(pipe: Pipe, sheet: object, fp8: bool) -> None:
    reason, fix, short = compute_fix(pipe, None, False, sheet)  # type: ignore[arg-type]
    assert ("FP8" in fix) == fp8 and ("FP8" in short) == fp8
    assert "redundant" in fix and f"{pipe.utilisation * 100:.0f}% busy" in reason


def test_each_pipe_gets_its_own_fix() -> None:
    fixes = {
        fam: compute_fix(_pipe(fam, 80), None, False, A10G)[1]
        for fam in ("fma", "alu", "fp64", "transcendental", "lsu")
    }
    assert "tensor cores" in fixes["fma"] and "index arithmetic" in fixes["alu"]
    assert "FP32" in fixes["fp64"] and "__expf" in fixes["transcendental"] and "wider loads" in fixes["lsu"]
    assert len(set(fixes.values())) == len(fixes)


def test_without_pipe_figures_the_fix_asks_for_them_and_uses_name_evidence() -> None:
    _reason, fix, _ = compute_fix(None, None, True, H100)
    assert "ComputeWorkloadAnalysis" in fix and "FP8" in fix  # MMA in the name, on Hopper
    _reason, fix, _ = compute_fix(None, 0.0, False, H100)
    assert "FP8" not in fix


def test_pipe_families_follow_the_metric_names() -> None:
    assert [family(p) for p in ("fmaheavy", "fma", "fp16", "alu", "fp64", "xu", "tensor_op_hmma", "lsu", "cbu")] == [
        "fma", "fma", "fma", "alu", "fp64", "transcendental", "tensor", "lsu", "other"
    ]  # fmt: skip
