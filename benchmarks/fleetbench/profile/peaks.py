"""Peak FLOP/s and memory bandwidth: datasheet tables for common GPUs, and measured local peaks.

Measured peaks reuse the probe (fleetbench.probe.compute): the matmul probe for FLOP/s per dtype
(the better of n/2 and n),
the copy probe plus a STREAM-style triad (a = b + s*c) for bandwidth; the memory roof is the better
of the two. A measurement is cached per device (backend, model name, thread count) as JSON, so the
roofline does not pay for it on every run; `profile.remeasure_peaks=true` measures again.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from fleetbench.config.schema import ProfileConfig
from fleetbench.devices import DeviceInfo
from fleetbench.probe.compute import ProbeResult, copy_probe, dtype_name, matmul_probe, time_op
from fleetbench.runinfo import utc_now

log = logging.getLogger(__name__)


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


def triad_probe(mib: int, dtype: torch.dtype, device: DeviceInfo, min_run_time_s: float, threads: int) -> ProbeResult:
    """STREAM triad a = b + s*c: reads two arrays and writes one, 2 FLOPs per element."""
    element_size = torch.empty((), dtype=dtype).element_size()
    numel = mib * 2**20 // element_size
    b = torch.ones(numel, device=device.torch_device, dtype=dtype)
    c = torch.ones(numel, device=device.torch_device, dtype=dtype)
    a = torch.empty_like(b)

    def op() -> object:
        return torch.add(b, c, alpha=3.0, out=a)

    timed = time_op(op, device, min_run_time_s, threads)
    return ProbeResult(
        "triad",
        dtype_name(dtype),
        f"{mib}MiB",
        timed.median_s,
        timed.iqr_s,
        timed.operations,
        2 * numel,
        3 * numel * element_size,
        timed.samples_s,
    )


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/fleetbench/peaks, else ~/.cache/fleetbench/peaks."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fleetbench" / "peaks"


def cache_file(cache_dir: Path, device: DeviceInfo, threads: int) -> Path:
    """The cache entry of one device and thread count (peaks on the CPU depend on the threads)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{device.backend}-{device.name}").strip("-").lower()
    return cache_dir / f"{slug}-t{threads}.json"


@dataclass
class PeakRequest:
    """What to measure: matmul FLOP/s per dtype at size n, bandwidth on `copy_mib` MiB arrays."""

    dtypes: list[str]
    matmul_n: int
    copy_mib: int
    min_run_time_s: float
    threads: int


def default_request(
    device: DeviceInfo, matmul_n: int | None, copy_mib: int | None, min_run_time_s: float, workload_dtype: str | None
) -> PeakRequest:
    """Sizes large enough to reach the peak on this backend (unless given) and the dtypes worth a roof.

    On a GPU: fp16, bf16 and fp32; on the CPU fp32 alone; plus the workload's own dtype.
    """
    gpu = device.backend == "cuda"
    dtypes = ["float16", "bfloat16", "float32"] if gpu else ["float32"]
    if workload_dtype and workload_dtype not in dtypes:
        dtypes.append(workload_dtype)
    return PeakRequest(
        dtypes=dtypes,
        matmul_n=matmul_n or (8192 if gpu else 2048),
        copy_mib=copy_mib or (1024 if gpu else 256),
        min_run_time_s=min_run_time_s,
        threads=torch.get_num_threads(),
    )


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def measured_peaks(
    device: DeviceInfo,
    request: PeakRequest,
    cache_dir: Path,
    remeasure: bool = False,
    warn: Callable[[str], None] = log.warning,
) -> Peaks:
    """Measured peaks of this device, from the cache when it answers the request, else measured now.

    A cache that cannot be written is reported through `warn` and the run goes on.
    """
    started = time.perf_counter()
    path = cache_file(cache_dir, device, request.threads)
    cached = {} if remeasure else _load_cache(path)
    same_setup = (
        cached.get("torch") == torch.__version__
        and cached.get("matmul_n") == request.matmul_n
        and cached.get("copy_mib") == request.copy_mib
    )
    if not same_setup:
        cached = {}
    flops: dict[str, float] = dict(cached.get("flop_per_second", {}))
    bandwidth: dict[str, float] = dict(cached.get("bytes_per_second", {}))
    measured_now = []
    for dtype in request.dtypes:
        if dtype not in flops:  # the best of two sizes: the peak is what the device can reach
            flops[dtype] = max(
                matmul_probe(n, getattr(torch, dtype), device, request.min_run_time_s, request.threads).flop_per_second
                for n in (max(16, request.matmul_n // 2), request.matmul_n)
            )
            measured_now.append(f"matmul {dtype}")
    for kind, probe in (("copy", copy_probe), ("triad", triad_probe)):
        if kind not in bandwidth:
            result = probe(request.copy_mib, torch.float32, device, request.min_run_time_s, request.threads)
            bandwidth[kind] = result.bytes_per_second
            measured_now.append(kind)
    entry = {
        "device": device.name,
        "backend": device.backend,
        "threads": request.threads,
        "torch": torch.__version__,
        "matmul_n": request.matmul_n,
        "copy_mib": request.copy_mib,
        "flop_per_second": flops,
        "bytes_per_second": bandwidth,
        "measured_at": cached.get("measured_at") if not measured_now else utc_now().isoformat(),
    }
    if measured_now:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(entry, indent=2), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            warn(f"peak cache {path} not written ({exc.strerror or exc}); peaks will be measured again")
        log.info(
            "peaks of %s: measured %s in %.1f s", device.name, ", ".join(measured_now), time.perf_counter() - started
        )
    else:
        log.info("peaks of %s: reusing the measurement of %s cached in %s", device.name, entry["measured_at"], path)
    return Peaks(
        device=device.name,
        backend=device.backend,
        source="measured",
        flop_per_second={d: flops[d] for d in request.dtypes},
        bytes_per_second=max(bandwidth.values()),
        detail={
            **{k: v for k, v in entry.items() if k not in ("flop_per_second",)},
            "cache": str(path),
            "cached": not measured_now,
            "measured_now": measured_now,
        },
    )


def local_peaks(cfg: ProfileConfig, device: DeviceInfo, workload_dtype: str | None, console: Console) -> Peaks:
    """This device's measured peaks, cached per device, with a status line while they are measured."""
    request = default_request(device, cfg.peak_matmul_size, cfg.peak_copy_mib, cfg.peak_min_run_time_s, workload_dtype)
    with console.status(f"[bold]peaks[/] of {device.name} (cached per device)"):
        return measured_peaks(
            device,
            request,
            cfg.peaks_cache_dir or default_cache_dir(),
            cfg.remeasure_peaks,
        )
