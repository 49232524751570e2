"""Per-kernel figures and classes from real Nsight Compute reports, checked against ncu_report itself."""

from __future__ import annotations

from typing import Any

import pytest

from fleetbench.profile.classify import Thresholds
from fleetbench.profile.ncu.readers import read_report
from fleetbench.profile.ncu.summary import summarize_report
from testdata import get_test_data_dir

pytestmark = pytest.mark.realdata

FIXTURES = get_test_data_dir() / "ncu-rep"


@pytest.fixture(scope="module")
def ncu_report() -> Any:
    return pytest.importorskip(
        "ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package (pip install 'fleetbench[ncu]')"
    )


def first_action(ncu_report: Any, name: str) -> Any:
    return ncu_report.load_report(str(FIXTURES / name)).range_by_idx(0).action_by_idx(0)


@pytest.mark.parametrize(
    "name", ["gtx1660s_naive_gemm.ncu-rep", "t4_matrix_addition2d.ncu-rep", "a100_cutlass_gemm.ncu-rep"]
)
def test_flops_bytes_and_intensity_follow_ncus_roofline_formula(ncu_report: Any, name: str) -> None:
    action = first_action(ncu_report, name)

    def value(metric: str) -> float:
        return float(action.metric_by_name(metric).as_double())

    seconds = value("gpu__time_duration.sum") * 1e-9
    per_cycle = sum(
        value(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed") * weight
        for op, weight in (("fadd", 1), ("fmul", 1), ("ffma", 2), ("dadd", 1), ("dmul", 1), ("dfma", 2))
    )
    flops = per_cycle * value("smsp__cycles_elapsed.avg.per_second") * seconds
    dram = value("dram__bytes_read.sum") + value("dram__bytes_write.sum")
    kernel = summarize_report(read_report(FIXTURES / name)).kernels[0]
    assert kernel.duration_s == pytest.approx(seconds)
    assert kernel.flops == pytest.approx(flops)
    assert kernel.flop_precisions[:2] == ["fp32", "fp64"]
    assert kernel.dram_bytes == pytest.approx(dram)
    assert kernel.arithmetic_intensity == pytest.approx(flops / dram)
    assert kernel.compute_sol == pytest.approx(value("sm__throughput.avg.pct_of_peak_sustained_elapsed") / 100)
    assert kernel.memory_sol == pytest.approx(
        value("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed") / 100
    )
    assert kernel.dram_sol == pytest.approx(value("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed") / 100)
    assert kernel.peak_fp32_flop_per_second == pytest.approx(
        2
        * value("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained")
        * value("sm__cycles_elapsed.avg.per_second")
    )
    assert kernel.peak_dram_bytes_per_second == pytest.approx(
        value("dram__bytes.sum.peak_sustained") * value("dram__cycles_elapsed.avg.per_second")
    )


def test_peaks_from_counters_are_the_devices_own(ncu_report: Any) -> None:
    a100 = summarize_report(read_report(FIXTURES / "a100_cutlass_gemm.ncu-rep")).kernels[0]
    # 1280 B/cycle at the 1.5 GHz memory clock: the A100 80GB PCIe's 1.92 TB/s (datasheet: 1,935 GB/s)
    assert a100.peak_dram_bytes_per_second == pytest.approx(1.92e12, rel=0.01)
    gtx = summarize_report(read_report(FIXTURES / "gtx1660s_naive_gemm.ncu-rep")).kernels[0]
    assert gtx.peak_dram_bytes_per_second == pytest.approx(336e9, rel=0.01)  # GTX 1660 SUPER: 336 GB/s


def test_classes_of_real_kernels(ncu_report: Any) -> None:
    def classes(name: str) -> dict[str, str]:
        return {g.short: g.cls for g in summarize_report(read_report(FIXTURES / name)).groups}

    assert classes("rtx2080ti_kernelA_kernelC.ncu-rep") == {"kernel_A": "compute_bound", "kernel_C": "latency_bound"}
    warptiling = classes("a10g_sgemm_warptiling.ncu-rep")
    assert warptiling["one_warptiling_tn"] == "memory_bound"  # compute 14 %, memory 77 %
    assert warptiling["cutlass::Kernel"] == "compute_bound"  # compute 79 %, memory 42 %
    assert warptiling["one_warptiling"] == "balanced"
    assert classes("gh200_elementwise.ncu-rep") == {"distribution_elementwise_grid_stride_kernel": "unknown"}


def test_grouping_adds_durations_and_weights_utilisation(ncu_report: Any) -> None:
    summary = summarize_report(read_report(FIXTURES / "a10g_sgemm_warptiling.ncu-rep"))
    group = next(g for g in summary.groups if g.short == "cutlass::Kernel")
    members = [k for k in summary.kernels if k.label == group.label]
    assert group.launches == len(members) == 2
    total = sum(k.duration_s or 0 for k in members)
    assert group.duration_s == pytest.approx(total)
    weighted = sum((k.compute_sol or 0) * (k.duration_s or 0) for k in members) / total
    assert group.compute_sol == pytest.approx(weighted)
    assert summary.groups == sorted(summary.groups, key=lambda g: g.duration_s or 0, reverse=True)


def test_thresholds_change_the_class(ncu_report: Any) -> None:
    report = read_report(FIXTURES / "t4_matrix_addition2d.ncu-rep")  # compute 6 %, memory 50 %
    assert summarize_report(report).kernels[0].cls == "latency_bound"
    strict = Thresholds(latency_bound_below=0.45)  # memory 50 % is then above it and 44 points ahead
    kernel = summarize_report(report, strict).kernels[0]
    assert kernel.cls == "memory_bound"
    # NVIDIA's rule (60 %) says Latency Issue: the disagreement is shown, and why
    assert kernel.nvidia_class == "latency_bound" and kernel.disagreement is not None
    assert kernel.disagreement_why is not None and "profile.thresholds" in kernel.disagreement_why
