"""Peaks (datasheet and measured, cached per device) and the roofline (analytical and from ncu)."""

from __future__ import annotations

import json
import struct
from io import StringIO
from pathlib import Path

import pytest
import torch
from rich.console import Console

from fleetbench.cli.views.profile import CACHE_RESIDENT, FixRow, fixes_table, roofline_table
from fleetbench.devices import resolve_device
from fleetbench.errors import UserError
from fleetbench.gpus import (
    DATASHEET,
    Peaks,
    datasheet_peak,
    parse_peak,
    peaks_from_datasheet,
    unknown_gpu,
)
from fleetbench.profile.capture import load_ops
from fleetbench.profile.classify import Thresholds
from fleetbench.profile.ncu.readers import read_report
from fleetbench.profile.ncu.summary import summarize_report
from fleetbench.profile.peaks import PeakRequest, cache_file, measured_peaks, triad_probe
from fleetbench.profile.roofline.analysis import (
    OpStat,
    analytical_roofline,
    attainable,
    ncu_roofline,
    op_rows,
    plot_roofline,
)
from testdata import get_test_data_dir

FIXTURES = get_test_data_dir()


@pytest.mark.parametrize(
    ("device", "model", "bandwidth"),
    [
        ("NVIDIA H200", "H200 SXM", 4.8e12),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 3.35e12),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2.0e12),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM", 2.039e12),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe", 1.935e12),
        ("NVIDIA A100-PG509-200", "A100 40GB", 1.555e12),
        ("NVIDIA GH200 480GB", "GH200 96GB HBM3", 4.0e12),
        ("NVIDIA A10", "A10", 600e9),
        ("Tesla T4", "T4", 320e9),
        ("NVIDIA B200", "B200", 8.0e12),
        ("NVIDIA GB200", "GB200 (per Blackwell GPU)", 8.0e12),
        ("NVIDIA H800", "H800 SXM", 3.35e12),
        ("NVIDIA H800 PCIe", "H800 PCIe", 2.0e12),
        ("NVIDIA H200 NVL", "H200 NVL", 4.8e12),
        ("NVIDIA A10G", "A10G", 600e9),  # not A10, not A100
        ("NVIDIA A40", "A40", 696e9),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB", 1.555e12),
        ("NVIDIA L40S", "L40S", 864e9),
        ("NVIDIA L40", "L40", 864e9),
        ("NVIDIA L4", "L4", 300e9),
        ("Tesla V100-SXM2-32GB", "V100 SXM2", 900e9),
        ("Tesla V100-PCIE-32GB", "V100 PCIe", 900e9),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", 1008e9),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", "GeForce RTX 4070 Ti SUPER", 672e9),
        ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090", 936e9),
        ("NVIDIA GeForce RTX 2080 Ti", "GeForce RTX 2080 Ti", 616e9),
        ("NVIDIA GeForce RTX 5090", "GeForce RTX 5090", 1792e9),
        ("NVIDIA GeForce RTX 5070", "GeForce RTX 5070", 672e9),
        ("Jetson AGX Orin 64GB", "Jetson AGX Orin 64GB", 204.8e9),
        ("Jetson Orin Nano 8GB", "Jetson Orin Nano 8GB", 68e9),
    ],
)
def test_datasheet_table(device: str, model: str, bandwidth: float) -> None:
    sheet = datasheet_peak(device)
    assert sheet is not None and sheet.model == model
    assert sheet.memory_bytes_per_second == bandwidth
    assert sheet.source and sheet.cc  # every entry names where its figures come from


def test_every_entry_names_its_sources_and_no_tensor_figure_is_sparse() -> None:
    for _, _, sheet in DATASHEET:
        assert len(sheet.source) > 20, sheet.model
        dense = [v for v in (sheet.bf16_tensor, sheet.fp16_tensor) if v is not None]
        assert all(sheet.fp32 is None or v >= sheet.fp32 for v in dense), sheet.model  # tensor over FP32
        assert sheet.memory_bytes_per_second is not None and 30e9 <= sheet.memory_bytes_per_second <= 10e12


def test_datasheet_misses_are_none_not_a_guess() -> None:
    assert datasheet_peak("Intel(R) Xeon(R) CPU") is None
    assert datasheet_peak("NVIDIA GeForce RTX 3050 Ti Laptop GPU") is None  # not the desktop RTX 3050
    assert datasheet_peak("Orin") is None  # which module: the line says how to name it
    assert "Jetson AGX Orin 64GB" in unknown_gpu("Orin")
    line = unknown_gpu("device 0 (CC 8.9)")
    assert "--gpu" in line and "--peak" in line and "L4" in line and "GeForce RTX 4090" in line


def test_peaks_given_on_the_command_line() -> None:
    sheet = parse_peak("dram=864GB/s, fp32=91.6TFLOPS,tensor=366")
    assert (sheet.memory_bytes_per_second, sheet.fp32, sheet.bf16_tensor) == (864e9, 91.6e12, 366e12)
    assert parse_peak("dram=3.35TB/s").memory_bytes_per_second == 3.35e12
    with pytest.raises(UserError, match="KEY=NUMBER"):
        parse_peak("dram=fast")
    t4 = peaks_from_datasheet("Tesla T4")
    assert t4 is not None and "bfloat16" not in t4.flop_per_second  # T4 has no bf16: absent, not 0
    h200 = peaks_from_datasheet("NVIDIA H200")
    assert h200 is not None and h200.flop_per_second["bfloat16"] == 989e12


