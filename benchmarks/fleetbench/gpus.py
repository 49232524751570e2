"""The GPU table: datasheet peaks (dense FLOP/s per format, memory bandwidth, FP8/FP4, SMs), and the roofline's `Peaks`.

The one table every consumer reads: MFU's peak (fleetbench.train.flops), the analytical roofline
(fleetbench.profile.roofline), the Nsight Compute summary's derived figures and its advice (FP8/FP4
only on a GPU that has it), and the trainer's float8 switch (refused where the GPU has no FP8).

Torch-free on purpose: report readers (Nsight Compute summaries, their rooflines) use this table on
hosts that have no torch.

Every figure is dense (the datasheets print sparse tensor figures as 2x these) and names its source
beside it (`source`). The tensor figure is the FP16/BF16 tensor rate with FP32 accumulate, what
PyTorch's fp16/bf16 matmuls run at: GeForce cards run it at half their FP16-accumulate rate, so
their figure is the architecture whitepaper's "FP16 Tensor TFLOPS with FP32 Accumulate". A figure
no NVIDIA document gives is None (absent), never a guess; where a figure is computed from a
document's counts (CUDA cores x 2 x boost clock), the source says so. GeForce entries do not match
laptop parts ("Laptop GPU", "Max-Q"), whose clocks and power differ from the desktop card's.

A GPU the table lacks gets one line (`unknown_gpu`) naming `--gpu` and `--peak` (`parse_peak`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from fleetbench.errors import UserError


@dataclass(frozen=True)
class DatasheetPeak:
    """One GPU's datasheet figures (dense FLOP/s; None where the GPU lacks the format) and where they come from."""

    model: str
    bf16_tensor: float | None  # dense (no sparsity) FLOP/s, FP32 accumulate
    fp16_tensor: float | None
    fp32: float | None  # non-tensor FP32
    memory_bytes_per_second: float | None
    source: str
    cc: str = ""  # compute capability, as ncu prints it beside "device N" (an AMD part: its gfx target)
    fp8_tensor: float | None = None  # dense FP8 tensor FLOP/s (FP32 accumulate), where a document gives it
    fp4_tensor: float | None = None  # dense FP4 tensor FLOP/s
    sm_count: int | None = None  # streaming multiprocessors (compute units on AMD)

    def _cc_at_least(self, major: int, minor: int) -> bool:
        parts = self.cc.split(".")
        return len(parts) == 2 and all(p.isdigit() for p in parts) and (int(parts[0]), int(parts[1])) >= (major, minor)

    @property
    def has_fp8(self) -> bool:
        """FP8 tensor cores: an FP8 figure, or an NVIDIA part of CC 8.9 (Ada) or later (Hopper, Blackwell)."""
        return self.fp8_tensor is not None or self._cc_at_least(8, 9)

    @property
    def has_fp4(self) -> bool:
        """FP4 tensor cores: an FP4 figure, or an NVIDIA part of CC 10.0 (Blackwell) or later."""
        return self.fp4_tensor is not None or self._cc_at_least(10, 0)


