#!/usr/bin/env python3
"""Perf row of the Nsight Compute verdicts (`make perf`): how often our class disagrees with NVIDIA's.

Over every Nsight Compute file of the test data ($FLEETBENCH_TEST_DATA: the .ncu-rep reports when
NVIDIA's ncu-report is installed, every CSV export and console log), each launch our summary classes
and NVIDIA's SOLBottleneck rule judged too is compared (fleetbench.profile.ncu.agreement): the share
that disagrees, and of those how many have no stated reason (target: 0 unexplained). The memory
level is compared where NVIDIA's rule names one. Not a test: prints the table and exits 0; --strict
exits 1 when a disagreement is unexplained.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import perfkit
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fleetbench.errors import UserError
from fleetbench.profile.ncu.agreement import Agreement
from fleetbench.profile.ncu.summary import summarize_path
from testdata import listed, missing_reason

console = Console()


def reports() -> list[Path]:
    """The Nsight Compute files of the test data this machine can read."""
    files = listed("ncu-csv", ".csv") + listed("ncu-console", ".txt")
    if importlib.util.find_spec("ncu_report") is not None:
        files = listed("ncu-rep", ".ncu-rep") + files
    return files


def measure(files: list[Path]) -> tuple[Agreement, list[str]]:
    """The agreement over `files`, and the files that hold no launch (a failed capture) with why."""
    agreement = Agreement()
    refused = []
    for path in files:
        try:
            agreement.add(summarize_path(path), path.name)
        except UserError as exc:
            refused.append(f"{path.name}: {exc}")
    return agreement, refused


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a disagreement is unexplained")
    args = parser.parse_args()
    if (reason := missing_reason()) is not None:
        console.print(f"perf_ncu_classes: no row: {reason}")
        perfkit.emit(perfkit.skipped("ncu classes unexplained vs NVIDIA's rule", "<= 0", reason))
        return 0
    files = reports()
    a, refused = measure(files)
    table = Table(title=f"fleetbench perf, ncu verdicts against NVIDIA's SOLBottleneck ({len(files)} files)")
    table.add_column("row")
    table.add_column("share", justify="right")
    table.add_column("detail")
    share = f"{a.disagree_share * 100:.1f}%"
    table.add_row(
        "class disagrees with NVIDIA's rule (target: 0 unexplained)",
        share,
        f"{a.judged} of {a.launches} launches judged by both ({a.classed} classed by us); {a.agree} agree, "
        f"{len(a.explained)} disagree with a stated reason, {len(a.unexplained)} unexplained"
        + ("" if not a.unexplained else " [yellow]above target[/]"),
    )
    level_share = (a.levels_judged - a.levels_agree) / a.levels_judged if a.levels_judged else 0.0
    table.add_row(
        "memory level differs from the one NVIDIA's rule names",
        f"{level_share * 100:.1f}%",
        f"{a.levels_agree} of {a.levels_judged} launches where both name a level agree",
    )
    console.print(table)
    perfkit.emit(
        perfkit.judged(
            "ncu classes unexplained vs NVIDIA's rule",
            len(a.unexplained),
            "<= 0",
            f"{a.judged} launches judged by both, {a.agree} agree, {len(a.explained)} differ with a stated reason",
        )
    )
    if importlib.util.find_spec("ncu_report") is None:
        console.print("the .ncu-rep reports were left out: NVIDIA's ncu-report is not installed (the ncu extra)")
    for line in refused:
        console.print(f"refused, as it must be: {line}", soft_wrap=True, markup=False, highlight=False)
    for line in a.unexplained + a.explained + a.level_differences:
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    return 1 if a.unexplained and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
