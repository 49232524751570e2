"""Timed matmul and copy probes: achieved FLOP/s and bytes/s of the local device.

Timing uses torch.utils.benchmark (it synchronises CUDA and picks the repeat count); FLOPs come
from torch.utils.flop_counter, so the figure is the one PyTorch itself would count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.benchmark import Measurement, Timer
from torch.utils.flop_counter import FlopCounterMode

from fleetbench.devices import DeviceInfo


@dataclass(frozen=True)
class ProbeResult:
    """One timed operation: its median time and spread, and the FLOPs and bytes of one run of it."""

    probe: str  # "matmul" or "copy"
    dtype: str
    size: str  # label value: "1024" (matmul n) or "64MiB" (copy)
    median_s: float
    iqr_s: float
    operations: int  # how many times the op ran while being timed
    flops: int  # per operation
    bytes_moved: int  # per operation
    samples_s: tuple[float, ...] = ()  # seconds per operation, one per timed block

    @property
    def flop_per_second(self) -> float:
        """Achieved FLOP/s at the median time (0 for a copy, which counts no FLOPs)."""
        return self.flops / self.median_s

    @property
    def bytes_per_second(self) -> float:
        """Achieved bytes/s at the median time, from the minimum traffic of one operation."""
        return self.bytes_moved / self.median_s

    @property
    def spread_ratio(self) -> float:
        """Interquartile range over the median: how steady the timing was."""
        return self.iqr_s / self.median_s


@dataclass(frozen=True)
class ProbeView:
    """What the probe job shows: every timed operation on its device."""

    results: list[ProbeResult]
    device: str
    backend: str


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call of `fn`, as torch.utils.flop_counter counts them."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


MIN_BLOCKS = 5  # timed blocks per operation at least: compare tests a change from three samples up


@dataclass(frozen=True)
class OpTiming:
    """What torch.utils.benchmark measured for one operation (seconds per operation)."""

    median_s: float
    iqr_s: float
    operations: int
    samples_s: tuple[float, ...]  # seconds per operation of each timed block


def time_op(fn: Callable[[], object], device: DeviceInfo, min_run_time_s: float, threads: int) -> OpTiming:
    """Time `fn` with torch.utils.benchmark after one warm-up call (allocation, library loading)."""
    fn()
    device.synchronize()
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    measurement = timer.blocked_autorange(min_run_time=min_run_time_s)
    blocks = [measurement]
    # A loaded machine fits fewer blocks in the time; compare needs MIN_BLOCKS to test a change at all.
    while sum(len(block.raw_times) for block in blocks) < MIN_BLOCKS:
        blocks.append(timer.timeit(measurement.number_per_run))
    operations = sum(len(block.raw_times) for block in blocks) * measurement.number_per_run
    if len(blocks) > 1:
        (measurement,) = Measurement.merge(blocks)
    return OpTiming(measurement.median, measurement.iqr, operations, tuple(measurement.times))


def matmul_probe(n: int, dtype: torch.dtype, device: DeviceInfo, min_run_time_s: float, threads: int) -> ProbeResult:
    """Time C = A @ B for n x n matrices of `dtype` (seeded by n, so every run multiplies the same values)."""
    generator = torch.Generator(device="cpu").manual_seed(n)
    a = torch.randn(n, n, generator=generator).to(device=device.torch_device, dtype=dtype)
    b = torch.randn(n, n, generator=generator).to(device=device.torch_device, dtype=dtype)
    out = torch.empty(n, n, device=device.torch_device, dtype=dtype)

    def op() -> object:
        return torch.matmul(a, b, out=out)

    flops = count_flops(op)
    timed = time_op(op, device, min_run_time_s, threads)
    moved = 3 * n * n * a.element_size()  # read A and B, write C: the minimum traffic
    return ProbeResult(
        "matmul",
        dtype_name(dtype),
        str(n),
        timed.median_s,
        timed.iqr_s,
        timed.operations,
        flops,
        moved,
        timed.samples_s,
    )


def copy_probe(mib: int, dtype: torch.dtype, device: DeviceInfo, min_run_time_s: float, threads: int) -> ProbeResult:
    """Time a device-to-device copy of `mib` MiB: a read and a write of every byte."""
    element_size = torch.empty((), dtype=dtype).element_size()
    numel = mib * 2**20 // element_size
    src = torch.ones(numel, device=device.torch_device, dtype=dtype)
    dst = torch.empty_like(src)

    def op() -> object:
        return dst.copy_(src)

    timed = time_op(op, device, min_run_time_s, threads)
    moved = 2 * numel * element_size  # read src, write dst
    return ProbeResult(
        "copy", dtype_name(dtype), f"{mib}MiB", timed.median_s, timed.iqr_s, timed.operations, 0, moved, timed.samples_s
    )


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.float32` -> `float32`, the label value."""
    return str(dtype).removeprefix("torch.")