# The GPU table: one entry a line, `pattern | model | CC | BF16 | FP16 | FP32 | memory | FP8 | FP4 | SMs`,
# dense tensor and FP32 in TFLOP/s, memory in GB/s, `-` where no document gives the figure; the indented
# line under it is the source of its figures. SMs: the whitepaper's count, else the datasheet's CUDA cores
# over the FP32 lanes per SM (64 on Volta, Turing and GA100; 128 on GA10x, Ada, Hopper and Blackwell).
# FP8 on GeForce Ada is the whitepaper's "FP8 Tensor TFLOPS with FP32 Accumulate", twice its BF16 figure
# (the derived rows are derived the same way); FP8/FP4 support itself follows the architecture (CC 8.9
# and 10.0) where a card's figure is absent (`has_fp8`, `has_fp4`). The first pattern that matches the lower-cased device name wins, so more
# specific names come first. Models starting with "GeForce" or "TITAN" do not match laptop parts.
# Whitepaper figures are the FP16/BF16 tensor TFLOPS "with FP32 Accumulate"; where an architecture
# whitepaper's table has no line for a card, its figure is derived as the whitepaper derives its own:
# tensor cores x FMA per clock x 2 (x 1/2 for FP32 accumulate on GeForce) x boost clock.
_TABLE = r"""
gb200 | GB200 (per Blackwell GPU) | 10.0 | 2500 | 2500 | - | 8000 | 5000 | 10000 | -
    NVIDIA GB200 NVL72 datasheet: FP16/BF16 tensor 360 PFLOPS sparse, FP8 720 PFLOPS sparse, FP4 1,440 PFLOPS
    sparse and HBM3e 576 TB/s for 72 GPUs, i.e. 2.5 / 5 / 10 PFLOPS dense and 8 TB/s per GPU; no per-GPU FP32
    figure or SM count given
\bb200 | B200 | 10.0 | 2250 | 2250 | - | 8000 | 4500 | 9000 | -
    NVIDIA HGX B200 datasheet: FP16/BF16 tensor 4.5 PFLOPS sparse per GPU (2.25 dense), FP8 9 PFLOPS and FP4
    18 PFLOPS sparse per GPU (4.5 and 9 dense), HBM3e 8 TB/s per GPU; no per-GPU FP32 figure or SM count given
gh200.*(624|144) | GH200 144GB HBM3e | 9.0 | 989 | 989 | 67 | 4900 | 1979 | - | 132
    NVIDIA GH200 Grace Hopper Superchip datasheet (HBM3e): FP32 67 TF, BF16/FP16 1,979 TF sparse, FP8 3,958 TF sparse, 4.9 TB/s
gh200 | GH200 96GB HBM3 | 9.0 | 989 | 989 | 67 | 4000 | 1979 | - | 132
    NVIDIA GH200 Grace Hopper Superchip datasheet (HBM3, the "480GB" superchip): FP32 67 TF,
    BF16/FP16 1,979 TF sparse, FP8 3,958 TF sparse, 4 TB/s
h200.*nvl | H200 NVL | 9.0 | 835 | 835 | 60 | 4800 | 1670.5 | - | 132
    NVIDIA H200 Tensor Core GPU datasheet (NVL): FP32 60 TF, BF16/FP16 1,671 TF sparse, FP8 3,341 TF sparse, 4.8 TB/s
h200 | H200 SXM | 9.0 | 989 | 989 | 67 | 4800 | 1979 | - | 132
    NVIDIA H200 Tensor Core GPU datasheet (SXM): FP32 67 TF, BF16/FP16 1,979 TF sparse, FP8 3,958 TF sparse,
    4.8 TB/s; SMs: no count in the H200 datasheet, the GH100 SXM configuration of the H100 SXM (132)
h100.*nvl | H100 NVL | 9.0 | 835 | 835 | 60 | 3900 | 1670.5 | - | 132
    NVIDIA H100 Tensor Core GPU datasheet (NVL): FP32 60 TF, BF16/FP16 1,671 TF sparse, FP8 3,341 TF sparse,
    3.9 TB/s
h100.*pcie | H100 PCIe | 9.0 | 756 | 756 | 51 | 2000 | 1513 | - | 114
    NVIDIA H100 Tensor Core GPU datasheet (PCIe): FP32 51 TF, BF16/FP16 1,513 TF sparse, FP8 3,026 TF sparse,
    2 TB/s; 114 SMs (14,592 CUDA cores)
h100 | H100 SXM | 9.0 | 989 | 989 | 67 | 3350 | 1979 | - | 132
    NVIDIA H100 Tensor Core GPU datasheet (SXM): FP32 67 TF, BF16/FP16 1,979 TF sparse, FP8 3,958 TF sparse,
    3.35 TB/s; 132 SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper)
h800.*pcie | H800 PCIe | 9.0 | 756 | 756 | 51 | 2000 | 1513 | - | 114
    NVIDIA H800 Tensor Core GPU datasheet (PCIe): FP32 51 TF, BF16/FP16 1,513 TF sparse, 2 TB/s
h800 | H800 SXM | 9.0 | 989 | 989 | 67 | 3350 | 1979 | - | 132
    NVIDIA H800 Tensor Core GPU datasheet (SXM5): FP32 67 TF, BF16/FP16 1,979 TF sparse, 3.35 TB/s
a100.*80\s*gb.*pcie|a100.*pcie.*80\s*gb | A100 80GB PCIe | 8.0 | 312 | 312 | 19.5 | 1935 | - | - | 108
    NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TF, BF16/FP16 312 TF dense, 80GB PCIe 1,935 GB/s
a100.*80\s*gb | A100 80GB SXM | 8.0 | 312 | 312 | 19.5 | 2039 | - | - | 108
    NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TF, BF16/FP16 312 TF dense, 80GB SXM 2,039 GB/s
a100 | A100 40GB | 8.0 | 312 | 312 | 19.5 | 1555 | - | - | 108
    NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TF, BF16/FP16 312 TF dense, 40GB 1,555 GB/s
\ba30\b | A30 | 8.0 | 165 | 165 | 10.3 | 933 | - | - | 56
    NVIDIA A30 Tensor Core GPU datasheet: FP32 10.3 TF, BF16/FP16 330 TF sparse, 933 GB/s
\ba40\b | A40 | 8.6 | 149.7 | 149.7 | 37.4 | 696 | - | - | 84
    NVIDIA A40 datasheet: FP32 37.4 TF, BF16/FP16 tensor 299.4 TF sparse (149.7 dense), 696 GB/s
\ba10g\b | A10G | 8.6 | 70 | 70 | 35.0 | 600 | - | - | 80
    no NVIDIA datasheet (an AWS part): FP32 = 80 SMs x 128 lanes x 2 x 1.71 GHz boost, as the device attributes
    of an A10G ncu report give them; BF16/FP16 tensor 70 TF (FP32 accumulate) and 600 GB/s GDDR6 from
    Baseten's spec table "NVIDIA A10 vs A10G for ML model inference" (baseten.co/blog)
\ba10\b | A10 | 8.6 | 125 | 125 | 31.2 | 600 | - | - | 72
    NVIDIA A10 Tensor Core GPU datasheet: FP32 31.2 TF, BF16/FP16 250 TF sparse, 600 GB/s
\ba2\b | A2 | 8.6 | 18 | 18 | 4.5 | 200 | - | - | 10
    NVIDIA A2 Tensor Core GPU datasheet: FP32 4.5 TF, BF16/FP16 36 TF sparse, 200 GB/s
l40s | L40S | 8.9 | 362.05 | 362.05 | 91.6 | 864 | 733 | - | 142
    NVIDIA L40S datasheet: FP32 91.6 TF, BF16/FP16 362.05 TF dense (733 sparse), FP8 733 TF dense (1,466
    sparse), 864 GB/s, 18,176 CUDA cores
\bl40\b | L40 | 8.9 | 181.05 | 181.05 | 90.5 | 864 | 362 | - | 142
    NVIDIA L40 datasheet: FP32 90.5 TF, BF16/FP16 362.1 TF sparse, FP8 724 TF sparse, 864 GB/s, 18,176 CUDA
    cores
\bl4\b | L4 | 8.9 | 121 | 121 | 30.3 | 300 | 242.5 | - | 58
    NVIDIA L4 Tensor Core GPU datasheet: FP32 30.3 TF, BF16/FP16 242 TF sparse, FP8 485 TF sparse, 300 GB/s;
    7,424 CUDA cores
\bt4\b | T4 | 7.5 | - | 65 | 8.1 | 320 | - | - | 40
    NVIDIA T4 datasheet: FP32 8.1 TF, mixed precision FP16/FP32 65 TF, 320 GB/s (no BF16)
v100s | V100S PCIe | 7.0 | - | 130 | 16.4 | 1134 | - | - | 80
    NVIDIA V100 Tensor Core GPU datasheet (V100S PCIe): FP32 16.4 TF, tensor 130 TF, 1,134 GB/s
v100.*pcie | V100 PCIe | 7.0 | - | 112 | 14 | 900 | - | - | 80
    NVIDIA V100 Tensor Core GPU datasheet (PCIe): FP32 14 TF, tensor 112 TF, 900 GB/s
v100 | V100 SXM2 | 7.0 | - | 125 | 15.7 | 900 | - | - | 80
    NVIDIA V100 Tensor Core GPU datasheet (SXM2): FP32 15.7 TF, tensor 125 TF, 900 GB/s
rtx\s*5090 | GeForce RTX 5090 | 12.0 | - | - | 104.8 | 1792 | - | - | 170
    NVIDIA GeForce RTX 5090 specifications: 21,760 CUDA cores x 2 x 2.41 GHz, 32 GB GDDR7 at 1,792 GB/s; BLACKWELL
rtx\s*5080 | GeForce RTX 5080 | 12.0 | - | - | 56.3 | 960 | - | - | 84
    NVIDIA GeForce RTX 5080 specifications: 10,752 CUDA cores x 2 x 2.62 GHz, 16 GB GDDR7 at 960 GB/s; BLACKWELL
rtx\s*5070\s*ti | GeForce RTX 5070 Ti | 12.0 | - | - | 43.9 | 896 | - | - | 70
    NVIDIA GeForce RTX 5070 Ti specifications: 8,960 CUDA cores x 2 x 2.45 GHz, 16 GB GDDR7 at 896 GB/s; BLACKWELL
rtx\s*5070 | GeForce RTX 5070 | 12.0 | - | - | 30.9 | 672 | - | - | 48
    NVIDIA GeForce RTX 5070 specifications: 6,144 CUDA cores x 2 x 2.51 GHz, 12 GB GDDR7 on 192 bits at 28 Gbps
    = 672 GB/s; BLACKWELL
rtx\s*5060\s*ti | GeForce RTX 5060 Ti | 12.0 | - | - | 23.7 | 448 | - | - | 36
    NVIDIA GeForce RTX 5060 Ti specifications: 4,608 CUDA cores x 2 x 2.57 GHz, GDDR7 at 448 GB/s; BLACKWELL
rtx\s*5060 | GeForce RTX 5060 | 12.0 | - | - | 19.2 | 448 | - | - | 30
    NVIDIA GeForce RTX 5060 specifications: 3,840 CUDA cores x 2 x 2.50 GHz, GDDR7 at 448 GB/s; BLACKWELL
rtx\s*4090 | GeForce RTX 4090 | 8.9 | 165.2 | 165.2 | 82.6 | 1008 | 330.3 | - | 128
    NVIDIA Ada GPU Architecture whitepaper: FP32 82.6 TF, FP16/BF16 tensor 165.2 TF dense with FP32 accumulate,
    FP8 tensor 330.3 TF dense with FP32 accumulate, 1,008 GB/s, 128 SMs
rtx\s*4080\s*super | GeForce RTX 4080 SUPER | 8.9 | 104.4 | 104.4 | 52.2 | 736 | 208.8 | - | 80
    NVIDIA GeForce RTX 4080 SUPER specifications (10,240 CUDA cores, 2.55 GHz, 736 GB/s); tensor: 320 tensor
    cores x 128 FMA x 2 / 2 x 2.55 GHz, as the Ada whitepaper derives its table
rtx\s*4080 | GeForce RTX 4080 | 8.9 | 97.5 | 97.5 | 48.7 | 716.8 | 194.9 | - | 76
    NVIDIA Ada GPU Architecture whitepaper: FP32 48.7 TF, FP16/BF16 tensor 97.5 TF dense with FP32 accumulate,
    716.8 GB/s
rtx\s*4070\s*ti\s*super | GeForce RTX 4070 Ti SUPER | 8.9 | 88.2 | 88.2 | 44.1 | 672 | 176.4 | - | 66
    NVIDIA GeForce RTX 4070 Ti SUPER specifications (8,448 CUDA cores, 2.61 GHz, 672 GB/s); tensor: 264 tensor
    cores x 128 FMA x 2 / 2 x 2.61 GHz, as the Ada whitepaper derives its table
rtx\s*4070\s*ti | GeForce RTX 4070 Ti | 8.9 | 80.2 | 80.2 | 40.1 | 504 | 160.4 | - | 60
    NVIDIA GeForce RTX 4070 Ti specifications (7,680 CUDA cores, 2.61 GHz, 504 GB/s); tensor: 240 tensor cores
    x 128 FMA x 2 / 2 x 2.61 GHz, as the Ada whitepaper derives its table
rtx\s*4070\s*super | GeForce RTX 4070 SUPER | 8.9 | 71.0 | 71.0 | 35.5 | 504 | 142.0 | - | 56
    NVIDIA GeForce RTX 4070 SUPER specifications (7,168 CUDA cores, 2.48 GHz, 504 GB/s); tensor: 224 tensor
    cores x 128 FMA x 2 / 2 x 2.48 GHz, as the Ada whitepaper derives its table
rtx\s*4070 | GeForce RTX 4070 | 8.9 | 58.3 | 58.3 | 29.1 | 504 | 116.6 | - | 46
    NVIDIA GeForce RTX 4070 specifications (5,888 CUDA cores, 2.48 GHz, 504 GB/s); tensor: 184 tensor cores
    x 128 FMA x 2 / 2 x 2.48 GHz, as the Ada whitepaper derives its table
rtx\s*4060\s*ti | GeForce RTX 4060 Ti | 8.9 | 44.1 | 44.1 | 22.1 | 288 | 88.2 | - | 34
    NVIDIA GeForce RTX 4060 Ti specifications (4,352 CUDA cores, 2.54 GHz, 288 GB/s); tensor: 136 tensor cores
    x 128 FMA x 2 / 2 x 2.54 GHz, as the Ada whitepaper derives its table
rtx\s*4060 | GeForce RTX 4060 | 8.9 | 30.2 | 30.2 | 15.1 | 272 | 60.4 | - | 24
    NVIDIA GeForce RTX 4060 specifications (3,072 CUDA cores, 2.46 GHz, 272 GB/s); tensor: 96 tensor cores
    x 128 FMA x 2 / 2 x 2.46 GHz, as the Ada whitepaper derives its table
rtx\s*3090\s*ti | GeForce RTX 3090 Ti | 8.6 | 80.0 | 80.0 | 40.0 | 1008 | - | - | 84
    NVIDIA GeForce RTX 3090 Ti specifications (10,752 CUDA cores, 1.86 GHz, 1,008 GB/s); tensor: 336 tensor
    cores x 128 FMA x 2 / 2 x 1.86 GHz, as the Ampere GA102 whitepaper derives its table
rtx\s*3090 | GeForce RTX 3090 | 8.6 | 71 | 71 | 35.6 | 936 | - | - | 82
    NVIDIA Ampere GA102 GPU Architecture whitepaper: FP32 35.6 TF, FP16/BF16 tensor 71 TF dense with FP32
    accumulate, 936 GB/s
rtx\s*3080\s*ti | GeForce RTX 3080 Ti | 8.6 | 68.2 | 68.2 | 34.1 | 912 | - | - | 80
    NVIDIA GeForce RTX 3080 Ti specifications (10,240 CUDA cores, 1.67 GHz, 912 GB/s); tensor: 320 tensor
    cores x 128 FMA x 2 / 2 x 1.67 GHz, as the Ampere GA102 whitepaper derives its table
rtx\s*3080 | GeForce RTX 3080 (10 GB) | 8.6 | 59.5 | 59.5 | 29.8 | 760 | - | - | 68
    NVIDIA Ampere GA102 GPU Architecture whitepaper: FP32 29.8 TF, FP16/BF16 tensor 59.5 TF dense with FP32
    accumulate, 760 GB/s (the 12 GB card: 912 GB/s; name it with --peak)
rtx\s*3070\s*ti | GeForce RTX 3070 Ti | 8.6 | 43.5 | 43.5 | 21.7 | 608 | - | - | 48
    NVIDIA GeForce RTX 3070 Ti specifications (6,144 CUDA cores, 1.77 GHz, 608 GB/s); tensor: 192 tensor cores
    x 128 FMA x 2 / 2 x 1.77 GHz, as the Ampere GA102 whitepaper derives its table
rtx\s*3070 | GeForce RTX 3070 | 8.6 | 40.6 | 40.6 | 20.3 | 448 | - | - | 46
    NVIDIA Ampere GA102 GPU Architecture whitepaper (its GA104 table): FP32 20.3 TF, FP16/BF16 tensor 40.6 TF
    dense with FP32 accumulate, 448 GB/s
rtx\s*3060\s*ti | GeForce RTX 3060 Ti | 8.6 | 32.4 | 32.4 | 16.2 | 448 | - | - | 38
    NVIDIA GeForce RTX 3060 Ti specifications (4,864 CUDA cores, 1.67 GHz, 448 GB/s); tensor: 152 tensor cores
    x 128 FMA x 2 / 2 x 1.67 GHz, as the Ampere GA102 whitepaper derives its table
rtx\s*3060 | GeForce RTX 3060 (12 GB) | 8.6 | 25.5 | 25.5 | 12.7 | 360 | - | - | 28
    NVIDIA GeForce RTX 3060 specifications (3,584 CUDA cores, 1.78 GHz, 360 GB/s); tensor: 112 tensor cores
    x 128 FMA x 2 / 2 x 1.78 GHz, as the Ampere GA102 whitepaper derives its table
rtx\s*3050 | GeForce RTX 3050 (8 GB) | 8.6 | 18.2 | 18.2 | 9.1 | 224 | - | - | 20
    NVIDIA GeForce RTX 3050 specifications (2,560 CUDA cores, 1.78 GHz, 224 GB/s); tensor: 80 tensor cores
    x 128 FMA x 2 / 2 x 1.78 GHz, as the Ampere GA102 whitepaper derives its table
titan\s*rtx | TITAN RTX | 7.5 | - | 130 | 16.3 | 672 | - | - | 72
    NVIDIA Turing GPU Architecture whitepaper: FP32 16.3 TF, FP16 tensor 130 TF (full rate with FP32
    accumulate), 672 GB/s; no BF16 on Turing
rtx\s*2080\s*ti | GeForce RTX 2080 Ti | 7.5 | - | 53.8 | 13.4 | 616 | - | - | 68
    NVIDIA Turing GPU Architecture whitepaper (reference boost clock): FP32 13.4 TF, FP16 tensor 53.8 TF with
    FP32 accumulate, 616 GB/s; no BF16 on Turing
rtx\s*2080\s*super | GeForce RTX 2080 SUPER | 7.5 | - | 44.6 | 11.2 | 496 | - | - | 48
    NVIDIA GeForce RTX 2080 SUPER specifications (3,072 CUDA cores, 1.82 GHz, 496 GB/s); tensor: 384 tensor
    cores x 64 FMA x 2 / 2 x 1.82 GHz, as the Turing whitepaper derives its table
rtx\s*2080 | GeForce RTX 2080 | 7.5 | - | 40.3 | 10.1 | 448 | - | - | 46
    NVIDIA Turing GPU Architecture whitepaper (reference boost clock): FP32 10.1 TF, FP16 tensor 40.3 TF with
    FP32 accumulate, 448 GB/s
rtx\s*2070\s*super | GeForce RTX 2070 SUPER | 7.5 | - | 36.3 | 9.1 | 448 | - | - | 40
    NVIDIA GeForce RTX 2070 SUPER specifications (2,560 CUDA cores, 1.77 GHz, 448 GB/s); tensor: 320 tensor
    cores x 64 FMA x 2 / 2 x 1.77 GHz, as the Turing whitepaper derives its table
rtx\s*2070 | GeForce RTX 2070 | 7.5 | - | 29.9 | 7.5 | 448 | - | - | 36
    NVIDIA Turing GPU Architecture whitepaper (reference boost clock): FP32 7.5 TF, FP16 tensor 29.9 TF with
    FP32 accumulate, 448 GB/s
rtx\s*2060\s*super | GeForce RTX 2060 SUPER | 7.5 | - | 28.7 | 7.2 | 448 | - | - | 34
    NVIDIA GeForce RTX 2060 SUPER specifications (2,176 CUDA cores, 1.65 GHz, 448 GB/s); tensor: 272 tensor
    cores x 64 FMA x 2 / 2 x 1.65 GHz, as the Turing whitepaper derives its table
rtx\s*2060 | GeForce RTX 2060 | 7.5 | - | 25.8 | 6.5 | 336 | - | - | 30
    NVIDIA GeForce RTX 2060 specifications (1,920 CUDA cores, 1.68 GHz, 336 GB/s); tensor: 240 tensor cores
    x 64 FMA x 2 / 2 x 1.68 GHz, as the Turing whitepaper derives its table
agx\s*orin.*64 | Jetson AGX Orin 64GB | 8.7 | 42.5 | 42.5 | 5.3 | 204.8 | - | - | 16
    NVIDIA Jetson AGX Orin Series technical brief: 2,048 CUDA cores at 1.3 GHz = 5.3 TF FP32, 204.8 GB/s
    LPDDR5; tensor: the brief's GPU 170 sparse INT8 TOPS / 2 (dense) / 2 (FP16)
agx\s*orin.*32 | Jetson AGX Orin 32GB | 8.7 | - | - | 3.3 | 204.8 | - | - | 14
    NVIDIA Jetson AGX Orin Series technical brief: 1,792 CUDA cores at 930 MHz = 3.3 TF FP32, 204.8 GB/s LPDDR5
orin\s*nx.*16 | Jetson Orin NX 16GB | 8.7 | - | - | 1.88 | 102.4 | - | - | 8
    NVIDIA Jetson Orin NX Series data sheet: 1,024 CUDA cores at 918 MHz = 1.88 TF FP32, 102.4 GB/s LPDDR5
orin\s*nx | Jetson Orin NX 8GB | 8.7 | - | - | 1.57 | 102.4 | - | - | 8
    NVIDIA Jetson Orin NX Series data sheet: 1,024 CUDA cores at 765 MHz = 1.57 TF FP32, 102.4 GB/s LPDDR5
orin\s*nano.*super | Jetson Orin Nano Super 8GB | 8.7 | - | - | 2.09 | 102 | - | - | 8
    NVIDIA Jetson Orin Nano Super Developer Kit specifications: 1,024 CUDA cores at 1.02 GHz = 2.09 TF FP32,
    102 GB/s LPDDR5
orin\s*nano.*4 | Jetson Orin Nano 4GB | 8.7 | - | - | 0.64 | 34 | - | - | 4
    NVIDIA Jetson Orin Nano Series data sheet: 512 CUDA cores at 625 MHz = 0.64 TF FP32, 34 GB/s LPDDR5
orin\s*nano | Jetson Orin Nano 8GB | 8.7 | - | - | 1.28 | 68 | - | - | 8
    NVIDIA Jetson Orin Nano Series data sheet: 1,024 CUDA cores at 625 MHz = 1.28 TF FP32, 68 GB/s LPDDR5
mi325x | AMD Instinct MI325X | gfx942 | 1307.4 | 1307.4 | 81.7 | 6000 | 2614.9 | - | 304
    AMD Instinct MI325X datasheet: FP32 vector 81.7 TF, BF16/FP16 matrix 1,307.4 TF dense, FP8 2,614.9 TF dense,
    HBM3E 6 TB/s, 304 compute units (CUs in the SM column); no FP4
mi300x | AMD Instinct MI300X | gfx942 | 1307.4 | 1307.4 | 81.7 | 5300 | 2614.9 | - | 304
    AMD Instinct MI300X datasheet: FP32 vector 81.7 TF, BF16/FP16 matrix 1,307.4 TF dense, FP8 2,614.9 TF dense,
    HBM3 5.3 TB/s, 304 compute units (CUs in the SM column); no FP4
"""
# Blackwell GeForce: NVIDIA publishes their FP4 sparse "AI TOPS" and no FP16 tensor figure with FP32 accumulate
# that this table could use (GeForce runs it at half the FP16-accumulate rate): absent, not guessed.
_BLACKWELL = "tensor absent: no FP16-with-FP32-accumulate figure published for GeForce RTX 50 cards"


