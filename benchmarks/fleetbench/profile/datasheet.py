"""Datasheet peaks of common GPUs (dense FLOP/s per format, memory bandwidth), and the `Peaks` a roofline needs.

Torch-free on purpose: report readers (Nsight Compute summaries, their rooflines) use this table on
hosts that have no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DatasheetPeak:
    """One GPU's datasheet figures (dense FLOP/s; None where the GPU lacks the format) and where they come from."""

    model: str
    bf16_tensor: float | None  # dense (no sparsity) FLOP/s
    fp16_tensor: float | None
    fp32: float | None  # non-tensor FP32
    memory_bytes_per_second: float
    source: str


# Dense figures (the datasheets print sparse tensor figures as 2x these). Order matters: the first
# pattern that matches the lower-cased device name wins.
DATASHEET: tuple[tuple[str, DatasheetPeak], ...] = (
    # NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/h200): SXM FP32 67 TF, BF16 1,979 TF sparse,
    # 4.8 TB/s; NVL FP32 60 TF, BF16 1,671 TF sparse, 4.8 TB/s.
    (
        r"gh200.*(624|144)",
        DatasheetPeak(
            "GH200 144GB HBM3e", 989e12, 989e12, 67e12, 4.9e12, "NVIDIA GH200 Grace Hopper Superchip datasheet (HBM3e)"
        ),
    ),
    # NVIDIA GH200 Grace Hopper Superchip datasheet: H100-class GPU, 96 GB HBM3 at 4 TB/s ("480GB").
    (
        r"gh200",
        DatasheetPeak(
            "GH200 96GB HBM3", 989e12, 989e12, 67e12, 4.0e12, "NVIDIA GH200 Grace Hopper Superchip datasheet (HBM3)"
        ),
    ),
    (r"h200.*nvl", DatasheetPeak("H200 NVL", 835e12, 835e12, 60e12, 4.8e12, "NVIDIA H200 datasheet")),
    (r"h200", DatasheetPeak("H200 SXM", 989e12, 989e12, 67e12, 4.8e12, "NVIDIA H200 datasheet")),
    # NVIDIA H100 Tensor Core GPU datasheet: SXM FP32 67 TF, BF16 1,979 TF sparse, 3.35 TB/s;
    # PCIe FP32 51 TF, BF16 1,513 TF sparse, 2 TB/s; NVL FP32 60 TF, BF16 1,671 TF sparse, 3.9 TB/s.
    (r"h100.*nvl", DatasheetPeak("H100 NVL", 835e12, 835e12, 60e12, 3.9e12, "NVIDIA H100 datasheet")),
    (r"h100.*pcie", DatasheetPeak("H100 PCIe", 756e12, 756e12, 51e12, 2.0e12, "NVIDIA H100 datasheet")),
    (r"h100", DatasheetPeak("H100 SXM", 989e12, 989e12, 67e12, 3.35e12, "NVIDIA H100 datasheet")),
    # NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TF, BF16/FP16 312 TF dense; HBM2e 80GB
    # PCIe 1,935 GB/s, 80GB SXM 2,039 GB/s; 40GB 1,555 GB/s.
    (
        r"a100.*80\s*gb.*pcie|a100.*pcie.*80\s*gb",
        DatasheetPeak("A100 80GB PCIe", 312e12, 312e12, 19.5e12, 1.935e12, "NVIDIA A100 datasheet"),
    ),
    (r"a100.*80\s*gb", DatasheetPeak("A100 80GB SXM", 312e12, 312e12, 19.5e12, 2.039e12, "NVIDIA A100 datasheet")),
    (r"a100", DatasheetPeak("A100 40GB", 312e12, 312e12, 19.5e12, 1.555e12, "NVIDIA A100 datasheet")),
    # NVIDIA HGX B200 (Blackwell) datasheet: FP16/BF16 4.5 PF sparse per GPU, HBM3e 8 TB/s.
    (r"b200", DatasheetPeak("B200", 2.25e15, 2.25e15, None, 8.0e12, "NVIDIA HGX B200 datasheet")),
    # NVIDIA L40S datasheet: FP32 91.6 TF, BF16 733 TF sparse, 864 GB/s.
    (r"l40s", DatasheetPeak("L40S", 366e12, 366e12, 91.6e12, 864e9, "NVIDIA L40S datasheet")),
    # NVIDIA L4 datasheet: FP32 30.3 TF, BF16 242 TF sparse, 300 GB/s.
    (r"\bl4\b", DatasheetPeak("L4", 121e12, 121e12, 30.3e12, 300e9, "NVIDIA L4 datasheet")),
    # GeForce RTX 5070 specifications (nvidia.com): 6,144 CUDA cores at 2.51 GHz boost (30.9 TF FP32),
    # 12 GB GDDR7 on 192 bits at 28 Gbps = 672 GB/s. Tensor figures left out: GeForce cards halve
    # FP32-accumulate tensor throughput and NVIDIA publishes only the FP4 sparse "AI TOPS".
    (
        r"rtx\s*5070(?!\s*ti)",
        DatasheetPeak("GeForce RTX 5070", None, None, 30.9e12, 672e9, "NVIDIA GeForce RTX 5070 specifications"),
    ),
    # NVIDIA A10 datasheet: FP32 31.2 TF, BF16 250 TF sparse, 600 GB/s.
    (r"\ba10\b", DatasheetPeak("A10", 125e12, 125e12, 31.2e12, 600e9, "NVIDIA A10 datasheet")),
    # NVIDIA T4 datasheet: FP32 8.1 TF, mixed FP16/FP32 65 TF, 320 GB/s (no BF16).
    (r"\bt4\b", DatasheetPeak("T4", None, 65e12, 8.1e12, 320e9, "NVIDIA T4 datasheet")),
    # NVIDIA V100 datasheet (SXM2): FP32 15.7 TF, tensor 125 TF, 900 GB/s (no BF16).
    (r"v100", DatasheetPeak("V100 SXM2", None, 125e12, 15.7e12, 900e9, "NVIDIA V100 datasheet")),
    # AMD Instinct MI300X data sheet: FP32 vector 163.4 TF, BF16 1,307.4 TF dense, 5.3 TB/s.
    (r"mi300x", DatasheetPeak("MI300X", 1307.4e12, 1307.4e12, 163.4e12, 5.3e12, "AMD Instinct MI300X data sheet")),
)