def test_triad_moves_three_arrays() -> None:
    result = triad_probe(4, torch.float32, resolve_device("cpu"), 0.02, 1)
    numel = 4 * 2**20 // 4
    assert result.bytes_moved == 3 * numel * 4 and result.flops == 2 * numel
    assert result.bytes_per_second > 0


def test_measured_peaks_are_cached_per_device(tmp_path: Path) -> None:
    device = resolve_device("cpu")
    request = PeakRequest(
        dtypes=["float32"], matmul_n=128, copy_mib=2, min_run_time_s=0.02, threads=torch.get_num_threads()
    )
    first = measured_peaks(device, request, tmp_path)
    assert first.source == "measured" and not first.detail["cached"]
    assert set(first.detail["measured_now"]) == {"matmul float32", "copy", "triad"}
    path = cache_file(tmp_path, device, request.threads)
    stored = json.loads(path.read_text())
    assert stored["device"] == device.name and stored["matmul_n"] == 128
    assert first.bytes_per_second == max(stored["bytes_per_second"].values())

    second = measured_peaks(device, request, tmp_path)
    assert second.detail["cached"] and second.flop_per_second == first.flop_per_second

    again = measured_peaks(device, request, tmp_path, remeasure=True)
    assert not again.detail["cached"]
    other = measured_peaks(device, PeakRequest(["float32"], 128, 4, 0.02, request.threads), tmp_path)
    assert not other.detail["cached"]  # a different copy size is a different measurement


def test_an_unwritable_cache_warns_and_the_run_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    warnings: list[str] = []
    peaks = measured_peaks(
        resolve_device("cpu"), PeakRequest(["float32"], 64, 1, 0.01, 1), blocker / "cache", warn=warnings.append
    )
    assert peaks.flop_per_second["float32"] > 0
    assert warnings and "not written" in warnings[0]


def test_analytical_roofline_places_points_against_the_ridge() -> None:
    peaks = Peaks(
        device="test", backend="cpu", source="measured", flop_per_second={"float32": 1e11}, bytes_per_second=1e10
    )  # ridge at 10 FLOP/B
    ops = [
        OpStat("aten::mm", "aten::mm", 1, time_s=1.0, self_time_s=1.0, flops=9e10, bytes=1e9, dtype="float32"),
        OpStat("aten::add", "aten::add", 1, time_s=1.0, self_time_s=1.0, flops=1e9, bytes=9e9, dtype="float32"),
        OpStat("aten::copy_", "aten::copy_", 1, time_s=1.0, self_time_s=1.0, flops=0, bytes=1e9, dtype="float32"),
    ]
    roofline = analytical_roofline(ops, peaks)
    points = {p.label: p for p in roofline.points}
    assert set(points) == {"aten::mm", "aten::add"}
    mm, add = points["aten::mm"], points["aten::add"]
    assert mm.ridge == pytest.approx(10.0) and mm.arithmetic_intensity == pytest.approx(90.0)
    assert mm.side == "compute" and mm.cls == "compute_bound"  # 90 % of peak FLOP/s, 10 % of bandwidth
    assert mm.roof_fraction == pytest.approx(0.9)
    assert add.side == "memory" and add.cls == "memory_bound"  # 1 % of peak FLOP/s, 90 % of bandwidth
    assert add.roof_fraction == pytest.approx(1e9 / attainable(1e9 / 9e9, 1e11, 1e10))
    assert any("without a FLOP count" in note for note in roofline.notes)
    assert not any("above the compute roof" in note for note in roofline.notes)


def test_ops_above_the_compute_roof_are_counted_with_how_far_above() -> None:
    peaks = Peaks(
        device="test", backend="cuda", source="measured", flop_per_second={"bfloat16": 1e11}, bytes_per_second=1e10
    )
    ops = [
        OpStat("aten::mm", "aten::mm", 1, time_s=1.0, self_time_s=1.0, flops=1.12e11, bytes=1e8, dtype="bfloat16"),
        OpStat("aten::bmm", "aten::bmm", 1, time_s=1.0, self_time_s=1.0, flops=1.04e11, bytes=1e8, dtype="bfloat16"),
    ]
    notes = [n for n in analytical_roofline(ops, peaks).notes if "above the compute roof" in n]
    assert notes == [
        "1 ops sit above the compute roof (up to 112% of it): the measured peak is below what they reached, on a "
        "busy machine or where the peak probe's sustained matmul ran at lower clocks than the ops' bursts (a "
        "GPU's power limit); remeasure with profile.remeasure_peaks=true"
    ]


TEN_GB = Peaks(
    device="test", backend="cpu", source="measured", flop_per_second={"float32": 1e11}, bytes_per_second=1e10
)