def _figure(cell: str, scale: float) -> float | None:
    return None if cell.strip() == "-" else float(cell) * scale


def _parse_table(text: str) -> tuple[tuple[str, bool, DatasheetPeak], ...]:
    """The GPU table's entries: (pattern, GeForce-only, figures with their source)."""
    entries: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("    "):
            entries[-1][-1] = f"{entries[-1][-1]} {line.strip()}".strip()
        elif line.strip():
            entries.append([*(cell.strip() for cell in line.split(" | ")), ""])
    table = []
    for pattern, model, cc, bf16, fp16, fp32, memory, fp8, fp4, sms, source in entries:
        said = source.replace("BLACKWELL", _BLACKWELL)
        peak = DatasheetPeak(
            model,
            _figure(bf16, 1e12),
            _figure(fp16, 1e12),
            _figure(fp32, 1e12),
            _figure(memory, 1e9),
            said,
            cc,
            fp8_tensor=_figure(fp8, 1e12),
            fp4_tensor=_figure(fp4, 1e12),
            sm_count=None if sms.strip() == "-" else int(sms),
        )
        table.append((pattern, model.startswith(("GeForce", "TITAN")), peak))
    return tuple(table)


DATASHEET: tuple[tuple[str, bool, DatasheetPeak], ...] = _parse_table(_TABLE)
# Names that match no single entry but a family: the line that says how to name the part.
AMBIGUOUS: tuple[tuple[str, str], ...] = (
    (
        r"\borin\b",
        "a Jetson Orin module: name which with --gpu ('Jetson AGX Orin 64GB', 'Jetson AGX Orin 32GB', "
        "'Jetson Orin NX 16GB', 'Jetson Orin NX 8GB', 'Jetson Orin Nano 8GB', 'Jetson Orin Nano Super 8GB')",
    ),
)
_LAPTOP = re.compile(r"laptop|mobile|max-q", re.IGNORECASE)
_CC = re.compile(r"CC (\d+\.\d+)")


