"""Timing of kernel dispatches and the device-farm discipline around it.

Two timers:
- timestamp: each dispatch sits in its own compute pass with GPU timestamp writes at the start and
  end of the pass; up to BATCH passes go into one submit, the queries are resolved into a buffer and
  read back. This is GPU execution time, free of submit and readback overhead.
- wallclock: one dispatch per submit, timed on the host from submit to the queue's work-done signal
  (a synchronised submit). This includes driver submit cost, as an app would see it.

Device-farm discipline (phones throttle and share the SoC): a try times dispatches until its time
budget is spent (at least min_iterations, at most max_iterations); tries repeat until the
coefficient of variation of their medians is under cv_target (at least min_tries, at most
max_tries), and that CV is reported as the run-to-run variation, stable or not.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetbench.edge.native import optional_module
from fleetbench.errors import UserError

BATCH = 64  # passes per submit on the timestamp path (2 queries each)
BATCH_TARGET_S = 0.05  # aim for submits of about this long


@dataclass
class Measurement:
    """One kernel's tries (latencies in seconds per try) and whether their medians settled."""

    tries: list[list[float]]
    timing: str
    stable: bool

    @property
    def samples(self) -> list[float]:
        """Every latency of every try, in order."""
        return [x for t in self.tries for x in t]

    @property
    def try_medians(self) -> list[float]:
        """The median latency of each try."""
        return [statistics.median(t) for t in self.tries]

    @property
    def variation(self) -> float:
        """Coefficient of variation of the tries' medians: the run-to-run variation."""
        return coefficient_of_variation(self.try_medians)

    def percentile(self, q: float) -> float:
        """Percentile `q` (0-100) over every sample."""
        return percentile(self.samples, q)


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in 0-100."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def coefficient_of_variation(values: list[float]) -> float:
    """Sample standard deviation over the mean; 0 for fewer than two values or a non-positive mean."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else 0.0


def trimmed_mean(values: list[float], ratio: float) -> float:
    """Mean after dropping floor(ratio * n) values at each end (ExecuTorch's benchmark apps report it)."""
    ordered = sorted(values)
    cut = int(len(ordered) * ratio)
    kept = ordered[cut : len(ordered) - cut] or ordered
    return statistics.fmean(kept)


class DispatchTimer:
    """Runs one pipeline + bind group + grid on a device, and times it one way or the other."""

    def __init__(
        self,
        device: Any,
        pipeline: Any,
        bind_group: Any,
        groups: tuple[int, int, int],
        timing: str,
        period_ns: float = 1.0,
    ) -> None:
        self.device = device
        self.pipeline = pipeline
        self.bind_group = bind_group
        self.groups = groups
        self.timing = timing
        self.period_ns = period_ns
        self._query_set: Any = None
        self._resolve: Any = None
        self._fence: tuple[Any, Any] | None = None
        self._work_done_ok = True
        if timing == "timestamp":
            wgpu = optional_module("wgpu")
            self._query_set = device.create_query_set(type="timestamp", count=2 * BATCH)
            self._resolve = device.create_buffer(
                size=16 * BATCH, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC
            )

    def _encode(self, encoder: Any, index: int | None) -> None:
        writes = None
        if index is not None:
            writes = {
                "query_set": self._query_set,
                "beginning_of_pass_write_index": 2 * index,
                "end_of_pass_write_index": 2 * index + 1,
            }
        compute = encoder.begin_compute_pass(timestamp_writes=writes)
        compute.set_pipeline(self.pipeline)
        compute.set_bind_group(0, self.bind_group)
        compute.dispatch_workgroups(*self.groups)
        compute.end()

    def run_once(self) -> float:
        """One synchronised dispatch; returns its wall-clock latency (also used for warm-ups)."""
        encoder = self.device.create_command_encoder()
        self._encode(encoder, None)
        commands = encoder.finish()
        start = time.perf_counter()
        self.device.queue.submit([commands])
        self._wait_idle()
        return time.perf_counter() - start

    def _wait_idle(self) -> None:
        """Block until the queue has finished everything submitted so far.

        queue.on_submitted_work_done_sync() is the direct way, but in wgpu-py 0.32 its callback type
        does not match the bundled wgpu-native (TypeError before anything is submitted). The fallback
        is public API too: submit a 4-byte copy into a mappable buffer and map it; a queue completes
        in order, so the map resolves only after the dispatch before it has finished.
        """
        if self._work_done_ok:
            try:
                self.device.queue.on_submitted_work_done_sync()
                return
            except TypeError:
                self._work_done_ok = False
        wgpu = optional_module("wgpu")
        if self._fence is None:
            usage = wgpu.BufferUsage
            self._fence = (
                self.device.create_buffer(size=4, usage=usage.COPY_SRC),
                self.device.create_buffer(size=4, usage=usage.COPY_DST | usage.MAP_READ),
            )
        src, dst = self._fence
        encoder = self.device.create_command_encoder()
        encoder.copy_buffer_to_buffer(src, 0, dst, 0, 4)
        self.device.queue.submit([encoder.finish()])
        dst.map_sync("READ")
        dst.unmap()

    def sample(self, count: int) -> list[float]:
        """Time `count` dispatches with this timer's method; latencies in seconds."""
        if self.timing == "wallclock":
            return [self.run_once() for _ in range(count)]
        out: list[float] = []
        while len(out) < count:
            out.extend(self._timestamp_batch(min(BATCH, count - len(out))))
        return out

    def _timestamp_batch(self, count: int) -> list[float]:
        import numpy as np

        encoder = self.device.create_command_encoder()
        for index in range(count):
            self._encode(encoder, index)
        encoder.resolve_query_set(self._query_set, 0, 2 * count, self._resolve, 0)
        self.device.queue.submit([encoder.finish()])
        ticks = np.frombuffer(self.device.queue.read_buffer(self._resolve, 0, 16 * count), dtype=np.uint64)
        begin, end = ticks[0::2].astype(np.int64), ticks[1::2].astype(np.int64)
        if np.any(end <= begin):
            raise UserError(
                "GPU timestamps did not advance across a dispatch on this adapter; accepted: --timing wallclock"
            )
        return [float(d) * self.period_ns * 1e-9 for d in (end - begin)]


def batch_size(estimate_s: float) -> int:
    """Dispatches per sample so that one submit takes about BATCH_TARGET_S (at most BATCH)."""
    if estimate_s <= 0:
        return BATCH
    return max(1, min(BATCH, int(BATCH_TARGET_S / estimate_s)))


def run_try(
    timer: DispatchTimer, budget_s: float, min_iterations: int, max_iterations: int, estimate_s: float
) -> list[float]:
    """One try: dispatches until `budget_s` is spent, within min/max iterations; latencies in seconds.

    `estimate_s` (a warm-up's latency) sizes the batches.
    """
    latencies: list[float] = []
    step = batch_size(estimate_s)
    start = time.perf_counter()
    while len(latencies) < max_iterations and (
        len(latencies) < min_iterations or time.perf_counter() - start < budget_s
    ):
        latencies.extend(timer.sample(min(step, max_iterations - len(latencies))))
    return latencies


def measure_until_stable(
    one_try: Callable[[], list[float]],
    timing: str,
    min_tries: int,
    max_tries: int,
    cv_target: float,
    on_try: Callable[[int], None] | None = None,
) -> Measurement:
    """Repeat `one_try` until the CV of the tries' medians is under `cv_target`, within min/max tries.

    `on_try` gets the number of tries after each one; the Measurement says whether they settled.
    """
    tries: list[list[float]] = []
    while True:
        tries.append(one_try())
        if on_try is not None:
            on_try(len(tries))
        medians = [statistics.median(t) for t in tries]
        if len(tries) >= min_tries and coefficient_of_variation(medians) < cv_target:
            return Measurement(tries, timing, stable=True)
        if len(tries) >= max_tries:
            return Measurement(tries, timing, stable=False)
