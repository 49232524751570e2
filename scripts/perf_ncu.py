#!/usr/bin/env python3
"""Perf row of the Nsight Compute reader (`make perf`): `fleetbench ncu summarize` against a bare read.

Both sides are whole processes, as a user starts them, on the 105-kernel report of the repository
(ncu-rep/a10_inference_105_kernels.ncu-rep of the test data, $FLEETBENCH_TEST_DATA):

  ours  `python -m fleetbench ncu summarize REPORT`: start-up, the CLI, the config, reading every
        kernel, the summary with classes and fixes, and the printed tables
  bare  `python -c ...`: NVIDIA's ncu_report loads the same report and reads every action's
        speed-of-light figures (sm__throughput, gpu__compute_memory_throughput, gpu__time_duration)

Ratio ours / bare, target <= 2: what the suite adds on top of reading the report must not cost more
than the read itself (a profiler host reads reports without torch; importing it alone took longer
than the read). The two alternate (A B A B ...) for ROUNDS rounds after one warm-up each, and each
side's figure is its fastest round, the one least disturbed on a shared machine. Not a test: prints
the table and exits 0 (also without ncu_report installed: it says so); --strict exits 1 when the
target is missed.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import perfkit
from perf_trace import cpu_model, interleaved
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from testdata import get_test_data_dir, missing_reason

REPORT = get_test_data_dir() / "ncu-rep" / "a10_inference_105_kernels.ncu-rep"
ROUNDS = perfkit.rounds(full=7, quick=5)
TARGET = 2.0
console = Console()

BARE_READ = """
import sys, ncu_report
names = (
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__time_duration.sum",
)
context = ncu_report.load_report(sys.argv[1])
rows = []
for r in range(context.num_ranges()):
    launches = context.range_by_idx(r)
    for a in range(launches.num_actions()):
        action = launches.action_by_idx(a)
        rows.append([action.metric_by_name(name).as_double() for name in names])
print(len(rows), "kernels")
"""


def ours() -> list[str]:
    return [sys.executable, "-m", "fleetbench", "ncu", "summarize", str(REPORT)]


def bare() -> list[str]:
    return [sys.executable, "-c", BARE_READ, str(REPORT)]


def process(command: list[str]) -> Callable[[], None]:
    """A whole process as one timed unit: start, run, exit."""

    def run() -> None:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return run


def fastest(variants: dict[str, list[str]], rounds: int) -> dict[str, float]:
    return interleaved({name: process(command) for name, command in variants.items()}, rounds, pick=min)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args()
    if importlib.util.find_spec("ncu_report") is None:
        console.print("perf_ncu: NVIDIA's ncu-report is not installed (the ncu extra): no ncu row")
        perfkit.emit(
            perfkit.skipped("ncu summarize / bare ncu_report read", f"<= {TARGET:g}", "ncu-report is not installed")
        )
        return 0
    if (reason := missing_reason()) is not None:
        console.print(f"perf_ncu: no ncu row: {reason}")
        perfkit.emit(perfkit.skipped("ncu summarize / bare ncu_report read", f"<= {TARGET:g}", reason))
        return 0
    # A user's install has its bytecode (pip compiles on install; a checkout writes it on the first run);
    # where PYTHONDONTWRITEBYTECODE is set, every round would compile the sources again.
    package = Path(__file__).resolve().parents[1] / "benchmarks" / "fleetbench"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    label = f"ncu summarize / ncu-report bare read (target <= {TARGET:.0f})"
    console.print(f"measuring: {label} ...")
    best = fastest({"ours": ours(), "bare": bare()}, args.rounds)
    ratio = best["ours"] / best["bare"]
    missed = ratio > TARGET
    table = Table(
        title=f"fleetbench perf, ncu reader ({cpu_model()}; fastest of {args.rounds} rounds, whole processes)"
    )
    table.add_column("row")
    table.add_column("ratio", justify="right")
    table.add_column("detail")
    table.add_row(
        label,
        f"{ratio:.2f}",
        f"{REPORT.name}: fleetbench ncu summarize {best['ours']:.3f} s, ncu_report's bare read {best['bare']:.3f} s"
        + (" [yellow]above target[/]" if missed else ""),
    )
    console.print(table)
    perfkit.emit(
        perfkit.judged(
            "ncu summarize / bare ncu_report read",
            ratio,
            f"<= {TARGET:g}",
            f"{best['ours']:.3f} s vs {best['bare']:.3f} s, fastest of {args.rounds} whole processes",
        )
    )
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
