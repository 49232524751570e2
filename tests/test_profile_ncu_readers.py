"""Nsight Compute readers on every real report in tests/data: .ncu-rep and ncu CSV exports."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

from fleetbench.errors import UserError
from fleetbench.profile.ncu.model import WANTED, normalise_unit, parse_value
from fleetbench.profile.ncu.readers import read_report
from fleetbench.profile.ncu.summary import summarize_report
from testdata import get_test_data_dir, listed

FIXTURES = get_test_data_dir()
REPORTS = listed("ncu-rep", ".ncu-rep")
# Every export: metric-name rows (--metrics), a raw page, and display-name `--page details` exports
# ("Duration", "Compute (SM) Throughput", ...; their figures are pinned in test_ncu_classes.py).
CSVS = listed("ncu-csv", ".csv")
FAILED = FIXTURES / "ncu-csv" / "b200_raw_failed_capture.csv"


def needs_ncu_report() -> object:
    return pytest.importorskip(
        "ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package (pip install 'fleetbench[ncu]')"
    )


@pytest.mark.realdata
@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_every_ncu_rep_reads_and_values_equal_what_ncu_report_reads(path: Path) -> None:
    ncu_report = needs_ncu_report()
    report = read_report(path)
    context = ncu_report.load_report(str(path))
    actions = [
        context.range_by_idx(r).action_by_idx(a)
        for r in range(context.num_ranges())
        for a in range(context.range_by_idx(r).num_actions())
    ]
    assert len(report.kernels) == len(actions) > 0
    for kernel, action in zip(report.kernels, actions, strict=True):
        assert kernel.name == action.name(action.NameBase_DEMANGLED)
        for name in WANTED:
            metric = action.metric_by_name(name)
            if metric is None:
                assert name not in kernel.metrics  # absent stays absent, never 0
            elif metric.kind() == metric.ValueKind_STRING:
                assert kernel.metrics[name] == metric.as_string()
            else:
                assert kernel.metrics[name] == pytest.approx(metric.as_double(), rel=1e-12, nan_ok=True)
        display = action.metric_by_name("device__attribute_display_name").as_string()
        assert kernel.device == display


@pytest.mark.realdata
def test_known_values_of_the_fixtures() -> None:
    needs_ncu_report()
    counts = {p.name: len(read_report(p).kernels) for p in REPORTS}
    assert counts == {
        "a100_cutlass_gemm.ncu-rep": 2,
        "a10_inference_105_kernels.ncu-rep": 105,
        "a10g_sgemm_warptiling.ncu-rep": 5,
        "gh200_elementwise.ncu-rep": 1,
        "gtx1660s_naive_gemm.ncu-rep": 2,
        "rtx2080ti_kernelA_kernelC.ncu-rep": 2,
        "t4_matrix_addition2d.ncu-rep": 1,
        "h800_flash_fwd_nan_unmeasured.ncu-rep": 5,
    }
    gh200 = summarize_report(read_report(FIXTURES / "ncu-rep" / "gh200_elementwise.ncu-rep")).kernels[0]
    assert gh200.device == "NVIDIA GH200 480GB"
    assert gh200.duration_s == pytest.approx(141920e-9)
    assert gh200.compute_sol is None and gh200.memory_sol is None and gh200.cls == "unknown"
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in gh200.absent


@pytest.mark.realdata
def test_the_105_kernel_report_is_summarised_in_under_two_seconds() -> None:
    needs_ncu_report()
    started = time.perf_counter()
    summary = summarize_report(read_report(FIXTURES / "ncu-rep" / "a10_inference_105_kernels.ncu-rep"))
    elapsed = time.perf_counter() - started
    assert len(summary.kernels) == 105
    assert elapsed < 2.0, f"{elapsed:.2f} s"


@pytest.mark.realdata
@pytest.mark.parametrize("path", [p for p in CSVS if p != FAILED], ids=lambda p: p.name)
def test_every_csv_reads(path: Path) -> None:
    report = read_report(path)
    assert report.kernels
    # a duration, or the SM cycles and clock it is derived from (narrow --metrics captures)
    assert all("gpu__time_duration.sum" in k.metrics or "sm__cycles_elapsed.avg" in k.metrics for k in report.kernels)
    assert not [note for note in report.notes if note.startswith("warning:")]  # whole files: nothing left out
    summary = summarize_report(report)
    # every launch whose file has its speed-of-light figures is classed (display names or metric names)
    for kernel in summary.kernels:
        if "sm__throughput.avg.pct_of_peak_sustained_elapsed" in report.kernels[kernel.index].metrics and (
            kernel.memory_sol is not None or kernel.dram_sol is not None
        ):
            assert kernel.cls not in ("unknown", "not_measured"), kernel.name


@pytest.mark.realdata
def test_details_csv_values_thousands_separators_and_preamble() -> None:
    report = read_report(FIXTURES / "ncu-csv" / "rtx5070_details_saxpy.csv")
    assert report.format == "csv-details"
    assert [n for n in report.notes if n.startswith("==PROF==")]  # the lines before the header were skipped
    kernel = report.kernels[0]
    assert kernel.name == "unnamed>::saxpy_kernel(float, const float *, float *, int)"
    assert kernel.metrics["gpu__time_duration.sum"] == 292928.0
    assert kernel.metrics["dram__bytes_op_read.sum"] == 134221568.0
    assert kernel.metrics["dram__bytes_op_write.sum"] == 43631104.0
    assert kernel.metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == 22.30
    summary = summarize_report(report).kernels[0]
    assert summary.dram_bytes == 134221568.0 + 43631104.0
    assert summary.memory_sol is None and summary.cls == "unknown"  # memory SOL was not captured


@pytest.mark.realdata
def test_raw_csv_with_units_row() -> None:
    report = read_report(FIXTURES / "ncu-csv" / "b200_raw_flashinfer_decode.csv")
    assert report.format == "csv-raw"
    assert len(report.kernels) == 64
    first = report.kernels[0]
    assert first.device == "NVIDIA B200"
    assert first.metrics["gpu__time_duration.sum"] == 628480.0
    assert first.name.startswith("void BatchDecodeWithPagedKVCacheKernel<")
    summary = summarize_report(report)
    assert len(summary.groups) == 1 and summary.groups[0].launches == 64
    assert summary.groups[0].duration_s == pytest.approx(
        sum(k.metrics["gpu__time_duration.sum"] for k in report.kernels) * 1e-9
    )


@pytest.mark.realdata
def test_failed_capture_gives_a_clear_error() -> None:
    with pytest.raises(UserError) as info:
        read_report(FAILED)
    message = str(info.value)
    assert "holds no kernel data" in message and "The application returned an error code (1)" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("unit", "value", "expected"),
    [
        ("ns", "1,500", 1500.0),
        ("nsecond", "1500", 1500.0),
        ("usecond", "1.5", 1500.0),
        ("us", "1.5", 1500.0),
        ("msecond", "0.0015", 1500.0),
        ("ms", "2", 2e6),
        ("second", "1", 1e9),
        ("Kbyte", "2", 2000.0),
        ("Mbyte", "1.5", 1.5e6),
        ("Gbyte/second", "1.2", 1.2e9),
        ("byte/usecond", "3", 3e6),
        ("cycle/nsecond", "1.41", 1.41e9),
        ("Ghz", "1.5", 1.5e9),
        ("%", "88.90", 88.9),
        ("inst/cycle", "146", 146.0),
    ],
)
def test_unit_variants_become_base_units(unit: str, value: str, expected: float) -> None:
    assert parse_value(value, unit) == pytest.approx(expected)


def test_text_and_missing_values() -> None:
    assert parse_value("(256, 1, 1)") == "(256, 1, 1)"
    assert parse_value("n/a") is None and parse_value("") is None
    assert normalise_unit("usecond") == (1e3, "ns")


@pytest.mark.realdata
def test_a_details_csv_in_scaled_units_gives_the_same_figures(tmp_path: Path) -> None:
    """The same saxpy launch as ncu prints it with its automatic units (us, Mbyte) and program output."""
    source = (FIXTURES / "ncu-csv" / "rtx5070_details_saxpy.csv").read_text(encoding="utf-8-sig")
    scaled = source.replace('"ns","292,928"', '"usecond","292.928"').replace(
        '"byte","134,221,568"', '"Mbyte","134.221568"'
    )
    assert scaled != source
    path = tmp_path / "scaled.csv"
    path.write_text("some program output\n" + scaled, encoding="utf-8")
    original, converted = read_report(FIXTURES / "ncu-csv" / "rtx5070_details_saxpy.csv"), read_report(path)
    for name in ("gpu__time_duration.sum", "dram__bytes_op_read.sum"):
        assert converted.kernels[0].metrics[name] == pytest.approx(original.kernels[0].metrics[name])


@pytest.mark.realdata
def test_damaged_and_foreign_reports(tmp_path: Path) -> None:
    needs_ncu_report()
    truncated = tmp_path / "cut.ncu-rep"
    truncated.write_bytes((FIXTURES / "ncu-rep" / "a10_inference_105_kernels.ncu-rep").read_bytes()[:5000])
    with pytest.raises(UserError, match="holds no profiled kernels"):
        read_report(truncated)
    foreign = tmp_path / "notes.ncu-rep"
    shutil.copy(FAILED, foreign)
    with pytest.raises(UserError, match="holds no profiled kernels"):
        read_report(foreign)
    with pytest.raises(UserError, match="not found"):
        read_report(tmp_path / "missing.ncu-rep")


@pytest.mark.realdata
def test_without_ncu_report_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # what Python does for a module that is not installed
    with pytest.raises(UserError, match=r"pip install 'fleetbench\[ncu\]'"):
        read_report(REPORTS[0])
