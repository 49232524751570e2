"""One rank's part of the sweep: each operation at each size, checked once, then timed as nccl-tests does
(warm-up iterations, a barrier, `iters` operations back to back, the mean time averaged over the ranks)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from fleetbench.collectives.formulas import algorithm_bandwidth, bus_bandwidth, element_count
from fleetbench.config.collectives import CollectiveOp
from fleetbench.errors import UserError


@dataclass(frozen=True)
class Measurement:
    """One operation at one size: nccl-tests' columns (size, count, time, algbw, busbw)."""

    op: CollectiveOp
    size_bytes: int
    count: int
    ranks: int
    seconds: float  # mean time of one operation, averaged over the ranks
    slowest_rank_seconds: float  # the same mean on the slowest rank
    algbw: float  # bytes per second
    busbw: float  # bytes per second

    def as_dict(self) -> dict[str, object]:
        """The record's row."""
        return {
            "op": self.op,
            "size_bytes": self.size_bytes,
            "count": self.count,
            "ranks": self.ranks,
            "seconds": self.seconds,
            "slowest_rank_seconds": self.slowest_rank_seconds,
            "algbw_bytes_per_second": self.algbw,
            "busbw_bytes_per_second": self.busbw,
        }

    @classmethod
    def from_dict(cls, row: dict[str, object]) -> Measurement:
        """A row of a record back."""
        return cls(
            op=row["op"],  # type: ignore[arg-type]
            size_bytes=int(row["size_bytes"]),  # type: ignore[call-overload]
            count=int(row["count"]),  # type: ignore[call-overload]
            ranks=int(row["ranks"]),  # type: ignore[call-overload]
            seconds=float(row["seconds"]),  # type: ignore[arg-type]
            slowest_rank_seconds=float(row["slowest_rank_seconds"]),  # type: ignore[arg-type]
            algbw=float(row["algbw_bytes_per_second"]),  # type: ignore[arg-type]
            busbw=float(row["busbw_bytes_per_second"]),  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class Buffers:
    """The input and output of one operation, and the call that runs it."""

    source: torch.Tensor
    target: torch.Tensor
    call: Callable[[], object]


def buffers(op: CollectiveOp, count: int, dtype: torch.dtype, device: torch.device, ranks: int) -> Buffers:
    """Zeroed buffers for `count` elements of the whole array (nccl-tests' S), and the call on them."""
    share = count // ranks
    if op == "all_reduce":
        data = torch.zeros(count, dtype=dtype, device=device)
        return Buffers(data, data, lambda: dist.all_reduce(data))
    if op == "all_gather":
        piece, whole = torch.zeros(share, dtype=dtype, device=device), torch.zeros(count, dtype=dtype, device=device)
        return Buffers(piece, whole, lambda: dist.all_gather_single(whole, piece))
    if op == "reduce_scatter":
        whole, piece = torch.zeros(count, dtype=dtype, device=device), torch.zeros(share, dtype=dtype, device=device)
        return Buffers(whole, piece, lambda: dist.reduce_scatter_single(piece, whole))
    source, target = torch.zeros(count, dtype=dtype, device=device), torch.zeros(count, dtype=dtype, device=device)
    return Buffers(source, target, lambda: dist.all_to_all_single(target, source))


def check(op: CollectiveOp, made: Buffers, rank: int, ranks: int) -> None:
    """Run the operation once on known data and compare with what it must give (nccl-tests' -c)."""
    count = made.source.numel()
    if op == "all_to_all":
        # Chunk j of rank r carries r * ranks + j; rank r receives chunk r of every rank j: j * ranks + r.
        chunk = count // ranks
        made.source.copy_(torch.arange(ranks, device=made.source.device).repeat_interleave(chunk) + rank * ranks)
        expected = (torch.arange(ranks) * ranks + rank).repeat_interleave(chunk)
    elif op == "all_gather":
        made.source.fill_(rank + 1)
        expected = torch.arange(1, ranks + 1).repeat_interleave(count)
    else:
        made.source.fill_(rank + 1)
        expected = torch.full((made.target.numel(),), ranks * (ranks + 1) // 2)
    made.call()
    got = made.target.float().cpu()
    if not torch.allclose(got, expected.float(), rtol=1e-2):
        raise UserError(
            f"{op} of {count} elements on {ranks} ranks gave wrong values on rank {rank} (first {got[:4].tolist()}, "
            f"expected {expected[:4].tolist()}): the collective library or the network corrupts data"
        )
    made.source.zero_()
    made.target.zero_()


def timed(op: CollectiveOp, count: int, settings: Settings) -> Measurement:
    """Check once, warm up, then time `iters` back-to-back operations; the mean averaged over the ranks."""
    made = buffers(op, count, settings.dtype, settings.device, settings.ranks)
    check(op, made, settings.rank, settings.ranks)
    for _ in range(settings.warmup_iters):
        made.call()
    settings.synchronize()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(settings.iters):
        made.call()
    settings.synchronize()
    mean = (time.perf_counter() - started) / settings.iters
    total = torch.tensor([mean], dtype=torch.float64, device=settings.device)
    slowest = total.clone()
    dist.all_reduce(total)  # nccl-tests averages the ranks' times
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    seconds = float(total.item()) / settings.ranks
    size = count * made.source.element_size()
    return Measurement(
        op=op,
        size_bytes=size,
        count=count,
        ranks=settings.ranks,
        seconds=seconds,
        slowest_rank_seconds=float(slowest.item()),
        algbw=algorithm_bandwidth(size, seconds),
        busbw=bus_bandwidth(op, settings.ranks, size, seconds),
    )


@dataclass(frozen=True)
class Settings:
    """What every measurement of one rank shares."""

    rank: int
    ranks: int
    device: torch.device
    dtype: torch.dtype
    iters: int
    warmup_iters: int

    def synchronize(self) -> None:
        """Wait for the device's queued work (a no-op on the CPU, where gloo's calls return when done)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def plan(ops: list[CollectiveOp], sizes: list[int], element_bytes: int, ranks: int) -> list[tuple[CollectiveOp, int]]:
    """(operation, element count) pairs to measure: each size rounded to what the operation can split,
    sizes that round to the same count measured once."""
    pairs: list[tuple[CollectiveOp, int]] = []
    for op in ops:
        seen: set[int] = set()
        for size in sizes:
            count = element_count(op, size, element_bytes, ranks)
            if count not in seen:
                seen.add(count)
                pairs.append((op, count))
    return pairs