def op(name: str, flops: float, nbytes: float, source: str = "none") -> OpStat:
    return OpStat(
        name, name, 1, time_s=1.0, self_time_s=1.0, flops=flops, bytes=nbytes, dtype="float32", flop_source=source
    )


def test_bytes_only_ops_are_memory_traffic_classed_by_their_bytes() -> None:
    ops = [
        op("aten::copy_", 0, 9e9),
        op("aten::fill_", 0, 1e9),
        op("aten::frobnicate", 0, 0),
        op("aten::transpose", 0, 0),
    ]
    rows = {row["name"]: row for row in op_rows(ops, TEN_GB, Thresholds(), top=10)}
    copy, fill, other = rows["aten::copy_"], rows["aten::fill_"], rows["aten::frobnicate"]
    assert copy["class"] == "memory_bound" and copy["memory_ratio"] == pytest.approx(0.9)  # 9 GB/s of 10
    assert fill["class"] == "latency_bound"  # 1 GB/s of 10: not bandwidth that holds it back
    assert copy["compute_ratio"] is None and copy["flop_source"] == "none"
    assert "no FLOPs counted" in copy["reason"]
    assert other["class"] == "unknown"  # neither FLOPs nor bytes: nothing to class by
    view = rows["aten::transpose"]  # a view: no work of its own, its time is overhead
    assert view["class"] == "latency_bound" and "view" in view["reason"]


def test_ops_above_the_dram_roof_are_cache_resident() -> None:
    ops = [op("aten::add_", 1.7e9, 1.7e10, "op table"), op("aten::copy_", 0, 1.12e10)]  # 170 %, 112 % of 10 GB/s
    rows = {row["name"]: row for row in op_rows(ops, TEN_GB, Thresholds(), top=10)}
    assert rows["aten::add_"]["class"] == "cache_resident" and rows["aten::add_"]["flop_source"] == "op table"
    assert rows["aten::copy_"]["class"] == "cache_resident"
    assert "DRAM roof" in rows["aten::add_"]["reason"]
    roofline = analytical_roofline(ops, TEN_GB)
    (point,) = roofline.points
    assert point.cls == "cache_resident" and point.side == "memory" and point.roof_fraction == pytest.approx(1.7)
    assert any("1 ops sit above the DRAM roof, labelled cache_resident" in note for note in roofline.notes)
    assert any("op table 1, none 1" in note for note in roofline.notes)  # where the FLOPs came from
    buffer = StringIO()
    console = Console(file=buffer, width=200)
    console.print(
        fixes_table(
            "ops",
            [
                FixRow(r["short"], r["self_time_s"], r["compute_ratio"], r["memory_ratio"], r["class"], r["fix_short"])
                for r in rows.values()
            ],
        )
    )
    console.print(roofline_table(roofline, 5))
    text = buffer.getvalue()
    assert text.count(CACHE_RESIDENT) == 3 and "170.0%" not in text and "112.0%" not in text


def test_ops_json_from_before_flop_sources_loads(tmp_path: Path) -> None:
    path = tmp_path / "ops.json"
    rows = [
        {
            "name": "aten::mm",
            "label": "aten::mm",
            "count": 1,
            "time_s": 1.0,
            "self_time_s": 1.0,
            "flops": 8.0,
            "bytes": 4.0,
            "dtype": "float32",
        },
        {
            "name": "aten::copy_",
            "label": "aten::copy_",
            "count": 1,
            "time_s": 1.0,
            "self_time_s": 1.0,
            "flops": 0.0,
            "bytes": 4.0,
            "dtype": None,
        },
    ]
    path.write_text(json.dumps(rows))
    mm, copy = load_ops(path)
    assert mm.flop_source == "torch.profiler" and copy.flop_source == "none"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.realdata
def test_ncu_roofline_from_a_real_report(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")
    summary = summarize_report(read_report(FIXTURES / "ncu-rep" / "gtx1660s_naive_gemm.ncu-rep"))
    roofline = ncu_roofline(summary)
    assert roofline.peaks["source"] == "ncu counters"
    assert roofline.peaks["bytes_per_second"] == pytest.approx(336e9, rel=0.01)
    (point,) = roofline.points
    assert point.short == "naive_gemm" and point.arithmetic_intensity == pytest.approx(14.2, rel=0.01)
    ridge = roofline.peaks["flop_per_second"]["float32"] / roofline.peaks["bytes_per_second"]
    assert point.side == ("memory" if point.arithmetic_intensity < ridge else "compute")
    png = plot_roofline(roofline, tmp_path / "roofline.png")
    assert png_size(png) == (1080, 720)


@pytest.mark.realdata
def test_ncu_roofline_without_counters_says_why(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")
    summary = summarize_report(read_report(FIXTURES / "ncu-rep" / "a10_inference_105_kernels.ncu-rep"))
    roofline = ncu_roofline(summary)
    assert roofline.peaks["source"] == "datasheet"  # A10: no peak counters in this report, the table has it
    assert roofline.points == []
    assert any("1 of 1 kernels (105 launches) lack FLOP or DRAM byte counters" in n for n in roofline.notes)
    assert png_size(plot_roofline(roofline, tmp_path / "r.png"))[0] > 0