def _key(pattern: str) -> str:
    """A literal every name the pattern matches contains (its longest word before any group or alternative):
    patterns are compiled only for names that contain their key, so a lookup compiles one or two, not all."""
    plain = re.split(r"[(|]", re.sub(r"\\[a-zA-Z]", " ", pattern), maxsplit=1)[0]
    return max(re.findall(r"[a-z0-9]+", plain), key=len, default="")


_KEYS = tuple(_key(pattern) for pattern, _, _ in DATASHEET)


@cache
def datasheet_peak(device_name: str) -> DatasheetPeak | None:
    """The first DATASHEET entry whose pattern matches the device name, or None for an unknown device."""
    name = device_name.lower()
    laptop = _LAPTOP.search(name) is not None
    for key, (pattern, geforce, peak) in zip(_KEYS, DATASHEET, strict=True):
        if (geforce and laptop) or key not in name:
            continue
        if re.search(pattern, name):
            return peak
    return None


def unknown_gpu(device_name: str) -> str:
    """One line for a device the table lacks: what it is, and how to supply its peaks (--gpu, --peak)."""
    name = device_name.lower()
    for pattern, hint in AMBIGUOUS:
        if re.search(pattern, name):
            return f"{device_name!r} is {hint}, or give its peaks with --peak"
    said = f"{device_name!r} is not in the GPU table"
    if _LAPTOP.search(name):
        said += " (laptop parts run other clocks than the desktop card of the same name)"
    cc = _CC.search(device_name)
    if cc:
        models = sorted({peak.model for _, _, peak in DATASHEET if peak.cc == cc[1]})
        if models:
            said += f"; CC {cc[1]} is one of {', '.join(models)}"
    return (
        f"{said}: name the GPU with --gpu NAME (profile.ncu.gpu), or give its peaks with "
        "--peak dram=GB/s,fp32=TFLOPS,tensor=TFLOPS (profile.ncu.peak)"
    )


