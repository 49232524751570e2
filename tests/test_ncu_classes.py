"""Nsight Compute verdicts that agree with NVIDIA's: every export users have, the bound, the memory level.

Real files of the test data (tests/testdata.py) for each form: display-name `--page details` CSV
exports (L4 and RTX 5090), the L1/TEX-bound L4 console log, every report and export for the class
rule. Figures are asserted against the files' own numbers (read here with the csv module, converted
by hand) or ncu_report; classes against the documented rule (NVIDIA's SOLBottleneck, computed here
from the figures) and against NVIDIA's own verdict in the file. The --print-summary layouts have no
published capture in the data: their inputs are written here from the layout ncu prints (see
fleetbench.profile.ncu.console).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from fleetbench.errors import UserError
from fleetbench.profile.classify import LEVEL_FIXES, Thresholds, bound_class
from fleetbench.profile.ncu.agreement import Agreement
from fleetbench.profile.ncu.readers import read_report
from fleetbench.profile.ncu.summary import summarize_path, summarize_report
from testdata import get_test_data_dir, listed

DATA = get_test_data_dir()
L4_CSV = DATA / "ncu-csv" / "l4_details_full_torch_fp16_matmul.csv"
L2_COPY = DATA / "ncu-csv" / "rtx5090_sol_section_l2_bound_copy.csv"
FA_LOG = DATA / "ncu-console" / "l4_fa_kernel_l1tex_bound_full.txt"
TENSOR_LOG = DATA / "ncu-console" / "rtx3050ti_2mm_tensor_full_set.txt"
REDUCTIONS = DATA / "ncu-console" / "rtx3070_reductions_3_kernels.txt"
SAXPY = DATA / "ncu-csv" / "rtx5070_details_saxpy.csv"
GEMM_TILED = DATA / "ncu-csv" / "rtx5070_details_gemm_tiled.csv"
A100_REP = DATA / "ncu-rep" / "a100_cutlass_gemm.ncu-rep"
A10_REP = DATA / "ncu-rep" / "a10_inference_105_kernels.ncu-rep"
FAILED = DATA / "ncu-csv" / "b200_raw_failed_capture.csv"
TEXT_FILES = [p for p in listed("ncu-csv", ".csv") + listed("ncu-console", ".txt") if p.name != FAILED.name]
REPORTS = listed("ncu-rep", ".ncu-rep")

DURATION = "gpu__time_duration.sum"
COMPUTE = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
L1 = "l1tex__throughput.avg.pct_of_peak_sustained_active"
L2 = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
SM_HZ, DRAM_HZ = "sm__cycles_elapsed.avg.per_second", "dram__cycles_elapsed.avg.per_second"
DRAM_RATE, WAVES = "dram__bytes.sum.per_second", "launch__waves_per_multiprocessor"
GRID, BLOCK = "launch__grid_size", "launch__block_size"
# The SOL section's display names in the two exports, their metric, and the factor of the unit the files
# print them in (`usecond`, `us`: 1e3 ns; `cycle/nsecond`, `Ghz`: 1e9 Hz; `cycle/usecond`: 1e6 Hz).
SOL_ROWS = {
    "Duration": DURATION,
    "Compute (SM) Throughput": COMPUTE,
    "Memory Throughput": MEMORY,
    "DRAM Throughput": DRAM,
    "L1/TEX Cache Throughput": L1,
    "L2 Cache Throughput": L2,
    "SM Frequency": SM_HZ,
    "DRAM Frequency": DRAM_HZ,
}
UNITS = {"%": 1.0, "usecond": 1e3, "us": 1e3, "cycle/nsecond": 1e9, "Ghz": 1e9, "cycle/usecond": 1e6}


def needs_ncu_report() -> None:
    pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")


def sol_rows_of(path: Path) -> dict[str, dict[str, float]]:
    """The speed-of-light rows of a details export as the file prints them, per launch ID, in base units."""
    rows: dict[str, dict[str, float]] = {}
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(line for line in handle if not line.startswith("=="))
        header = next(reader)
        col = {name: index for index, name in enumerate(header)}
        for row in reader:
            if len(row) <= col["Metric Value"] or row[col["Section Name"]] != "GPU Speed Of Light Throughput":
                continue
            name, unit = row[col["Metric Name"]], row[col["Metric Unit"]]
            if name in SOL_ROWS:
                value = float(row[col["Metric Value"]].replace(",", "")) * UNITS[unit]
                rows.setdefault(row[col["ID"]], {})[SOL_ROWS[name]] = value
    return rows


# --- display-name `--page details` exports ----------------------------------------------------------
@pytest.mark.realdata
@pytest.mark.parametrize("path", [L4_CSV, L2_COPY], ids=lambda p: p.name)
def test_a_display_name_details_export_reads_every_figure_the_file_prints(path: Path) -> None:
    report = read_report(path)
    assert report.format == "csv-details" and not [n for n in report.notes if n.startswith("warning:")]
    expected = sol_rows_of(path)
    assert [k.id for k in report.kernels] == list(expected)
    for kernel in report.kernels:
        for metric, value in expected[kernel.id].items():
            assert kernel.metrics[metric] == pytest.approx(value, rel=1e-12), (kernel.id, metric)
    summary = summarize_report(report)
    assert all(k.cls not in ("unknown", "not_measured") for k in summary.kernels)
    assert all(k.fix_short and "--set full" not in k.fix for k in summary.kernels)


@pytest.mark.realdata
def test_the_l4_full_export_holds_37_launches_with_every_section_unit() -> None:
    report = read_report(L4_CSV)
    names = [k.name for k in report.kernels]
    assert len(names) == 37 and sum("distribution_elementwise_grid_stride_kernel" in n for n in names) == 2
    assert sum("ampere_fp16_s1688gemm_fp16_128x128_ldg8_f2f_stages_32x1_nn" in n for n in names) == 35
    first = report.kernels[0]
    # the file's rows for launch 0: SOL (cycle/nsecond, cycle/usecond, usecond, %), Memory Workload Analysis'
    # "Memory Throughput  Mbyte/second  161.03" (the DRAM bytes per second, not the SOL %), Launch Statistics
    assert first.metrics == pytest.approx(
        {
            DRAM_HZ: 6.23e9,
            SM_HZ: 800.28e6,
            MEMORY: 22.40,
            DRAM: 0.05,
            DURATION: 59.62e3,
            L1: 18.96,
            L2: 22.40,
            COMPUTE: 70.41,
            DRAM_RATE: 161.03e6,
            BLOCK: 256.0,
            GRID: 348.0,
            WAVES: 1.0,
        },
        rel=1e-12,
    )
    summary = summarize_report(report)
    gemm, rng = summary.groups  # the GEMM at 85 % compute: High Throughput; the RNG at 70 % vs 22 %: High Compute
    assert (gemm.name.startswith("ampere_fp16_s1688gemm"), gemm.launches, gemm.cls) == (True, 35, "compute_bound")
    assert ("distribution_elementwise" in rng.name, rng.launches, rng.cls) == (True, 2, "compute_bound")
    assert all(k.nvidia_class == k.cls and k.disagreement is None for k in summary.kernels)


@pytest.mark.realdata
def test_the_l2_bound_copy_is_memory_bound_on_l2_with_an_l2_fix() -> None:
    kernel = summarize_path(L2_COPY).kernels[0]
    assert (kernel.compute_sol, kernel.memory_sol, kernel.l2_sol) == pytest.approx((0.0802, 0.8855, 0.8855))
    assert kernel.duration_s == pytest.approx(40.03e-6)
    assert kernel.cls == "memory_bound" and kernel.level == "L2"
    assert "High Throughput" in kernel.reason and "L2 88.5%" in kernel.level_source
    assert kernel.fix == LEVEL_FIXES["L2"] and "HBM" not in kernel.fix and "FP8" not in kernel.fix
    # NVIDIA's rule row: "... Start by analyzing L2 in the Memory Workload Analysis section."
    assert (kernel.nvidia_class, kernel.nvidia_level) == ("memory_bound", "L2")


# --- the class rule on every file ------------------------------------------------------------------
def _check_rule(path: Path) -> None:
    report = read_report(path)
    summary = summarize_report(report)
    for kernel in summary.kernels:
        metrics = report.kernels[kernel.index].metrics
        c, m = metrics.get(COMPUTE), metrics.get(MEMORY)
        if not isinstance(c, float) or not isinstance(m, float) or math.isnan(c) or math.isnan(m):
            continue
        # the documented rule, on the file's own figures: NVIDIA's SOLBottleneck thresholds (80, 60, 10 points)
        if max(c, m) >= 80:
            expected = "compute_bound" if c >= m else "memory_bound"
        elif c < 60 and m < 60:
            expected = "latency_bound"
        elif abs(c - m) >= 10:
            expected = "compute_bound" if c > m else "memory_bound"
        else:
            expected = "balanced"
        assert kernel.cls == expected == bound_class(c / 100, m / 100)[0], (path.name, kernel.id, c, m)
        if max(c, m) >= 80:  # no high-throughput kernel is balanced
            assert kernel.cls in ("compute_bound", "memory_bound")
        if kernel.nvidia_class is not None:  # NVIDIA's own verdict in the file: the same
            assert kernel.cls == kernel.nvidia_class and kernel.disagreement is None, (path.name, kernel.id)


@pytest.mark.realdata
@pytest.mark.parametrize("path", TEXT_FILES, ids=lambda p: p.name)
def test_every_text_export_follows_the_documented_rule_and_nvidias_verdict(path: Path) -> None:
    _check_rule(path)


@pytest.mark.realdata
@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_every_report_follows_the_documented_rule_and_nvidias_verdict(path: Path) -> None:
    needs_ncu_report()
    _check_rule(path)


@pytest.mark.realdata
def test_over_every_file_no_disagreement_with_nvidia_is_unexplained() -> None:
    needs_ncu_report()
    agreement = Agreement()
    for path in REPORTS + TEXT_FILES:
        agreement.add(summarize_path(path), path.name)
    assert agreement.judged >= 170 and agreement.unexplained == []
    assert agreement.agree == agreement.judged  # at NVIDIA's thresholds, every judged launch agrees
    assert agreement.levels_judged > 10 and agreement.level_differences == []
    # with thresholds set away from NVIDIA's, the disagreements appear, each with its reason
    strict = Agreement()
    for path in REPORTS:
        strict.add(summarize_path(path, Thresholds(latency_bound_below=0.45)), path.name)
    assert strict.explained and not strict.unexplained  # e.g. the A10's kernels at 50 %: balanced, NVIDIA latency
    assert all("profile.thresholds set to 0.8/0.45/0.1" in line for line in strict.explained)


@pytest.mark.realdata
def test_kernels_at_80_to_98_percent_memory_with_21_to_38_percent_compute_are_memory_bound() -> None:
    needs_ncu_report()
    # the "balanced" kernels, from three files: each one NVIDIA calls High Throughput on memory
    cases = [
        (TENSOR_LOG, "f32_to_f16"),  # memory 80.3-81.2 %, compute 31.5-31.9 %
        (TENSOR_LOG, "wmma_kernel1"),  # memory 98.2 %, compute 34.6 %
        (REDUCTIONS, "reduce_ws"),  # memory 81.9 %, compute 21.0 %
        (A100_REP, "ReferenceGemm_kernel"),  # memory 85.5 %, compute 38.0 %
    ]
    for path, short in cases:
        for kernel in [k for k in summarize_path(path).kernels if k.short == short]:
            assert kernel.memory_sol is not None and kernel.memory_sol >= 0.80
            assert 0.20 < (kernel.compute_sol or 0) < 0.40
            assert kernel.cls == "memory_bound" and kernel.nvidia_class == "memory_bound", (path.name, short)


# --- the memory level -------------------------------------------------------------------------------
@pytest.mark.realdata
def test_the_level_comes_from_the_reports_breakdown_as_nvidias_rule_reads_it() -> None:
    needs_ncu_report()
    import ncu_report

    kernel = next(k for k in summarize_path(A100_REP).kernels if k.short == "ReferenceGemm_kernel")
    action = ncu_report.load_report(str(A100_REP)).range_by_idx(0).action_by_idx(kernel.index)
    listed_names = action.metric_by_name(
        "breakdown:gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
    ).as_string()
    values = {name: action.metric_by_name(name).as_double() for name in listed_names.split(",")}
    top = max(values, key=lambda name: values[name])
    assert top.startswith("l1tex__data_pipe_lsu_wavefronts")  # NVIDIA's get_max_pipe: "L1"
    assert kernel.level == "L1" and kernel.nvidia_level == "L1"
    assert f"{values[top]:.1f}%" in (kernel.level_source or "") and "bank conflicts" in kernel.fix
    assert "HBM" not in kernel.fix and "FP8" not in kernel.fix


@pytest.mark.realdata
def test_an_l1tex_bound_kernel_is_told_about_l1_not_hbm() -> None:
    """The L4 flash-attention log: L1/TEX 91.96 %, memory SOL 68.35 %, L2 2.66 %, DRAM 0.15 %."""
    report = read_report(FA_LOG)
    assert report.format == "console" and not [n for n in report.notes if n.startswith("warning:")]
    (launch,) = report.kernels
    assert launch.name.startswith("void fa_kernel<64, 32, 256, 32, 4, 1>(const float *, const float *")
    assert launch.metrics[L1] == 91.96 and launch.metrics[MEMORY] == 68.35 and launch.metrics[WAVES] == 0.74
    assert launch.metrics[DURATION] == pytest.approx(7.85e6) and launch.metrics[DRAM_RATE] == pytest.approx(456.46e6)
    (kernel,) = summarize_report(report).kernels
    # NVIDIA: "Compute and Memory are well-balanced" (both 68.35 %); the memory side's level is L1, stated
    assert kernel.cls == "balanced" and kernel.nvidia_class == "balanced" and kernel.disagreement is None
    assert kernel.level == "L1" and "L1 92.0%" in kernel.reason and "DRAM 0.1%" in kernel.reason
    assert LEVEL_FIXES["L1"] in kernel.fix and "HBM" not in kernel.fix_short


def test_a_kernel_at_99_6_percent_memory_with_0_03_percent_dram_is_sent_to_l1(tmp_path: Path) -> None:
    """The issue's example, as a SpeedOfLight-section export prints it: the fix is L1's, not HBM/FP8."""
    header = '"ID","Kernel Name","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n'
    rows = [
        ("Duration", "us", "120.50"),
        ("Memory Throughput", "%", "99.60"),
        ("DRAM Throughput", "%", "0.03"),
        ("L1/TEX Cache Throughput", "%", "99.90"),
        ("L2 Cache Throughput", "%", "3.10"),
        ("Compute (SM) Throughput", "%", "41.20"),
    ]
    body = "".join(f'"0","k","0","8.0","GPU Speed Of Light Throughput","{n}","{u}","{v}"\n' for n, u, v in rows)
    path = tmp_path / "sol.csv"
    path.write_text(header + body, encoding="utf-8")
    (kernel,) = summarize_path(path).kernels
    assert kernel.cls == "memory_bound" and kernel.level == "L1"
    assert kernel.fix == LEVEL_FIXES["L1"] and "HBM" not in kernel.fix and "FP8" not in kernel.fix


# --- tensor cores only from evidence ------------------------------------------------------------------
@pytest.mark.realdata
@pytest.mark.parametrize(
    ("name", "evidence"),
    [
        ("gemm_vectorized_kernel(float *, float *, float *, int)", False),  # hand-written FP32 GEMM
        ("cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::arch::OpClassSimt>>", False),
        ("ampere_fp16_s1688gemm_fp16_128x128_ldg8_f2f_stages_32x1_nn", True),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off", True),
        ("void cute::device_kernel<cute::SM90_64x128x16_F32BF16BF16_SS<>>", True),
    ],
)
def test_tensor_cores_are_guessed_only_from_evidence(tmp_path: Path, name: str, evidence: bool) -> None:
    source = GEMM_TILED.read_text(encoding="utf-8-sig")
    original = read_report(GEMM_TILED).kernels[0].name
    path = tmp_path / "renamed.csv"
    path.write_text(source.replace(f'"{original}"', f'"{name}"'), encoding="utf-8")
    kernel = summarize_path(path).kernels[0]
    assert kernel.name == name
    assert (kernel.tensor_uncounted is not None) == evidence


# --- GPUs: the table, --gpu, --peak, and a CSV that names none ---------------------------------------
@pytest.mark.realdata
def test_a_csv_that_names_no_gpu_is_told_to_name_it(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    kernel = summarize_path(SAXPY).kernels[0]
    assert kernel.cls == "unknown" and kernel.fix_short == "name it with --gpu to derive DRAM%"
    assert "collect" not in kernel.fix and "--gpu" in kernel.fix and "CC 12.0" in kernel.fix
    assert fleetbench("ncu", "summarize", str(SAXPY)) == 0
    out = capsys.readouterr().out
    assert "name it with --gpu to derive DRAM%" in out and "--peak" in out and "GeForce RTX 5070" in out


@pytest.mark.realdata
def test_a_gpu_named_with_gpu_or_given_with_peak_derives_dram(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    achieved = (134_221_568 + 43_631_104) / 292_928e-9  # the export's bytes over its duration
    rtx4090 = summarize_path(SAXPY, device_name="NVIDIA GeForce RTX 4090").kernels[0]
    assert rtx4090.dram_sol == pytest.approx(achieved / 1008e9) and "GeForce RTX 4090" in rtx4090.derived["dram_sol"]
    given = summarize_path(SAXPY, peak="dram=1008GB/s").kernels[0]
    assert given.dram_sol == pytest.approx(rtx4090.dram_sol) and "--peak dram=1008GB/s" in given.derived["dram_sol"]
    assert fleetbench("ncu", "summarize", str(SAXPY), "--peak", "dram=1.008TB/s", "--json") == 0
    kernel = json.loads(capsys.readouterr().out)["kernels"][0]
    assert kernel["dram_sol"] == pytest.approx(given.dram_sol) and kernel["cls"] == "memory_bound"  # 60 % vs 22 %
    with pytest.raises(UserError, match="not KEY=NUMBER"):
        summarize_path(SAXPY, peak="dram=lots")


# --- cut files say so, with --json too and in the roofline --------------------------------------------
@pytest.mark.realdata
def test_a_cut_report_says_so_on_stderr_with_json_and_in_the_roofline(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    needs_ncu_report()
    source = A10_REP.read_bytes()
    cut = tmp_path / "half.ncu-rep"
    cut.write_bytes(source[: len(source) // 2])
    assert fleetbench("ncu", "summarize", str(cut), "--json") == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["kernels"] and "is damaged (cut off?)" in captured.err
    results = tmp_path / "results"
    assert fleetbench("roofline", "--ncu", str(cut), "--results-dir", str(results)) == 0
    assert "is damaged (cut off?)" in capsys.readouterr().err
    (chart,) = results.glob("*/roofline/roofline.json")
    assert any("is damaged (cut off?)" in note for note in json.loads(chart.read_text())["notes"])


@pytest.mark.realdata
@pytest.mark.parametrize("kind", ["csv", "console"])
def test_a_cut_export_or_log_says_so_on_stderr_with_json(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    source = (L4_CSV if kind == "csv" else TENSOR_LOG).read_text(encoding="utf-8-sig")
    path = tmp_path / f"cut.{'csv' if kind == 'csv' else 'txt'}"
    path.write_text(source[: int(len(source) * 0.6)], encoding="utf-8")
    report = read_report(path)
    said = "its last row is cut off" if kind == "csv" else "is cut:"
    assert report.kernels and any(said in note for note in report.notes)
    assert fleetbench("ncu", "summarize", str(path), "--json") == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["kernels"] and said in captured.err


@pytest.mark.realdata
def test_a_log_cut_after_some_launches_names_what_is_missing(tmp_path: Path) -> None:
    lines = TENSOR_LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    fourth = next(i for i, line in enumerate(lines) if line.lstrip().startswith("wmma_kernel1("))
    path = tmp_path / "cut.txt"
    path.write_text("".join(lines[:fourth]), encoding="utf-8")  # cut at a line boundary, between launches
    report = read_report(path)
    assert len(report.kernels) == 3
    (note,) = [n for n in report.notes if n.startswith("warning:")]
    assert "ncu announced 6 profiled launches and the log holds 3" in note and "summarised up to the cut" in note


# --- duplicates and negative figures are refused or flagged, never chosen -----------------------------
def _details(tmp_path: Path, rows: list[tuple[str, str, str, str]]) -> Path:
    """A `--page details` export of one launch (ID 0) with these (section, metric name, unit, value) rows."""
    header = '"ID","Kernel Name","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n'
    body = "".join(f'"0","k","0","8.0","{s}","{n}","{u}","{v}"\n' for s, n, u, v in rows)
    path = tmp_path / "dup.csv"
    path.write_text(header + body, encoding="utf-8")
    return path


def test_a_metric_given_twice_with_two_values_is_left_out_with_a_warning(tmp_path: Path) -> None:
    sol = "GPU Speed Of Light Throughput"
    path = _details(
        tmp_path,
        [(sol, "Duration", "us", "10.00"), (sol, "Duration", "us", "12.00"), (sol, "Memory Throughput", "%", "85.00")],
    )
    report = read_report(path)
    (kernel,) = report.kernels
    assert DURATION not in kernel.metrics and kernel.metrics[MEMORY] == 85.0
    assert any("given twice" in n and "left out (neither is chosen)" in n for n in report.notes)
    same = _details(
        tmp_path,
        [(sol, "Duration", "us", "10.00"), (sol, "Duration", "us", "10.00"), (sol, "Memory Throughput", "%", "85.00")],
    )
    same_report = read_report(same)
    assert same_report.kernels[0].metrics[DURATION] == pytest.approx(10e3)
    assert any("given twice" in n and "the same value); kept once" in n for n in same_report.notes)


def test_a_display_row_and_a_metric_row_that_disagree_are_both_refused(tmp_path: Path) -> None:
    sol = "GPU Speed Of Light Throughput"
    agree = _details(
        tmp_path,
        [
            (sol, "Duration", "us", "40.03"),
            ("Command line profiler metrics", DURATION, "ns", "40,032"),
            (sol, "Memory Throughput", "%", "1"),
        ],
    )
    assert read_report(agree).kernels[0].metrics[DURATION] == 40032.0  # the exact row, the display row rounds it
    differ = _details(
        tmp_path,
        [
            (sol, "Duration", "us", "40.03"),
            ("Command line profiler metrics", DURATION, "ns", "52,000"),
            (sol, "Memory Throughput", "%", "1"),
        ],
    )
    report = read_report(differ)
    assert DURATION not in report.kernels[0].metrics and any("neither is chosen" in n for n in report.notes)


def test_negative_durations_and_percentages_are_left_out_with_a_warning(tmp_path: Path) -> None:
    sol = "GPU Speed Of Light Throughput"
    path = _details(
        tmp_path,
        [
            (sol, "Duration", "us", "-3.5"),
            (sol, "Memory Throughput", "%", "-12.00"),
            (sol, "Compute (SM) Throughput", "%", "40.00"),
        ],
    )
    report = read_report(path)
    kernel = report.kernels[0]
    assert DURATION not in kernel.metrics and MEMORY not in kernel.metrics and kernel.metrics[COMPUTE] == 40.0
    negatives = [n for n in report.notes if "negative" in n]
    assert len(negatives) == 2 and "Duration (gpu__time_duration.sum)" in negatives[0]
    assert summarize_report(report).kernels[0].cls == "unknown"


def test_a_raw_page_with_a_duplicate_column_that_disagrees_leaves_it_out(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    path.write_text(
        '"ID","Kernel Name","Device","gpu__time_duration.sum","gpu__time_duration.sum",'
        '"sm__throughput.avg.pct_of_peak_sustained_elapsed"\n'
        '"","","","nsecond","nsecond","%"\n'
        '"0","a","0","100","100","50"\n'
        '"1","b","0","100","900","50"\n',
        encoding="utf-8",
    )
    report = read_report(path)
    assert report.kernels[0].metrics[DURATION] == 100.0 and DURATION not in report.kernels[1].metrics
    assert any("appear more than once" in n for n in report.notes)
    assert any("launch 1 is given 2 times with different values" in n for n in report.notes)


def test_a_console_row_given_twice_with_two_values_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_text(
        "  k(float *) (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0\n"
        "    Section: GPU Speed Of Light Throughput\n"
        "    Duration                         us         3.00\n"
        "    Duration                         us         4.00\n"
        "    Memory Throughput                 %        50.00\n",
        encoding="utf-8",
    )
    report = read_report(path)
    assert DURATION not in report.kernels[0].metrics and report.kernels[0].metrics[MEMORY] == 50.0
    assert any("given twice" in n for n in report.notes)


# --- ncu --print-summary per-kernel and per-gpu --------------------------------------------------------
# The layout of `ncu --print-summary per-kernel` and `per-gpu` (ncu 2023-2025): an entry per kernel and launch
# shape, "Invocations N", tables of Minimum / Maximum / Average. Written here; no capture is in the data.
PER_KERNEL = """\
==PROF== Disconnected from process 85848
[85848] bench@127.0.0.1
  transposeNaive(const float *, float *, int) (32, 32, 1)x(32, 32, 1), Device 0, CC 8.9, Invocations 14
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------ ------------ ------------
    Metric Name             Metric Unit      Minimum      Maximum      Average
    ----------------------- ----------- ------------ ------------ ------------
    DRAM Frequency                  Ghz         6.24         6.24         6.24
    Duration                         us       100.10       104.30       102.90
    Memory Throughput                 %        84.10        86.00        85.20
    DRAM Throughput                   %        84.10        86.00        85.20
    L1/TEX Cache Throughput           %        30.00        31.00        30.50
    L2 Cache Throughput               %        40.00        41.00        40.50
    Compute (SM) Throughput           %        12.00        13.00        12.50
    ----------------------- ----------- ------------ ------------ ------------

  transposeSharedPadded(const float *, float *, int) (32, 32, 1)x(32, 32, 1), Device 0, CC 8.9, Invocations 14
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------ ------------ ------------
    Metric Name             Metric Unit      Minimum      Maximum      Average
    ----------------------- ----------- ------------ ------------ ------------
    Duration                         us        40.10        41.30        40.60
    Memory Throughput                 %        66.00        67.00        66.50
    Compute (SM) Throughput           %        64.00        65.00        64.50
    ----------------------- ----------- ------------ ------------ ------------
