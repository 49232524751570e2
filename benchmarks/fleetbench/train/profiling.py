"""torch.profiler inside the FSDP2 loop: every rank traces the steps `train.profile_steps` names.

`--profile-steps A:B` records steps A..B (numbered as in the step rows, from 1) under
`torch.profiler.schedule`: the profiler warms up during step A-1 (or before step 1), records A..B,
and training step N is annotated `ProfilerStep#N`. Activities: CPU, plus CUDA on a GPU; input shapes,
memory and FLOPs are recorded. FSDP2's collectives are in the trace: on gloo as the CPU ops of the
collectives (`record_param_comms`, `c10d::allgather_`, `gloo:all_gather`, ...), on NCCL also as
their kernels.

Files in <run folder>/profile/, for rank N. Holistic Trace Analysis reads such a folder as one trace
per rank: every .json/.gz file in it is a trace, its rank the trace's `distributedInfo.rank`.
  rank-N.steps-A-B.pt.trace.json.gz   the Chrome trace (ui.perfetto.dev, HTA, `fleetbench trace`)
  rank-N.key_averages.txt             the key_averages() table of the recorded steps
  rank-N.memory_snapshot.pickle       with train.profile_memory_snapshot on CUDA: pytorch.org/memory_viz

The warm-up and recorded steps run slower (the profiler's own cost), so the trainer leaves them out
of the run's tokens/s, MFU and step-time samples (`ProfileWindow.excluded`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule

from fleetbench.devices import DeviceInfo

__all__ = [
    "MEMORY_HISTORY_ENTRIES",
    "PROFILE_DIR",
    "CpuTimes",
    "ProfileWindow",
    "SchedSample",
    "StepProfiler",
    "sched_sample",
    "trace_name",
]

log = logging.getLogger(__name__)

PROFILE_DIR = "profile"
# Allocation events kept by the memory history; a few profiled steps of the presets stay well below.
MEMORY_HISTORY_ENTRIES = 200_000


def trace_name(rank: int, first: int, last: int) -> str:
    """The trace's file name: rank first, then the steps, in the `*.pt.trace.json.gz` form HTA expects."""
    return f"rank-{rank}.steps-{first}-{last}.pt.trace.json.gz"


@dataclass(frozen=True)
class ProfileWindow:
    """The steps this attempt profiles: `first`..`last`, numbered from 1 as in the step rows."""

    first: int
    last: int

    @classmethod
    def for_run(cls, steps: tuple[int, int] | None, start_step: int) -> ProfileWindow | None:
        """The configured window less the steps a resumed run has already done; None when nothing is left."""
        if steps is None:
            return None
        first = max(steps[0], start_step + 1)
        return cls(first, steps[1]) if first <= steps[1] else None

    @property
    def excluded(self) -> tuple[int, int]:
        """The steps the profiler slows, first and last: the warm-up step (when there is one) and the recorded ones."""
        return max(1, self.first - 1), self.last

    def slows(self, step: int) -> bool:
        """Whether step `step` ran with the profiler warming up or recording."""
        low, high = self.excluded
        return low <= step <= high


