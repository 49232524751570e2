"""`summary.cpu_time`: a step's wall time split as the kernel's scheduler saw it (/proc/self/task/*/schedstat).

The splits are checked on work whose answer is known: a thread spinning on a CPU, a thread asleep (as
a rank blocked on a collective is), two threads beside it; then on a real 2-rank FSDP2 run, whose
ranks wait for each other at every collective.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fleetbench.results.store import read_records
from fleetbench.train.profiling import CpuTimes, sched_sample

pytestmark = pytest.mark.skipif(sched_sample() is None, reason="this kernel keeps no /proc/self/task/*/schedstat")


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def measured(work: Callable[[], None]) -> CpuTimes:
    before = sched_sample()
    work()
    return CpuTimes.between(before, sched_sample())


def test_a_spinning_thread_is_on_a_cpu_and_a_sleeping_one_is_blocked() -> None:
    busy = CpuTimes()
    busy.add(measured(lambda: spin(0.3)))
    on = busy.summary()
    assert on is not None and on["steps"] == 1
    # On a CPU, or runnable waiting for one when other processes hold the cores; never asleep.
    assert on["on_cpu_share"] + on["waiting_for_cpu_share"] > 0.9
    assert on["blocked_share"] < 0.1

    idle = CpuTimes()
    idle.add(measured(lambda: time.sleep(0.3)))
    off = idle.summary()
    assert off is not None
    assert off["blocked_share"] > 0.9 and off["on_cpu_s"] < 0.03
    for split in (on, off):
        assert split["on_cpu_share"] + split["waiting_for_cpu_share"] + split["blocked_share"] == pytest.approx(
            1, abs=0.02
        )


def test_other_threads_count_in_all_threads_not_in_the_training_thread() -> None:
    # The spinners outlive the step, as gloo's threads do: a thread that has exited has no schedstat left.
    spun = threading.Barrier(3)
    release = threading.Event()

    def spin_then_stay() -> None:
        spin(0.25)
        spun.wait()
        release.wait()

    threads = [threading.Thread(target=spin_then_stay) for _ in range(2)]

    def start_them_and_wait() -> None:
        for thread in threads:
            thread.start()
        spun.wait()

    try:
        step = measured(start_them_and_wait)
    finally:
        release.set()
        for thread in threads:
            thread.join()
    split = CpuTimes()
    split.add(step)
    figures = split.summary()
    assert figures is not None
    # The calling thread slept at the barrier; the spinners ran, or waited for a CPU, for at least the
    # 0.25 s of one of them (they take turns at the GIL, so not always twice that).
    assert figures["blocked_share"] > 0.8
    assert figures["all_threads_on_cpu_s"] + figures["all_threads_waiting_for_cpu_s"] > figures["on_cpu_s"] + 0.2


def test_steps_add_up_and_no_samples_is_no_summary() -> None:
    assert CpuTimes().summary() is None
    assert CpuTimes.between(None, sched_sample()).steps == 0
    total = CpuTimes()
    for _ in range(3):
        total.add(measured(lambda: spin(0.05)))
    figures = total.summary()
    assert figures is not None and figures["steps"] == 3
    assert figures["step_s"] == pytest.approx(total.wall_s / 3)


@pytest.mark.slow
def test_fsdp2_ranks_report_their_steps_split(tmp_path: Path) -> None:
    """A 2-rank run of a small model: each rank's record carries the split of its steady steps."""
    cmd = [sys.executable, "-m", "fleetbench", "train", "--results-dir", str(tmp_path), "--run-id", "split",
           "--device", "cpu", "--nproc", "2", "--steps", "6",
           *(f"--set=train.{item}" for item in ("dim=64", "layers=2", "heads=4", "ffn_dim=256", "seq_len=64",
                                                "batch_size=4", "threads=1", "peak_flops=1e11", "plot=false"))]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    records = sorted(read_records(tmp_path / "split"), key=lambda r: r.rank)
    assert [r.rank for r in records] == [0, 1]
    for record in records:
        split = record.summary["cpu_time"]
        assert split["steps"] == record.summary["steady_state_steps"] > 0
        assert split["on_cpu_s"] > 0
        shares = split["on_cpu_share"] + split["waiting_for_cpu_share"] + split["blocked_share"]
        assert shares == pytest.approx(1, abs=0.02)
        # gloo's threads run beside the training thread: all threads on a CPU is at least its own time.
        assert split["all_threads_on_cpu_s"] >= split["on_cpu_s"]
