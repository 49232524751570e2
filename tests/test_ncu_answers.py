"""What the ncu summary answers on the reports users really bring, checked against the files and ncu_report.

Kernels ncu did not measure, captures with a narrow metric list, tensor-core work, and NVIDIA's own
guided analysis beside our class: each on real reports in tests/data (see its README).
"""

from __future__ import annotations

import json
import math
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from fleetbench.profile.classify import Thresholds
from fleetbench.profile.ncu.guidance import bottleneck, disagreement, top_rules
from fleetbench.profile.ncu.readers import read_report
from fleetbench.profile.ncu.rules import plain_text
from fleetbench.profile.ncu.summary import summarize_path, summarize_report
from fleetbench.profile.ncu.tensor import flops_per_instruction
from fleetbench.profile.roofline.analysis import ncu_roofline
from testdata import get_test_data_dir

pytestmark = pytest.mark.realdata

DATA = get_test_data_dir()
H800 = DATA / "ncu-rep" / "h800_flash_fwd_nan_unmeasured.ncu-rep"
A100_REP = DATA / "ncu-rep" / "a100_cutlass_gemm.ncu-rep"
A10_REP = DATA / "ncu-rep" / "a10_inference_105_kernels.ncu-rep"
A10G_REP = DATA / "ncu-rep" / "a10g_sgemm_warptiling.ncu-rep"
A100_CSV = DATA / "ncu-csv" / "a100_details_cutlass_cublas_tensor_gemm.csv"
V100_CSV = DATA / "ncu-csv" / "v100_details_cutlass_cublas_tensor_gemm.csv"
SAXPY_CSV = DATA / "ncu-csv" / "rtx5070_details_saxpy.csv"
RTX5090_GEMM = DATA / "ncu-csv" / "rtx5090_details_cutlass_bf16_gemm_narrow_metrics.csv"
# The source program of the A100/V100 exports multiplies two 20480 x 20480 matrices (its README and
# printed output); every GEMM launch is therefore 2 * 20480^3 FLOPs.
GEMM_FLOPS = 2 * 20480**3
MEMORY_SOL_METRIC = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"

ncu_report = pytest.importorskip("ncu_report")


def _action(path: Path, index: int) -> object:
    return ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(index)


# --- kernels ncu did not measure ---------------------------------------------------------------------
def test_a_kernel_ncu_returned_nan_for_is_not_measured_and_left_out_of_every_aggregate() -> None:
    summary = summarize_path(H800)
    flash = [k for k in summary.kernels if k.short.startswith("flash_fwd")]
    assert len(flash) == 1
    kernel = flash[0]
    # ncu_report itself reads NaN for this launch's duration and SOL, finite figures for the others
    action = _action(H800, kernel.index)
    assert math.isnan(action.metric_by_name("gpu__time_duration.sum").as_double())
    assert math.isfinite(_action(H800, 0).metric_by_name("gpu__time_duration.sum").as_double())
    assert kernel.cls == "not_measured"
    assert "NaN" in kernel.reason and "duration" in kernel.reason and "compute SOL" in kernel.reason
    assert kernel.duration_s is None and kernel.compute_sol is None and kernel.memory_sol is None
    group = next(g for g in summary.groups if g.label == kernel.label)
    assert group.cls == "not_measured" and group.not_measured == 1 and group.duration_s is None
    measured = [k for k in summary.kernels if k.cls != "not_measured"]
    assert len(measured) == 4 and all(k.duration_s for k in measured)
    roofline = ncu_roofline(summary)
    assert all(not p.short.startswith("flash_fwd") for p in roofline.points)
    assert any("did not measure" in note and "flash_fwd_kernel" in note for note in roofline.notes)


def test_a_summary_with_an_unmeasured_kernel_is_strict_json() -> None:
    summary = summarize_path(H800)

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-strict JSON constant {constant}")

    text = json.dumps(summary.to_dict(), allow_nan=False, default=str)
    assert json.loads(text, parse_constant=refuse)["kernels"][4]["cls"] == "not_measured"


def test_a_csv_whose_values_are_nan_is_not_measured_not_unknown(tmp_path: Path) -> None:
    damaged = tmp_path / "saxpy_nan.csv"
    lines = SAXPY_CSV.read_text(encoding="utf-8-sig").splitlines()
    out = []
    for line in lines:
        if line.startswith('"0"') and ('"gpu__time_duration.sum"' in line or '"sm__throughput' in line):
            line = line[: line.rstrip().rindex(',"')] + ',"nan"'
        out.append(line)
    damaged.write_text("\n".join(out) + "\n", encoding="utf-8")
    kernel = summarize_path(damaged).kernels[0]
    assert kernel.cls == "not_measured"
    assert "duration" in kernel.reason and "compute SOL" in kernel.reason