"""
PER_GPU = """\
==PROF== Disconnected from process 11139
[11139] a.out@127.0.0.1
  Device 0, CC 9.0
    bitonic_merge(int *, int, int, int) (16384, 1, 1)x(512, 1, 1), Invocations 300
      Section: Command line profiler metrics
      ---------------------------------------------------------------- ----------- ------- ------- -------
      Metric Name                                                      Metric Unit Minimum Maximum Average
      ---------------------------------------------------------------- ----------- ------- ------- -------
      gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed           %   56.59   72.29   64.43
      gpu__time_duration.sum                                               usecond  170.00  190.00  180.00
      sm__throughput.avg.pct_of_peak_sustained_elapsed                           %   20.00   30.00   25.00
      ---------------------------------------------------------------- ----------- ------- ------- -------

    fill_padding(int *, int, int, int) (52947, 1, 1)x(128, 1, 1), Invocations 1
      Section: Command line profiler metrics
      ---------------------------------------------------------------- ----------- ------- ------- -------
      Metric Name                                                      Metric Unit Minimum Maximum Average
      ---------------------------------------------------------------- ----------- ------- ------- -------
      gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed           %   18.62   18.62   18.62
      gpu__time_duration.sum                                               usecond   50.00   50.00   50.00
      sm__throughput.avg.pct_of_peak_sustained_elapsed                           %    9.65    9.65    9.65
      ---------------------------------------------------------------- ----------- ------- ------- -------
