#!/usr/bin/env python3
"""Perf row of the trace summary (`make perf`): ours against Holistic Trace Analysis, side by side.

  1. The largest trace of the test data (HTA's nccl_parser_config/nccl_data.json.gz, 40 573
     events): HTA's TraceAnalysis load, temporal breakdown, communication-computation overlap and
     idle-time breakdown against our whole summary of the same file (breakdown, overlap, per-step
     breakdowns, idle time per stream, top kernels and ops, launch gaps), both with the default
     window. Ratio HTA time / ours, target >= 3.
  2. The same on HTA's 2-rank NCCL folder (trace_filter), for comparison.
  3. Peak memory (VmHWM, the resident high-water mark) of one fresh process doing each side's work
     on the largest trace, imports included: HTA's / ours, target > 1.

The two alternate (A B A B ...) for ROUNDS rounds, so drift on a shared machine hits both; each
figure is the median of its rounds. Not a test: prints the table and exits 0 (also without HTA
installed: it says so); --strict exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import logging
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import perfkit
from rich.console import Console
from rich.table import Table

from fleetbench.profile.trace.summary import summarize_trace

# The third-party traces come from the tests' data helper ($FLEETBENCH_TEST_DATA): one place says where.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from testdata import get_test_data_dir, missing_reason

DATA = get_test_data_dir() / "hta"
LARGEST = DATA / "nccl_parser_config" / "nccl_data.json.gz"
RANKS = DATA / "trace_filter"
ROUNDS = perfkit.rounds(full=5, quick=3)
TARGET = 3.0
MEMORY_TARGET = 1.0
console = Console()


def hta_work(trace_dir: Path) -> Callable[[], None]:
    from hta.trace_analysis import TraceAnalysis

    def run() -> None:
        analysis = TraceAnalysis(trace_dir=str(trace_dir))
        analysis.get_temporal_breakdown(visualize=False)
        analysis.get_comm_comp_overlap(visualize=False)
        for rank in analysis.t.get_ranks():
            analysis.get_idle_time_breakdown(ranks=[rank], visualize=False)

    return run


def our_work(traces: list[Path]) -> Callable[[], None]:
    def run() -> None:
        for trace in traces:
            summarize_trace(trace)

    return run


CHILD = """
import logging, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
from pathlib import Path
if sys.argv[1] == "hta":
    from hta.trace_analysis import TraceAnalysis
    analysis = TraceAnalysis(trace_dir=sys.argv[2])
    analysis.get_temporal_breakdown(visualize=False)
    analysis.get_comm_comp_overlap(visualize=False)
    analysis.get_idle_time_breakdown(ranks=[0], visualize=False)
else:
    from fleetbench.profile.trace.summary import summarize_trace
    summarize_trace(Path(sys.argv[2]))
# VmHWM, not ru_maxrss: Linux carries the forking parent's ru_maxrss over into the child
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def peak_rss_mib(side: str, target: Path) -> float:
    """Max RSS (MiB) of a fresh process that does one side's work on `target` (imports included)."""
    done = subprocess.run([sys.executable, "-c", CHILD, side, str(target)], capture_output=True, text=True, check=True)
    return int(done.stdout.strip().splitlines()[-1]) / 1024  # kB


def timed(fn: Callable[[], None]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def interleaved(
    variants: dict[str, Callable[[], None]], rounds: int, pick: Callable[[list[float]], float] = statistics.median
) -> dict[str, float]:
    """Time each variant `rounds` times, alternating their order every round; `pick` of each one's times."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():  # warm up: imports, caches
        fn()
    for index in range(rounds):
        order = list(variants.items()) if index % 2 == 0 else list(reversed(variants.items()))
        for name, fn in order:
            times[name].append(timed(fn))
    return {name: pick(values) for name, values in times.items()}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args()
    try:
        import hta  # noqa: F401
    except ImportError:
        console.print("perf_trace: HolisticTraceAnalysis is not installed (the dev extra): no trace row")
        perfkit.emit(perfkit.skipped("trace summary: HTA / ours", f">= {TARGET:g}", "HTA is not installed"))
        return 0
    if (reason := missing_reason()) is not None:
        console.print(f"perf_trace: no trace row: {reason}")
        perfkit.emit(perfkit.skipped("trace summary: HTA / ours", f">= {TARGET:g}", reason))
        return 0
    logging.getLogger("hta").setLevel(logging.ERROR)  # HTA logs every parse at WARNING
    warnings.filterwarnings("ignore")
    table = Table(title=f"fleetbench perf, trace summary vs HTA ({cpu_model()}; medians of {args.rounds} rounds)")
    table.add_column("row")
    table.add_column("ratio", justify="right")
    table.add_column("detail")
    missed = False
    with tempfile.TemporaryDirectory() as tmp:
        single = Path(tmp) / "largest"
        single.mkdir()
        shutil.copy(LARGEST, single / LARGEST.name)  # HTA reads a folder
        rows = [
            (f"{LARGEST.name} (largest trace) HTA / ours (target >= {TARGET:.0f})", single, [LARGEST], True),
            ("trace_filter, 2 NCCL ranks, HTA / ours (for comparison)", RANKS, sorted(RANKS.glob("*.json.gz")), False),
        ]
        for label, trace_dir, traces, is_target in rows:
            console.print(f"measuring: {label} ...")
            medians = interleaved({"hta": hta_work(trace_dir), "ours": our_work(traces)}, args.rounds)
            ratio = medians["hta"] / medians["ours"]
            missed |= is_target and ratio < TARGET
            if is_target:
                perfkit.emit(
                    perfkit.judged(
                        f"trace summary: HTA / ours, {LARGEST.name}",
                        ratio,
                        f">= {TARGET:g}",
                        f"HTA {medians['hta']:.3f} s, ours {medians['ours']:.3f} s, medians of {args.rounds} rounds",
                    )
                )
            table.add_row(
                label,
                f"{ratio:.2f}",
                f"HTA {medians['hta']:.3f} s, ours {medians['ours']:.3f} s"
                + (" [yellow]below target[/]" if is_target and ratio < TARGET else ""),
            )
        console.print("measuring: peak memory, one process per side ...")
        hta_mib = statistics.median(peak_rss_mib("hta", single) for _ in range(3))
        our_mib = statistics.median(peak_rss_mib("ours", LARGEST) for _ in range(3))
        memory_ratio = hta_mib / our_mib
        missed |= memory_ratio <= MEMORY_TARGET
        perfkit.emit(
            perfkit.judged(
                f"trace summary: peak memory HTA / ours, {LARGEST.name}",
                memory_ratio,
                f">= {MEMORY_TARGET:g}",
                f"HTA {hta_mib:.0f} MiB, ours {our_mib:.0f} MiB (medians of 3 processes)",
            )
        )
        table.add_row(
            f"{LARGEST.name} peak memory (VmHWM) HTA / ours (target > {MEMORY_TARGET:.0f})",
            f"{memory_ratio:.2f}",
            f"HTA {hta_mib:.0f} MiB, ours {our_mib:.0f} MiB (medians of 3 processes)",
        )
    console.print(table)
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