@pytest.mark.parametrize(
    ("metric", "figure", "said"),
    [
        (MEMORY_SOL_METRIC, math.inf, "is inf, beyond 1000 %"),
        (MEMORY_SOL_METRIC, 5000.0, "is 5000, beyond 1000 %"),
        ("gpu__time_duration.sum", 1e300, "is 1e+300, beyond 1e+30 in its base unit"),
    ],
)
def test_a_report_figure_past_any_measurement_is_left_out_with_a_warning(
    tmp_path: Path, metric: str, figure: float, said: str
) -> None:
    # a real report with one launch's figure overwritten where the file stores it (protobuf keeps a double
    # as its 8 little-endian bytes), as damage would leave it
    source = DATA / "ncu-rep" / "t4_matrix_addition2d.ncu-rep"
    stored = _action(source, 0).metric_by_name(metric).as_double()
    damaged = tmp_path / "t4_damaged.ncu-rep"
    damaged.write_bytes(source.read_bytes().replace(struct.pack("<d", stored), struct.pack("<d", figure)))
    assert _action(damaged, 0).metric_by_name(metric).as_double() == figure  # ncu_report reads the damage
    report = read_report(damaged)
    assert metric not in report.kernels[0].metrics
    assert any(metric in note and said in note and "left out" in note for note in report.notes), report.notes
    kernel = summarize_path(damaged).kernels[0]
    if metric == MEMORY_SOL_METRIC:
        assert kernel.memory_sol is None
    else:  # the duration comes again from the launch's cycles and clock, never from the damaged figure
        assert kernel.duration_s == pytest.approx(stored * 1e-9, rel=0.01)


# --- narrow metric sets ------------------------------------------------------------------------------
def test_dram_throughput_is_derived_from_bytes_duration_and_the_datasheet_peak() -> None:
    # the export's own figures: 134,221,568 + 43,631,104 bytes in 292,928 ns; RTX 5070: 672 GB/s
    expected = (134_221_568 + 43_631_104) / 292_928e-9 / 672e9
    kernel = summarize_path(SAXPY_CSV, device_name="NVIDIA GeForce RTX 5070").kernels[0]
    assert kernel.dram_sol == pytest.approx(expected)
    assert "dram_sol" in kernel.derived
    assert "datasheet GeForce RTX 5070" in kernel.derived["dram_sol"]
    assert "gpu__time_duration.sum" in kernel.derived["dram_sol"]
    # compute SOL 22.3 % and DRAM 90 %: the seed's rule needs only these two
    assert kernel.compute_sol == pytest.approx(0.223)
    assert kernel.cls == "memory_bound"
    assert "DRAM throughput (derived)" in kernel.reason


def test_without_a_known_device_nothing_is_derived_and_the_summary_says_how_to_name_it() -> None:
    kernel = summarize_path(SAXPY_CSV).kernels[0]
    assert kernel.dram_sol is None and kernel.derived == {}
    assert kernel.cls == "unknown"
    assert any("--gpu" in absent for absent in kernel.absent)


def test_a_measured_dram_throughput_under_its_other_name_is_used_not_derived() -> None:
    kernel = summarize_path(RTX5090_GEMM).kernels[0]
    assert kernel.dram_sol == pytest.approx(0.0896)
    assert "dram_sol" not in kernel.derived
    assert kernel.cls == "latency_bound"  # compute 32 %, DRAM 9 %


def test_duration_is_derived_from_sm_cycles_where_the_export_has_no_gpu_time() -> None:
    report = read_report(A100_CSV)
    kernel = summarize_report(report).kernels[4]
    cycles = report.kernels[4].metrics["sm__cycles_elapsed.avg"]
    hz = report.kernels[4].metrics["sm__cycles_elapsed.avg.per_second"]
    assert isinstance(cycles, float) and isinstance(hz, float)
    assert kernel.duration_s == pytest.approx(cycles / hz)
    assert "sm__cycles_elapsed.avg" in kernel.derived["duration_s"]


# --- tensor cores ------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [A100_CSV, V100_CSV], ids=["a100", "v100"])
def test_every_gemm_launch_counts_exactly_the_gemms_flops_whatever_its_instruction_shape(path: Path) -> None:
    summary = summarize_path(path)
    gemms = [k for k in summary.kernels if "Initialize" not in k.name]
    assert len(gemms) == 7
    for kernel in gemms:
        assert kernel.tensor_flops == pytest.approx(GEMM_FLOPS, rel=1e-9), kernel.name
        assert "tensor" in kernel.flop_precisions
    # the matrix initialisation does no tensor work and claims no FLOPs it did not count
    init = [k for k in summary.kernels if "Initialize" in k.name]
    assert init and all(k.flops is None and k.tensor_flops == 0 for k in init)