MIN_PEAK, MAX_PEAK = 1.0, 1e30  # a peak in bytes/s or FLOP/s: at least one, and no more than any machine has
_PEAK_ITEM = re.compile(r"^\s*(dram|fp32|tensor|bf16|fp16)\s*=\s*([0-9.eE+]+)\s*([A-Za-z/]*)\s*$")
_BANDWIDTH_UNITS = {"": 1e9, "gb/s": 1e9, "gbps": 1e9, "tb/s": 1e12, "mb/s": 1e6, "b/s": 1.0}
_FLOP_UNITS = {"": 1e12, "tflops": 1e12, "tflop/s": 1e12, "gflops": 1e9, "gflop/s": 1e9, "pflops": 1e15}
_FLOP_UNITS["pflop/s"] = 1e15


def parse_peak(text: str) -> DatasheetPeak:
    """Peaks a user gives (`--peak dram=864GB/s,fp32=91.6TFLOPS,tensor=366TFLOPS`) as a DatasheetPeak.

    dram in GB/s (default), TB/s or MB/s; fp32 and tensor (or bf16, fp16) in TFLOPS (default), GFLOPS
    or PFLOPS, dense. UserError on anything else.
    """
    values: dict[str, float] = {}
    for item in text.split(","):
        match = _PEAK_ITEM.match(item)
        units = _BANDWIDTH_UNITS if match and match[1] == "dram" else _FLOP_UNITS
        unit = match[3].lower() if match else ""
        if match is None or unit not in units:
            raise UserError(
                f"--peak {text!r}: {item.strip()!r} is not KEY=NUMBER[UNIT]; write e.g. "
                "dram=864GB/s,fp32=91.6TFLOPS,tensor=366TFLOPS (dram in GB/s or TB/s, the others in TFLOPS)"
            )
        try:
            value = float(match[2]) * units[unit]
        except ValueError:
            raise UserError(f"--peak {text!r}: {match[2]!r} is not a number") from None
        # 0, 1e999 (inf) and a denormal divide every figure into nothing or everything: no peak is such
        if not MIN_PEAK <= value <= MAX_PEAK:
            raise UserError(
                f"--peak {text!r}: {item.strip()!r} is no peak; accepted: a number above 0 and below 1e30 "
                "(e.g. dram=864GB/s, fp32=91.6TFLOPS)"
            )
        values[match[1]] = value
    tensor = values.get("tensor")
    return DatasheetPeak(
        model="peaks given with --peak",
        bf16_tensor=values.get("bf16", tensor),
        fp16_tensor=values.get("fp16", tensor),
        fp32=values.get("fp32"),
        memory_bytes_per_second=values.get("dram"),
        source=f"--peak {text.strip()}",
    )


