"""The one GPU table (fleetbench.gpus): coverage, FP8/FP4 support, SMs, and both consumers on one entry.

MFU (fleetbench.train.flops) and the Nsight Compute summary read the same entry: the test takes the
entry a real A10G report's summary uses and the peak MFU divides by on that device, and checks that
they are one and the same row, figure for figure.
"""

from __future__ import annotations

import pytest

from fleetbench.gpus import DATASHEET, datasheet_peak, peaks_of
from fleetbench.train.flops import resolve_peak, table_peak
from testdata import get_test_data_dir, missing_reason

# torch's device names (torch.cuda.get_device_name) of the GPUs the table must cover, and the row each is
ROWS = {
    "Tesla V100-SXM2-32GB": "V100 SXM2",
    "Tesla T4": "T4",
    "NVIDIA A10": "A10",
    "NVIDIA A10G": "A10G",
    "NVIDIA A100-SXM4-80GB": "A100 80GB SXM",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H200": "H200 SXM",
    "NVIDIA B200": "B200",
    "NVIDIA GB200": "GB200 (per Blackwell GPU)",
    "NVIDIA GeForce RTX 3090": "GeForce RTX 3090",
    "NVIDIA GeForce RTX 4090": "GeForce RTX 4090",
    "NVIDIA GeForce RTX 5090": "GeForce RTX 5090",
    "Jetson AGX Orin 64GB": "Jetson AGX Orin 64GB",
    "AMD Instinct MI300X": "AMD Instinct MI300X",
}
# FP8 / FP4 tensor cores: Ada (8.9), Hopper (9.0) and Blackwell have FP8, Blackwell FP4; MI300X FP8.
FP8 = {"L4", "L40S", "H100 SXM", "H100 PCIe", "H200 SXM", "B200", "GB200 (per Blackwell GPU)",
       "GeForce RTX 4090", "GeForce RTX 5090", "AMD Instinct MI300X"}  # fmt: skip
FP4 = {"B200", "GB200 (per Blackwell GPU)", "GeForce RTX 5090"}


@pytest.mark.parametrize(("name", "model"), ROWS.items())
def test_the_table_covers_the_gpus_people_train_on(name: str, model: str) -> None:
    sheet = datasheet_peak(name)
    assert sheet is not None and sheet.model == model
    assert sheet.memory_bytes_per_second and len(sheet.source) > 20
    assert sheet.has_fp8 == (model in FP8) and sheet.has_fp4 == (model in FP4)
    if sheet.fp8_tensor is not None:  # dense FP8 is twice dense BF16 on every part that lists both
        assert sheet.bf16_tensor is not None and sheet.fp8_tensor == pytest.approx(2 * sheet.bf16_tensor, rel=0.02)
    if model not in ("B200", "GB200 (per Blackwell GPU)"):  # no NVIDIA document gives their SM count
        assert sheet.sm_count is not None and 4 <= sheet.sm_count <= 304


def test_datasheet_figures_of_known_parts() -> None:
    h100 = datasheet_peak("NVIDIA H100 80GB HBM3")
    assert h100 is not None and (h100.bf16_tensor, h100.fp8_tensor, h100.sm_count) == (989e12, 1979e12, 132)
    b200 = datasheet_peak("NVIDIA B200")
    assert b200 is not None and (b200.fp8_tensor, b200.fp4_tensor) == (4.5e15, 9e15)
    mi300x = datasheet_peak("AMD Instinct MI300X")
    assert mi300x is not None and (mi300x.bf16_tensor, mi300x.sm_count) == (1307.4e12, 304)
    # the roofline takes the FP8 roof for FP8 ops only: an unlisted dtype falls back to FP32, not to FP8
    roofs = peaks_of(h100, "NVIDIA H100 80GB HBM3")
    assert roofs.compute_peak("float8_e4m3fn") == ("float8_e4m3fn", 1979e12)
    assert roofs.compute_peak("int8") == ("float32", 67e12)


@pytest.mark.parametrize("name", [n for n in ROWS if datasheet_peak(n) and datasheet_peak(n).bf16_tensor])  # type: ignore[union-attr]
def test_mfu_divides_by_the_table_entry(name: str) -> None:
    sheet = datasheet_peak(name)
    peak, warning = resolve_peak("cuda", name, "bfloat16", threads=1, configured=None)
    assert sheet is not None and peak is not None and warning is None
    assert peak.flop_per_second == sheet.bf16_tensor and sheet.model in peak.source


def test_every_entry_with_bf16_gives_mfu_and_the_others_none() -> None:
    for pattern, _geforce, sheet in DATASHEET:
        del pattern
        found = table_peak(sheet.model)
        if datasheet_peak(sheet.model) is not sheet:
            continue  # a model name another row's pattern takes first (e.g. 'A100 40GB' vs 'A100')
        assert (found is None) == (sheet.bf16_tensor is None), sheet.model


@pytest.mark.realdata
def test_mfu_and_the_ncu_summary_read_the_same_entry() -> None:
    if (reason := missing_reason()) is not None:
        pytest.skip(reason)
    pytest.importorskip("ncu_report", reason="ncu_report (the ncu extra) reads .ncu-rep files")
    from fleetbench.profile.ncu.summary import summarize_path

    summary = summarize_path(get_test_data_dir() / "ncu-rep" / "a10g_sgemm_warptiling.ncu-rep")
    (device,) = summary.devices
    assert summary.peaks is not None and summary.peaks is datasheet_peak(device)  # the row itself
    peak, _ = resolve_peak("cuda", device, "bfloat16", threads=1, configured=None)
    assert peak is not None and peak.flop_per_second == summary.peaks.bf16_tensor
    assert peak.source == f"table: {summary.peaks.model} (bf16 dense)"