class StepProfiler:
    """torch.profiler over a `ProfileWindow` (a no-op without one); `step_done(N)` ends every training step N.

    Used as a context manager around the step loop. The profiler is entered before the loop and
    stepped once per training step, so its step counter is the training step's number; it is left
    as soon as the last profiled step is written, and every rank then meets at a barrier, so the
    ranks resume training together whatever each one's export took.
    """

    def __init__(
        self,
        window: ProfileWindow | None,
        run_dir: Path,
        rank: int,
        device: DeviceInfo,
        memory_snapshot: bool,
        start_step: int,
    ) -> None:
        self.window = window
        self.start_step = start_step  # the steps done before this attempt's loop (a resumed run)
        self.out_dir = run_dir / PROFILE_DIR
        self.rank = rank
        self.device = device
        self.memory_snapshot = memory_snapshot and device.backend == "cuda"
        self.files: list[Path] = []
        self.export_s = 0.0
        self._prof: profile | None = None
        self._recording_memory = False

    # --- the window ------------------------------------------------------------------------------
    def __enter__(self) -> StepProfiler:
        """Enter the profiler before step `start_step + 1`, its step counter moved on to that step."""
        window = self.window
        if window is None:
            return self
        self.out_dir.mkdir(parents=True, exist_ok=True)
        activities = [ProfilerActivity.CPU]
        if self.device.backend == "cuda":
            activities.append(ProfilerActivity.CUDA)
        # Step numbers 0 .. first-2 wait, first-1 warms up, first .. last record, then the trace is written.
        plan = schedule(wait=window.first - 1, warmup=1, active=window.last - window.first + 1, repeat=1)
        self._prof = profile(
            activities=activities,
            schedule=plan,
            on_trace_ready=self._write,
            record_shapes=True,
            profile_memory=True,
            with_flops=True,
        )
        self._prof.__enter__()  # type: ignore[no-untyped-call]  # profile's context methods are unannotated
        # The profiler numbers its steps from 0; training step N should be ProfilerStep#N.
        for _ in range(self.start_step + 1):
            self._prof.step()
        self._before_step(self.start_step + 1)
        return self

    def slows(self, step: int) -> bool:
        """Whether step `step` ran with the profiler on (False without a window)."""
        return self.window is not None and self.window.slows(step)

    def step_done(self, steps_done: int) -> None:
        """Step `steps_done` has ended: move the profiler on (writing the trace after the last profiled step)."""
        window, prof = self.window, self._prof
        if window is None or prof is None:
            return
        started = time.perf_counter()
        last = steps_done == window.last
        if last:
            self.device.synchronize()  # the window's device work belongs in its trace
        prof.step()
        if last:
            self._finish()
        else:
            self._before_step(steps_done + 1)
        self.export_s += time.perf_counter() - started

    def _before_step(self, step: int) -> None:
        """Start the allocator's history just before the first recorded step."""
        if self.memory_snapshot and self.window is not None and step == self.window.first:
            # Python stacks only: symbolising C++ frames makes the dump take minutes on a large model.
            torch.cuda.memory._record_memory_history(stacks="python", max_entries=MEMORY_HISTORY_ENTRIES)
            self._recording_memory = True

    def _finish(self) -> None:
        """Leave the profiler, dump the memory snapshot, and meet the other ranks."""
        prof, self._prof = self._prof, None
        assert prof is not None
        prof.__exit__(None, None, None)  # type: ignore[no-untyped-call]
        if self._recording_memory:
            path = self.out_dir / f"rank-{self.rank}.memory_snapshot.pickle"
            torch.cuda.memory._dump_snapshot(str(path))  # type: ignore[no-untyped-call]  # unannotated in torch
            self._stop_memory_history()
            self.files.append(path)
        if dist.is_initialized():
            dist.barrier()

    def _stop_memory_history(self) -> None:
        torch.cuda.memory._record_memory_history(enabled=None)
        self._recording_memory = False

    def _write(self, prof: profile) -> None:
        """on_trace_ready: the rank's gzipped Chrome trace and its key_averages() table."""
        window = self.window
        assert window is not None
        trace = self.out_dir / trace_name(self.rank, window.first, window.last)
        prof.export_chrome_trace(str(trace))  # gzipped by torch for a .gz name
        sort_key = "self_device_time_total" if self.device.backend == "cuda" else "self_cpu_time_total"
        # Every op, and names wide enough for FSDP's per-module labels (`FSDP::all_gather (layers.11)`).
        table = prof.key_averages().table(sort_by=sort_key, row_limit=-1, max_name_column_width=96)
        averages = self.out_dir / f"rank-{self.rank}.key_averages.txt"
        averages.write_text(
            f"rank {self.rank}, steps {window.first}..{window.last} (ProfilerStep#{window.first}.."
            f"#{window.last}), sorted by {sort_key}\n{table}\n",
            encoding="utf-8",
        )
        self.files += [trace, averages]

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Leave a profiler the loop did not take to its last profiled step (a failure, a stop)."""
        prof, self._prof = self._prof, None
        try:
            if prof is not None:
                prof.__exit__(exc_type, exc, tb)  # type: ignore[no-untyped-call]
            if self._recording_memory:
                self._stop_memory_history()
        except Exception as error:
            if exc is None:
                raise
            # The loop's own failure is the one to report; a profiler that cannot stop must not hide it.
            log.warning("rank %d: torch.profiler did not stop cleanly: %s", self.rank, error)

    # --- the record ------------------------------------------------------------------------------
    def summary(self, excluded_from_throughput: bool, run_dir: Path) -> dict[str, Any]:
        """The record's summary keys: which steps were profiled and left out of the throughput, and the files."""
        window = self.window
        if window is None:
            return {"profiled_steps": None, "excluded_steps": None, "excluded_from_throughput": False}
        return {
            "profiled_steps": [window.first, window.last],
            "excluded_steps": list(window.excluded),
            "excluded_from_throughput": excluded_from_throughput,
            "profile_files": [str(path.relative_to(run_dir)) for path in self.files],
            "profile_export_seconds": self.export_s,
        }