"""


def test_a_per_kernel_summary_is_read_as_its_invocations_averages(tmp_path: Path) -> None:
    path = tmp_path / "summary.txt"
    path.write_text(PER_KERNEL, encoding="utf-8")
    report = read_report(path)
    assert report.format == "console-summary" and [k.invocations for k in report.kernels] == [14, 14]
    naive = report.kernels[0]
    assert naive.name == "transposeNaive(const float *, float *, int)" and naive.device == "device 0 (CC 8.9)"
    assert naive.metrics[MEMORY] == 85.2 and naive.metrics[DURATION] == pytest.approx(102.9e3)  # the averages
    summary = summarize_report(report)
    assert [(k.cls, k.level) for k in summary.kernels] == [("memory_bound", "DRAM"), ("balanced", None)]
    assert sum(g.launches for g in summary.groups) == 28
    group = next(g for g in summary.groups if g.short == "transposeNaive")
    assert group.launches == 14 and group.duration_s == pytest.approx(14 * 102.9e-6)


def test_a_per_gpu_summary_is_read_under_its_device_line(tmp_path: Path) -> None:
    path = tmp_path / "summary.txt"
    path.write_text(PER_GPU, encoding="utf-8")
    report = read_report(path)
    assert report.format == "console-summary" and [k.invocations for k in report.kernels] == [300, 1]
    assert all(k.device == "device 0 (CC 9.0)" for k in report.kernels)
    bitonic = summarize_report(report).kernels[0]
    assert (bitonic.memory_sol, bitonic.compute_sol) == pytest.approx((0.6443, 0.25))
    assert bitonic.cls == "memory_bound" and bitonic.invocations == 300  # 64 % leads 25 % by 39 points


def test_a_console_log_without_launch_or_summary_entry_is_refused_naming_both_layouts(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_text("==PROF== Connected\n    Section: GPU Speed Of Light Throughput\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"no launch line .* and no --print-summary entry") as info:
        read_report(path)
    assert "\n" not in str(info.value)