def datasheet_peak(device_name: str) -> DatasheetPeak | None:
    """The first DATASHEET entry whose pattern matches the device name, or None for an unknown device."""
    name = device_name.lower()
    for pattern, peak in DATASHEET:
        if re.search(pattern, name):
            return peak
    return None


@dataclass
class Peaks:
    """What a roofline needs: FLOP/s per dtype and a bandwidth, with where they came from."""

    device: str
    backend: str
    source: str  # measured | datasheet | ncu counters
    flop_per_second: dict[str, float] = field(default_factory=dict)
    bytes_per_second: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def compute_peak(self, dtype: str | None) -> tuple[str, float] | None:
        """The roof for an op's dtype; float32 when the dtype was not measured."""
        for key in (dtype, "float32"):
            if key is not None and key in self.flop_per_second:
                return key, self.flop_per_second[key]
        if self.flop_per_second:
            key = max(self.flop_per_second, key=lambda k: self.flop_per_second[k])
            return key, self.flop_per_second[key]
        return None


def peaks_from_datasheet(device_name: str, backend: str = "cuda") -> Peaks | None:
    """The datasheet roofs of a known GPU (bf16, fp16, fp32 where listed), or None."""
    sheet = datasheet_peak(device_name)
    if sheet is None:
        return None
    flops = {
        dtype: value
        for dtype, value in (("bfloat16", sheet.bf16_tensor), ("float16", sheet.fp16_tensor), ("float32", sheet.fp32))
        if value is not None
    }
    return Peaks(
        device=device_name,
        backend=backend,
        source="datasheet",
        flop_per_second=flops,
        bytes_per_second=sheet.memory_bytes_per_second,
        detail={"model": sheet.model, "reference": sheet.source},
    )