# Roofs only an op of that very dtype runs at (never the fallback roof of another dtype).
NARROW_FORMATS = ("float8_e4m3fn",)


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
        # the fastest dtype the table lists, bar the narrow formats an unlisted dtype would not run at
        wide = {k: v for k, v in self.flop_per_second.items() if k not in NARROW_FORMATS}
        if wide:
            key = max(wide, key=lambda k: wide[k])
            return key, wide[key]
        return None


def peaks_of(sheet: DatasheetPeak, device_name: str, backend: str = "cuda") -> Peaks:
    """The roofs of a datasheet entry (bf16, fp16, fp32, fp8 where listed)."""
    listed = (
        ("bfloat16", sheet.bf16_tensor),
        ("float16", sheet.fp16_tensor),
        ("float32", sheet.fp32),
        ("float8_e4m3fn", sheet.fp8_tensor),
    )
    flops = {dtype: value for dtype, value in listed if value is not None}
    return Peaks(
        device=device_name,
        backend=backend,
        source="datasheet" if sheet.source and not sheet.source.startswith("--peak") else "--peak",
        flop_per_second=flops,
        bytes_per_second=sheet.memory_bytes_per_second,
        detail={"model": sheet.model, "reference": sheet.source},
    )


def peaks_from_datasheet(device_name: str, backend: str = "cuda") -> Peaks | None:
    """The datasheet roofs of a known GPU (bf16, fp16, fp32 where listed), or None."""
    sheet = datasheet_peak(device_name)
    return None if sheet is None else peaks_of(sheet, device_name, backend)
