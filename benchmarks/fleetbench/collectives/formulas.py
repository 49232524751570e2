"""nccl-tests' definitions (doc/PERFORMANCE.md): the sizes swept, algorithm and bus bandwidth.

algbw = S / t, with S the operation's size in bytes: the buffer for all-reduce, the whole gathered (or
scattered) array for all-gather and reduce-scatter (count per rank x ranks), each rank's whole send buffer
for all-to-all; t the mean time of one operation, averaged over the ranks. busbw = algbw x a factor of the
rank count n that makes it comparable with the hardware's link bandwidth whatever n is:
2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all.
"""

from __future__ import annotations

from fractions import Fraction

from fleetbench.config.collectives import CollectiveOp


def bus_factor(op: CollectiveOp, ranks: int) -> Fraction:
    """busbw / algbw of `op` on `ranks` ranks (exact, so the tests compare with nccl-tests' fractions)."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    share = Fraction(ranks - 1, ranks)
    return 2 * share if op == "all_reduce" else share


def algorithm_bandwidth(size_bytes: int, seconds: float) -> float:
    """algbw = S / t in bytes per second."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds}")
    return size_bytes / seconds


def bus_bandwidth(op: CollectiveOp, ranks: int, size_bytes: int, seconds: float) -> float:
    """busbw = algbw x bus_factor(op, ranks) in bytes per second."""
    return algorithm_bandwidth(size_bytes, seconds) * float(bus_factor(op, ranks))


def sweep(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """nccl-tests' sizes: min_bytes, times factor each step, while not above max_bytes."""
    sizes = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def element_count(op: CollectiveOp, size_bytes: int, element_bytes: int, ranks: int) -> int:
    """Elements of the operation's whole array for `size_bytes`, rounded down to what it can split: a
    multiple of `ranks` for the operations that give every rank a share (at least one element each)."""
    count = max(1, size_bytes // element_bytes)
    if op == "all_reduce":
        return count
    return max(ranks, count // ranks * ranks)