def test_the_instruction_shape_comes_from_the_kernel_name() -> None:
    a100 = read_report(A100_CSV)
    cutlass, cublas = a100.kernels[4].name, a100.kernels[10].name
    assert flops_per_instruction(cutlass, "device 0 (CC 8.0)") == (2 * 16 * 8 * 8, None)  # GemmShape<16, 8, 8>
    assert flops_per_instruction(cublas, "device 0 (CC 8.0)") == (2 * 16 * 8 * 16, None)  # s16816gemm
    assert flops_per_instruction("volta_h884gemm_64x64_nn", "")[0] == 512
    assert flops_per_instruction("cutlass::Kernel<GemmShape<16, 16, 4>>", "device 0 (CC 7.0)")[0] == 512
    flops, caveat = flops_per_instruction("my_kernel", "device 0 (CC 9.0)")
    assert flops == 512 and caveat is not None and "unknown" in caveat


def test_the_tensor_path_op_counters_are_taken_as_they_are() -> None:
    kernel = summarize_path(RTX5090_GEMM).kernels[0]
    assert kernel.tensor_flops == pytest.approx(45_902_462_976)
    assert kernel.duration_s == pytest.approx(404.70e-6)


def test_tensor_kernels_sit_under_the_tensor_roof_and_never_above_it() -> None:
    summary = summarize_path(A100_CSV, device_name="NVIDIA A100-PCIE-40GB")
    roofline = ncu_roofline(summary)
    assert roofline.peaks["flop_per_second"]["tensor"] == pytest.approx(312e12)
    gemm_points = [p for p in roofline.points if "Initialize" not in p.name]
    assert len(gemm_points) == 2
    for point in gemm_points:
        assert point.roof.startswith("tensor")
        assert 0.3 < point.roof_fraction <= 1.0
    cutlass = next(g for g in summary.groups if g.short.startswith("cutlass"))
    assert "compute_sol" in cutlass.derived and "boost clock" in summary.kernels[4].derived["compute_sol"]


def test_tensor_work_the_report_does_not_count_is_flagged_not_plotted_silently() -> None:
    summary = summarize_path(A100_REP)
    cutlass = next(k for k in summary.kernels if k.short.startswith("cutlass"))
    active = _action(A100_REP, cutlass.index).metric_by_name(
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
    )
    assert cutlass.tensor_pipe_active == pytest.approx(active.as_double() / 100)
    assert cutlass.tensor_flops is None and cutlass.tensor_uncounted is not None
    roofline = ncu_roofline(summary)
    point = next(p for p in roofline.points if p.short.startswith("cutlass"))
    assert point.tensor_uncounted
    assert any("may sit far too low" in note and "cutlass" in note for note in roofline.notes)
    reference = next(k for k in summary.kernels if k.short.startswith("ReferenceGemm"))
    assert reference.tensor_uncounted is None  # its tensor pipe was idle


# --- NVIDIA's guided analysis ------------------------------------------------------------------------
def test_every_rule_result_of_the_report_is_carried_as_ncu_report_gives_it() -> None:
    summary = summarize_path(A10_REP)
    assert len(summary.kernels) == 105
    for kernel in summary.kernels[:20]:
        expected = [r for r in _action(A10_REP, kernel.index).rule_results_as_dicts() if r["rule_message"]]
        assert [r.rule for r in kernel.rules] == [r["rule_identifier"] for r in expected]
        for ours, theirs in zip(kernel.rules, expected, strict=True):
            assert ours.message == plain_text(theirs["rule_message"]["message"])
            speedup = (theirs.get("speedup_estimation") or {}).get("speedup")
            assert ours.speedup_pct == (pytest.approx(speedup) if speedup is not None else None)


def test_the_bottleneck_rule_and_our_class_agree_on_real_kernels_and_disagreements_are_shown() -> None:
    summary = summarize_path(A10G_REP)
    assert all(k.disagreement is None for k in summary.kernels)
    # a site that calls anything below 95 % latency-bound contradicts NVIDIA's "High Compute Throughput"
    strict = summarize_path(A10G_REP, Thresholds(latency_bound_below=0.95, high_throughput_at=0.96))
    contradicted = [k for k in strict.kernels if k.disagreement]
    assert contradicted
    for kernel in contradicted:
        rule = bottleneck(kernel.rules)
        assert rule is not None and rule.rule == "SOLBottleneck"
        assert kernel.cls == "latency_bound" and kernel.nvidia_class in ("compute_bound", "memory_bound", "balanced")
        assert kernel.nvidia_class != kernel.cls
        assert rule.title in ("Balanced Throughput", "High Compute Throughput", "High Memory Throughput")
        assert disagreement(kernel.cls, kernel.rules, kernel.disagreement_why) == kernel.disagreement
        assert (
            kernel.disagreement_why is not None and "profile.thresholds set to 0.96/0.95/0.1" in kernel.disagreement_why
        )
        assert kernel.cls in kernel.disagreement and rule.title[:20] in kernel.disagreement


