"""Nsight Compute's console output (tests/data/ncu-console/): launches, figures, rule results, the CLI.

Expected figures are the numbers printed in the logs, converted by hand: `11.97 msecond` is
11.97e6 ns, `5.49 Ghz` and `5.96 cycle/nsecond` are 5.49e9 / 5.96e9 Hz, `775.67 cycle/usecond` is
775.67e6 Hz, `4,096` is 4096, `140.95 Gbyte/s` (Memory Workload Analysis' "Memory Throughput") is
140.95e9 byte/s.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetbench.errors import UserError
from fleetbench.profile.ncu.console import DISPLAY, looks_like_console, read_ncu_console
from fleetbench.profile.ncu.model import WANTED
from fleetbench.profile.ncu.readers import read_report
from fleetbench.profile.ncu.summary import summarize_report
from testdata import get_test_data_dir

CONSOLE = get_test_data_dir() / "ncu-console"
# The layouts these tests pin figures of (the L4 flash-attention log, an L1/TEX-bound kernel, is read for its
# class and memory level in test_ncu_classes.py, with the --print-summary layouts).
LOGS = [
    CONSOLE / name
    for name in (
        "p40_vector_add_old_sol.txt",
        "rtx3050ti_2mm_tensor_full_set.txt",
        "rtx3070_matrix_sums_wrn_inf.txt",
        "rtx3070_reductions_3_kernels.txt",
    )
]
P40 = CONSOLE / "p40_vector_add_old_sol.txt"
SUMS = CONSOLE / "rtx3070_matrix_sums_wrn_inf.txt"
REDUCTIONS = CONSOLE / "rtx3070_reductions_3_kernels.txt"
TENSOR = CONSOLE / "rtx3050ti_2mm_tensor_full_set.txt"

DURATION = "gpu__time_duration.sum"
COMPUTE = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
L1 = "l1tex__throughput.avg.pct_of_peak_sustained_active"
L2 = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
SM_HZ = "sm__cycles_elapsed.avg.per_second"
DRAM_HZ = "dram__cycles_elapsed.avg.per_second"
GRID, BLOCK = "launch__grid_size", "launch__block_size"
WAVES, DRAM_RATE = "launch__waves_per_multiprocessor", "dram__bytes.sum.per_second"


def figures(expected: dict[str, float]) -> Any:
    return pytest.approx(expected, rel=1e-12)


@pytest.mark.realdata
@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_every_log_reads_as_console_output(path: Path) -> None:
    assert looks_like_console(path.read_text(encoding="utf-8"))
    report = read_report(path)
    assert report.format == "console" and report.kernels
    assert [k.id for k in report.kernels] == [str(i) for i in range(len(report.kernels))]
    assert all(DURATION in k.metrics and COMPUTE in k.metrics and MEMORY in k.metrics for k in report.kernels)
    assert all(set(k.metrics) <= set(WANTED) for k in report.kernels)
    assert report.notes and all(note.startswith("==") for note in report.notes)  # no program output, no warnings
    assert read_ncu_console(path) == report


@pytest.mark.realdata
def test_launch_counts_and_names() -> None:
    names = {p.name: [k.name for k in read_report(p).kernels] for p in LOGS}
    assert names == {
        "p40_vector_add_old_sol.txt": ["vadd(float const *,float const *,float*,int)"],
        "rtx3050ti_2mm_tensor_full_set.txt": [
            "f32_to_f16(const float *, __half *, int)",
            "f32_to_f16(const float *, __half *, int)",
            "f32_to_f16(const float *, __half *, int)",
            "wmma_kernel1(int, int, int, float, const __half *, const __half *, float *)",
            "f32_to_f16(const float *, __half *, int)",
            "wmma_kernel2(int, int, int, float, const __half *, const __half *, float *)",
        ],
        "rtx3070_matrix_sums_wrn_inf.txt": [
            "row_sums(const float *, float *, unsigned long)",
            "column_sums(const float *, float *, unsigned long)",
        ],
        "rtx3070_reductions_3_kernels.txt": [
            "atomic_red(const float *, float *)",
            "reduce_a(float *, float *)",
            "reduce_ws(float *, float *)",
        ],
    }


@pytest.mark.realdata
def test_recent_layout_figures_and_device() -> None:
    """`Metric Name` tables, Ghz/Mhz/us/ms units, thousands separators (rtx3050ti, lines 16-583 and 586-792)."""
    kernels = read_report(TENSOR).kernels
    first, gemm = kernels[0], kernels[3]
    assert first.device == "device 0 (CC 8.6)"
    assert first.metrics == figures(
        {
            DRAM_HZ: 5.49e9,
            SM_HZ: 733.17e6,
            MEMORY: 80.31,
            DRAM: 80.31,
            DURATION: 44.99e3,
            L1: 33.78,
            L2: 38.51,
            COMPUTE: 31.53,
            BLOCK: 256.0,
            GRID: 4096.0,
            WAVES: 34.13,
            DRAM_RATE: 140.95e9,  # Memory Workload Analysis' "Memory Throughput  Gbyte/s  140.95"
        }
    )
    assert gemm.metrics[DURATION] == pytest.approx(1.25e6)
    assert gemm.metrics[MEMORY] == 98.18  # the SOL %, not Memory Workload Analysis' "25.42 Gbyte/s"
    assert (gemm.metrics[GRID], gemm.metrics[BLOCK]) == (4096.0, 32.0)


@pytest.mark.realdata
def test_2022_layout_figures() -> None:
    """`Memory [%]`, `Compute (SM) [%]`, cycle/nsecond and cycle/usecond, no `Metric Name` header."""
    row_sums = read_report(SUMS).kernels[0]
    assert row_sums.device == "unknown device"  # this ncu prints a time stamp instead of the device
    assert row_sums.metrics == figures(
        {
            DRAM_HZ: 5.96e9,
            SM_HZ: 775.67e6,
            MEMORY: 72.28,
            DRAM: 23.52,
            DURATION: 11.97e6,
            L1: 88.40,
            L2: 35.16,
            COMPUTE: 4.52,
            BLOCK: 256.0,
            GRID: 64.0,
            WAVES: 0.27,
        }
    )
    reduce_a = read_report(REDUCTIONS).kernels[1]  # rows indented deeper than their section
    assert reduce_a.metrics[DURATION] == pytest.approx(114.85e3)  # 114.85 usecond
    assert (reduce_a.metrics[MEMORY], reduce_a.metrics[COMPUTE], reduce_a.metrics[GRID]) == (79.55, 25.01, 640.0)


@pytest.mark.realdata
def test_oldest_layout_figures() -> None:
    """Section "GPU Speed Of Light": SM [%], Memory [%], Memory Frequency; SOL FB, SOL L2 and SOL TEX are the
    DRAM, L2 and L1/TEX throughputs (the memory levels); "Memory Throughput" in Gbyte/second the DRAM bytes/s."""
    vadd = read_report(P40).kernels[0]
    assert vadd.metrics == figures(
        {
            DRAM_HZ: 7.22e9,
            SM_HZ: 1.30e9,
            MEMORY: 82.65,
            DURATION: 1.67e6,
            COMPUTE: 9.61,
            DRAM: 82.65,  # SOL FB
            L2: 16.64,  # SOL L2
            L1: 9.61,  # SOL TEX
            DRAM_RATE: 286.36e9,
        }
    )
    assert vadd.rules == []


@pytest.mark.realdata
def test_rule_paragraphs_with_their_kind_section_and_speedup() -> None:
    first = read_report(TENSOR).kernels[0]
    assert [(r.kind, r.section, r.speedup_pct, r.speedup_type) for r in first.rules] == [
        ("INF", "GPU Speed Of Light Throughput", None, None),
        ("INF", "GPU Speed Of Light Roofline Chart", None, None),
        ("OPT", "Compute Workload Analysis", 85.92, "local"),
        ("OPT", "Scheduler Statistics", 19.69, "local"),
        ("OPT", "Warp State Statistics", 19.69, "global"),
        ("INF", "Warp State Statistics", None, None),  # after a `----- ---` separator
        ("OPT", "Occupancy", 19.69, "global"),
    ]
    assert all(r.rule == r.section and r.title == "" for r in first.rules)
    stall, sampling = first.rules[4], first.rules[5]
    assert stall.message.startswith("On average, each warp of this workload spends 30.2 cycles being stalled")
    assert stall.message.endswith(
        "represents about 73.8% of the total average of 40.9 cycles between issuing two instructions."
    )
    assert "  " not in stall.message and "Est." not in stall.message
    assert sampling.message.startswith("Check the Warp Stall Sampling (All Samples) table")
    gemm = read_report(TENSOR).kernels[3]
    tables = [r for r in gemm.rules if r.section == "Memory Workload Analysis Tables"]
    assert [(r.kind, r.speedup_pct) for r in tables] == [("OPT", 49.09)]  # a section without a table


@pytest.mark.realdata
def test_wrn_and_inf_paragraphs_of_the_2022_layout() -> None:
    row_sums, column_sums = read_report(SUMS).kernels
    assert [(r.kind, r.section) for r in row_sums.rules] == [
        ("WRN", "GPU Speed Of Light Throughput"),
        ("WRN", "Launch Statistics"),
        ("WRN", "Occupancy"),
    ]
    assert [r.kind for r in column_sums.rules] == ["INF", "WRN", "WRN"]
    assert row_sums.rules[0].message == (
        "Memory is more heavily utilized than Compute: Look at the Memory Workload Analysis section to identify the L1 "
        "bottleneck. Check memory replay (coalescing) metrics to make sure you're efficiently utilizing the bytes "
        "transferred. Also consider whether it is possible to do more work per memory access (kernel fusion) or "
        "whether there are values you can (re)compute."
    )
    assert all(r.speedup_pct is None for r in row_sums.rules + column_sums.rules)


@pytest.mark.realdata
def test_notes_are_ncus_lines_and_program_output_is_skipped() -> None:
    notes = read_report(TENSOR).notes
    assert (
        notes[0].startswith("==PROF== Connected to process 58176")
        and notes[-1] == "==PROF== Disconnected from process 58176"
    )
    assert len(notes) == 8 and not any("GPU Time" in n or "setting device" in n for n in notes)
    p40 = read_report(P40).notes  # the program printed into the middle of ncu's progress line
    assert p40[1] == '==PROF== Profiling "vadd" - 1: 0%....50%....100%A[0] = 0.840188'


@pytest.mark.realdata
def test_summary_classes_and_groups() -> None:
    summary = summarize_report(read_report(TENSOR))
    # memory SOL 98 % with compute 35 % and 80-81 % with compute 32 %: NVIDIA's "High Throughput", memory-bound;
    # the GEMMs on L1/TEX (99.3 %), the conversions on DRAM (80-81 %)
    assert {g.short: (g.launches, g.cls, g.level) for g in summary.groups} == {
        "wmma_kernel1": (1, "memory_bound", "L1"),
        "wmma_kernel2": (1, "memory_bound", "L1"),
        "f32_to_f16": (4, "memory_bound", "DRAM"),
    }
    assert summary.devices == ["device 0 (CC 8.6)"]
    f32 = next(g for g in summary.groups if g.short == "f32_to_f16")
    assert f32.duration_s == pytest.approx((44.99 + 44.70 + 44.93 + 44.61) * 1e-6)
    classes = {k.short: k.cls for k in summarize_report(read_report(REDUCTIONS)).kernels}
    # reduce_a: memory 79.55 %, compute 25.01 %: memory leads by 54 points ("High Memory Throughput")
    assert classes == {"atomic_red": "latency_bound", "reduce_a": "memory_bound", "reduce_ws": "memory_bound"}


@pytest.mark.realdata
def test_cli_summarize_shows_kernels_classes_and_fixes(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert fleetbench("ncu", "summarize", str(SUMS)) == 0
    captured = capsys.readouterr()
    assert "(console," in captured.out
    for text in ("row_sums", "column_sums", "memory_bound", "11.970 ms", "93.0%", "main fix"):
        assert text in captured.out, text
    assert "==PROF==" not in captured.err  # ncu's progress lines stay off stderr unless --verbose
    assert fleetbench("ncu", "summarize", str(SUMS), "--verbose") == 0
    assert "==PROF== Connected to process 5341" in capsys.readouterr().err


@pytest.mark.realdata
def test_cli_summarize_json(fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    assert fleetbench("ncu", "summarize", str(TENSOR), "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "console" and len(data["kernels"]) == 6 and len(data["groups"]) == 3
    first = data["kernels"][0]
    assert first["duration_s"] == pytest.approx(44.99e-6) and first["compute_sol"] == pytest.approx(0.3153)
    assert [r["kind"] for r in first["rules"]] == ["INF", "INF", "OPT", "OPT", "OPT", "INF", "OPT"]
    assert data["overview"]["launches"] == 6


# --- the layout's variants, written out where no published log shows them ------------------------
HEADER = "  k(float *) (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 3, CC 9.0\n"


def console(tmp_path: Path, text: str, name: str = "log.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_n_a_is_absent_nan_is_unmeasured_and_text_is_a_warning(tmp_path: Path) -> None:
    report = read_report(
        console(
            tmp_path,
            HEADER + "    Section: GPU Speed Of Light Throughput\n"
            "    Duration                         us          n/a\n"
            "    Compute (SM) Throughput           %          nan\n"
            "    DRAM Throughput                   %        fast!\n"
            "    Memory Throughput                 %        1e999\n",
        )
    )
    (kernel,) = report.kernels
    assert kernel.device == "device 3 (CC 9.0)" and kernel.name == "k(float *)"
    assert DURATION not in kernel.metrics and math.isnan(kernel.metrics[COMPUTE])
    assert DRAM not in kernel.metrics and MEMORY not in kernel.metrics
    warnings = [n for n in report.notes if n.startswith("warning:")]
    assert len(warnings) == 2 and "DRAM Throughput" in warnings[0] and "'fast!'" in warnings[0]
    assert summarize_report(report).kernels[0].cls == "not_measured"


def test_launch_without_sections_processes_and_global_speedup(tmp_path: Path) -> None:
    text = (
        "[11] a.out@127.0.0.1\n"
        + HEADER
        + "  void other<2>(int) (8, 1, 1)x(64, 1, 1), Context 1, Stream 13, Device 0, CC 8.0\n"
        "    Section: Occupancy\n"
        "    OPT   Est. Global Speedup: 12.5%\n"
        "          Grid too small.\n"
        "    ERR   Est. Local Speedup: 1.2.3%\n"
        "program output\n"
        "[12] b.out@127.0.0.1\n"
        "  k2 (1, 1, 1)x(1, 1, 1), Context 2, Stream 7, Device 1, CC 8.0\n"
        "    Section: Command line profiler metrics\n"
        "    gpu__time_duration.sum                       usecond         3.42\n"
        "    sm__throughput.avg.pct_of_peak_sustained_elapsed    %        12.5\n"
    )
    first, other, third = read_report(console(tmp_path, text)).kernels
    assert first.metrics == {} and first.rules == []  # a launch with no section is still a launch
    assert other.name == "void other<2>(int)"
    assert [(r.kind, r.speedup_pct, r.speedup_type, r.message) for r in other.rules] == [
        ("OPT", 12.5, "global", "Grid too small."),
        ("ERR", None, None, "Est. Local Speedup: 1.2.3%"),
    ]
    assert third.device == "device 1 (CC 8.0)"
    assert third.metrics == {DURATION: pytest.approx(3420.0), COMPUTE: 12.5}  # `ncu --metrics` rows


def test_a_full_name_column_leaves_one_space_before_the_unit(tmp_path: Path) -> None:
    width = max(len(name) for name in DISPLAY)
    row = "    " + "Duration".ljust(width) + " msecond 2.5\n"
    (kernel,) = read_report(console(tmp_path, HEADER + "    Section: GPU Speed Of Light Throughput\n" + row)).kernels
    assert kernel.metrics == {DURATION: 2.5e6}


def test_console_cut_before_the_results_and_foreign_text(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no launch line") as cut:
        read_report(console(tmp_path, "==PROF== Connected\n    Section: GPU Speed Of Light Throughput\n"))
    assert "\n" not in str(cut.value)
    with pytest.raises(UserError) as foreign:
        read_report(console(tmp_path, "hello\nworld\n", "notes.txt"))
    message = str(foreign.value)
    assert "holds no kernel data" in message and "console output" in message and "--csv" in message
    assert "\n" not in message
    assert not looks_like_console("ID,Kernel Name\n")
