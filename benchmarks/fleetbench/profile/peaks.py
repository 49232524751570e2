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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetbench import jsonio
from fleetbench.errors import UserError
from fleetbench.fsutil import write_text_atomic
from fleetbench.gpus import Peaks
from fleetbench.runinfo import utc_now

if TYPE_CHECKING:  # torch and the probe load when peaks are measured, not when this module is imported
    import torch

    from fleetbench.config.schema import ProfileConfig
    from fleetbench.devices import DeviceInfo
    from fleetbench.job import Progress
    from fleetbench.probe.compute import ProbeResult

log = logging.getLogger(__name__)


def triad_probe(mib: int, dtype: torch.dtype, device: DeviceInfo, min_run_time_s: float, threads: int) -> ProbeResult:
    """STREAM triad a = b + s*c: reads two arrays and writes one, 2 FLOPs per element."""
    import torch

    from fleetbench.probe.compute import ProbeResult, dtype_name, time_op

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
    import torch

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
    import torch

    from fleetbench.probe.compute import copy_probe, matmul_probe

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
            write_text_atomic(path, jsonio.dumps(entry, indent=2), "peak cache")
        except UserError as exc:
            warn(f"{exc}; the peaks are not written and will be measured again next time")
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


def local_peaks(cfg: ProfileConfig, device: DeviceInfo, workload_dtype: str | None, progress: Progress) -> Peaks:
    """This device's measured peaks, cached per device, shown as a task while they are measured."""
    request = default_request(device, cfg.peak_matmul_size, cfg.peak_copy_mib, cfg.peak_min_run_time_s, workload_dtype)
    with progress.task("peaks", f"of {device.name} (cached per device)"):
        return measured_peaks(
            device,
            request,
            cfg.peaks_cache_dir or default_cache_dir(),
            cfg.remeasure_peaks,
        )