def test_top_rules_put_optimisations_with_the_largest_estimated_speedup_first() -> None:
    kernel = summarize_path(A10_REP).kernels[0]
    ranked = top_rules(kernel.rules)
    speedups = [r.speedup_pct or 0.0 for r in ranked if r.kind == "OPT"]
    assert speedups == sorted(speedups, reverse=True)
    assert ranked[0].rule == "Occupancy" and ranked[0].speedup_pct == pytest.approx(13.41, abs=0.01)


def test_the_fixture_copy_is_what_the_summary_reads(tmp_path: Path) -> None:
    # summaries never write next to the report they read
    copy = tmp_path / H800.name
    shutil.copy(H800, copy)
    before = sorted(tmp_path.iterdir())
    summarize_path(copy)
    assert sorted(tmp_path.iterdir()) == before


def test_rule_rows_of_a_details_csv_become_rules_beside_our_class() -> None:
    lines = [ln for ln in RTX5090_GEMM.read_text(encoding="utf-8").splitlines() if '"SOLBottleneck"' in ln]
    assert len(lines) == 1  # the export's own bottleneck row
    kernel = summarize_path(RTX5090_GEMM).kernels[0]
    rules = {rule.rule: rule for rule in kernel.rules}
    assert {"SOLBottleneck", "SOLFPRoofline", "IssueSlotUtilization", "TheoreticalOccupancy"} <= set(rules)
    assert rules["SOLBottleneck"].kind == "OPT" and "latency issues" in rules["SOLBottleneck"].message
    assert rules["TheoreticalOccupancy"].speedup_pct == pytest.approx(67.54)
    assert rules["TheoreticalOccupancy"].speedup_type == "global"
    # our latency_bound and NVIDIA's "low compute throughput and memory bandwidth" agree
    assert kernel.cls == "latency_bound" and kernel.disagreement is None


# --- through the command line ------------------------------------------------------------------------
def test_summarize_names_the_gpu_derives_and_says_what_it_derived(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert fleetbench("ncu", "summarize", str(SAXPY_CSV), "--gpu", "NVIDIA GeForce RTX 5070") == 0
    out = capsys.readouterr().out
    assert "memory_bound" in out and "dram_sol derived" in out and "672 GB/s" in out
    assert fleetbench("ncu", "summarize", str(SAXPY_CSV), "--gpu", "NVIDIA GeForce RTX 5070", "--json") == 0
    kernel = json.loads(capsys.readouterr().out)["kernels"][0]
    assert kernel["cls"] == "memory_bound" and "dram_sol" in kernel["derived"]


def test_summarize_shows_nvidias_rules_and_json_carries_every_one(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert fleetbench("ncu", "summarize", str(A10G_REP)) == 0
    out = capsys.readouterr().out
    assert "NVIDIA's guided analysis" in out and "SOLBottleneck" in out and "High Compute Throughput" in out
    assert fleetbench("ncu", "summarize", str(A10G_REP), "--json") == 0
    kernels = json.loads(capsys.readouterr().out)["kernels"]
    expected = [r for r in _action(A10G_REP, 0).rule_results_as_dicts() if r["rule_message"]]
    assert [r["rule"] for r in kernels[0]["rules"]] == [r["rule_identifier"] for r in expected]


def test_a_contradiction_is_shown_with_both_verdicts(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("--set", "profile.thresholds.latency_bound_below=0.95")
    args += ("--set", "profile.thresholds.high_throughput_at=0.96")
    assert fleetbench("ncu", "summarize", str(A10G_REP), *args) == 0
    out = capsys.readouterr().out
    assert "latency_bound !" in out
    assert "class and NVIDIA disagree (ours: latency_bound; NVIDIA SOLBottleneck: High" in out


def test_the_roofline_of_a_narrow_capture_draws_the_tensor_roof(fleetbench: Callable[..., int], tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert (
        fleetbench("roofline", "--ncu", str(A100_CSV), "--gpu", "NVIDIA A100-PCIE-40GB", "--results-dir", str(results))
        == 0
    )
    (chart,) = results.glob("*/roofline/roofline.json")
    data = json.loads(chart.read_text())
    assert data["peaks"]["flop_per_second"]["tensor"] == pytest.approx(312e12)
    assert {p["roof"].split(" ")[0] for p in data["points"]} == {"tensor"}
    assert (chart.parent / "roofline.png").stat().st_size > 10_000