# --- where a step's time goes, as the kernel's scheduler saw it ----------------------------------------
@dataclass(frozen=True)
class SchedSample:
    """A moment of this process: the wall clock and, from /proc/self/task/*/schedstat, the nanoseconds its
    threads have run on a CPU and waited runnable for one (the calling thread's apart)."""

    wall_s: float
    main_on_cpu_ns: int
    main_waiting_ns: int
    threads_on_cpu_ns: int
    threads_waiting_ns: int


def _schedstat(path: str) -> tuple[int, int] | None:
    try:
        with open(path, encoding="ascii") as stream:
            on_cpu, waiting, _slices = stream.read().split()
    except (OSError, ValueError):
        return None
    return int(on_cpu), int(waiting)


def sched_sample() -> SchedSample | None:
    """Now, for this process; None where the kernel keeps no schedstat (not Linux, or no CONFIG_SCHED_INFO)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    this_thread = str(threading.get_native_id())
    main = None
    on_cpu = waiting = 0
    for task in tasks:
        times = _schedstat(f"/proc/self/task/{task}/schedstat")
        if times is not None:
            on_cpu, waiting = on_cpu + times[0], waiting + times[1]
            if task == this_thread:
                main = times
    if main is None:
        return None
    return SchedSample(time.perf_counter(), main[0], main[1], on_cpu, waiting)


@dataclass
class CpuTimes:
    """Steps' wall time split by the scheduler: the training thread on a CPU (compute, and the host side of
    collectives), runnable but waiting for a CPU (other threads and processes had them), or blocked (asleep:
    waiting for a collective's data, that is for the other ranks); and all of the process's threads
    (gloo's own included) on a CPU and waiting for one."""

    steps: int = 0
    wall_s: float = 0.0
    main_on_cpu_s: float = 0.0
    main_waiting_s: float = 0.0
    threads_on_cpu_s: float = 0.0
    threads_waiting_s: float = 0.0

    @classmethod
    def between(cls, before: SchedSample | None, after: SchedSample | None) -> CpuTimes:
        """One step: what happened between two samples (nothing where there are none)."""
        if before is None or after is None:
            return cls()
        return cls(
            1,
            after.wall_s - before.wall_s,
            (after.main_on_cpu_ns - before.main_on_cpu_ns) / 1e9,
            (after.main_waiting_ns - before.main_waiting_ns) / 1e9,
            (after.threads_on_cpu_ns - before.threads_on_cpu_ns) / 1e9,
            (after.threads_waiting_ns - before.threads_waiting_ns) / 1e9,
        )

    def add(self, other: CpuTimes) -> None:
        """Add another step's (or steps') times."""
        self.steps += other.steps
        self.wall_s += other.wall_s
        self.main_on_cpu_s += other.main_on_cpu_s
        self.main_waiting_s += other.main_waiting_s
        self.threads_on_cpu_s += other.threads_on_cpu_s
        self.threads_waiting_s += other.threads_waiting_s

    def summary(self) -> dict[str, Any] | None:
        """Per step (means) and as shares of the wall time; None without samples."""
        if not self.steps or self.wall_s <= 0:
            return None
        n, wall = self.steps, self.wall_s
        blocked = max(0.0, wall - self.main_on_cpu_s - self.main_waiting_s)
        return {
            "steps": n,
            "step_s": wall / n,
            "on_cpu_s": self.main_on_cpu_s / n,
            "waiting_for_cpu_s": self.main_waiting_s / n,
            "blocked_s": blocked / n,
            "on_cpu_share": self.main_on_cpu_s / wall,
            "waiting_for_cpu_share": self.main_waiting_s / wall,
            "blocked_share": blocked / wall,
            "all_threads_on_cpu_s": self.threads_on_cpu_s / n,
            "all_threads_waiting_for_cpu_s": self.threads_waiting_s / n,
            "how": "/proc/self/task/*/schedstat around each steady step: the training thread's time on a CPU, "
            "runnable without one, and the rest (blocked: waiting for collectives); all threads beside",
        }
