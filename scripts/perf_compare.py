#!/usr/bin/env python3
"""Can the gate be trusted on this machine? False positives and power of `fleetbench compare --rounds`,
on real runs of the probe (`make perf`; about 45 minutes on a 2-core machine at the defaults).

Everything runs through the `fleetbench` CLI, at compare's default settings, in a temporary results
root and a temporary git repository holding a copy of this checkout's `benchmarks/`:

  commit A  the code as it is
  commit B  the planted slow-down: the matmul probe also multiplies a slab of 10 % of A's rows by B
            inside the timed operation, uncounted: 10 % more multiply-adds for the same result and
            the same counted FLOPs, so its FLOP/s falls by about 9 % (1 - 1/1.1). Real work in the
            code under test, as a regression from a commit is; not a sleep.

  1. calibrate  `fleetbench noise --rounds R -- probe ...`: this machine's run-to-run noise per figure,
                filed in the results root, so every comparison below gets its default minimum change.
  2. A/A        T x `fleetbench compare --rounds R --base-rev A --new-rev A -- probe ...`: the share of
                comparisons with any figure judged better or worse (the nominal rate: Holm keeps the
                family-wise error of a comparison at compare.alpha, 5 %), with its Wilson 95 % interval.
  3. planted    T x the same with --new-rev B: the share where the gate exits 1 naming the matmul figure.
  4. 80 % power the smallest slow-down the test would catch in 80 % of comparisons, from the A/A trials'
                own per-process medians with new's scaled by (1 - d), judged exactly as compare judges
                (Mann-Whitney U, bootstrap interval, Holm with the copy figure, the minimum change).

The probe: matmul 256 (float32) and a 4 MiB copy, one thread, 0.1 s of timing per figure: its two
figures are the comparison's family. Prints a table (with the CPU model) and writes --json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from fleetbench.compare.matching import RunRef, headline_records
from fleetbench.compare.noise import min_change_pct, read
from fleetbench.compare.statistics import TestSettings, adjust, compare_samples
from fleetbench.config.compare import CompareConfig
from fleetbench.devices import cpu_model_name
from fleetbench.results.store import read_records

REPO = Path(__file__).resolve().parents[1]
PROBE = ("probe", "--set", "probe.matmul_sizes=[256]", "--set", "probe.copy_mib=[4]",
         "--set", "probe.min_run_time_s=0.1", "--set", "probe.threads=1")  # fmt: skip
FLOPS = "fleetbench_probe_achieved_flop_per_second"
ANCHOR = "    flops = count_flops(op)\n    timed = time_op(op, device, min_run_time_s, threads)\n"
console = Console()


def planted(extra: float) -> str:
    """The replacement of ANCHOR in matmul_probe: `extra` x n more rows multiplied, inside the timed op."""
    return (
        "    flops = count_flops(op)\n"
        f"    rows = max(1, round(n * {extra!r}))  # planted: more multiply-adds for the same result, uncounted\n"
        "    slab, slab_out = a[:rows], torch.empty(rows, n, device=device.torch_device, dtype=dtype)\n\n"
        "    def slow_op() -> object:\n"
        "        torch.matmul(slab, b, out=slab_out)\n"
        "        return op()\n\n"
        "    timed = time_op(slow_op, device, min_run_time_s, threads)\n"
    )


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.name=perf", "-c", "user.email=perf@localhost", *args],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def planted_repo(folder: Path, extra: float) -> tuple[Path, str, str]:
    """A git repository of this checkout's benchmarks/: commit A as is, commit B with the planted work."""
    repo = folder / "repo"
    shutil.copytree(
        REPO / "benchmarks", repo / "benchmarks", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "A: as checked out")
    compute = repo / "benchmarks" / "fleetbench" / "probe" / "compute.py"
    text = compute.read_text()
    if text.count(ANCHOR) != 1:
        raise SystemExit("perf_compare: the matmul probe changed; update ANCHOR to plant the slow-down")
    compute.write_text(text.replace(ANCHOR, planted(extra)))
    git(repo, "commit", "-qam", f"B: {extra:.0%} more multiply-adds in the timed matmul")
    return repo, git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")


def fleetbench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEETBENCH_PUSHGATEWAY": ""}
    return subprocess.run([sys.executable, "-m", "fleetbench", *args], capture_output=True, text=True, env=env)


@dataclass
class Trial:
    """One comparison: its exit status, verdicts, the matmul change, its wall time and its run prefix."""

    code: int
    verdicts: dict[str, str]
    change_pct: float | None
    seconds: float
    prefix: str
    regressions: list[str] = field(default_factory=list)


def compare_trial(root: Path, repo: Path, revs: tuple[str, str], rounds: int, prefix: str) -> Trial:
    started = time.monotonic()
    done = fleetbench("compare", "--rounds", str(rounds), "--results-dir", str(root), "--repo", str(repo),
                      "--base-rev", revs[0], "--new-rev", revs[1], "--run-prefix", prefix, "--format", "json",
                      "--", *PROBE)  # fmt: skip
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"perf_compare: {prefix}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
    report = json.loads(done.stdout)
    verdicts = {row["metric"]: row["verdict"] for row in report["rows"]}
    change = next((row["change_pct"] for row in report["rows"] if row["metric"] == FLOPS), None)
    return Trial(done.returncode, verdicts, change, seconds, prefix, report["regressions"])


def wilson(hits: int, n: int) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(hits, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def side(root: Path, prefix: str, name: str) -> dict[str, Any]:
    """Each figure's per-process medians of one side of a trial, as compare pooled them."""
    folders = sorted(root.glob(f"{prefix}-{name}-*"))
    records = [r for folder in folders for r in read_records(folder)]
    pooled = headline_records(RunRef(name, name, records, processes=len(folders)), pool=True)["probe"]
    return {(f.metric, tuple(sorted(f.labels.items()))): f for f in pooled.headline}


def caught(base: dict[str, Any], new: dict[str, Any], slowdown: float, bars: dict[Any, float]) -> bool:
    """Whether compare's test judges matmul worse once new's per-process medians are scaled by 1 - slowdown."""
    cfg = CompareConfig()
    changes = []
    for key, figure in base.items():
        samples = [s * (1 - slowdown) if key[0] == FLOPS else s for s in new[key].samples]
        settings = TestSettings(cfg.alpha, cfg.confidence_level, bars[key], scope="between processes")
        change = compare_samples(figure.value, statistics.median(samples), figure.samples, samples, "higher", settings)
        changes.append((change, figure.better))
    judged = adjust(changes, TestSettings(cfg.alpha, correction=cfg.correction))
    return any(key[0] == FLOPS and c.verdict == "worse" for key, c in zip(base, judged, strict=True))


def power_curve(root: Path, trials: list[Trial], rounds: int) -> list[tuple[float, float]]:
    calibration = read(next((root / "calibration").glob("noise-*.json")))
    assert calibration is not None
    cfg = CompareConfig()
    noise = {(f.metric, tuple(sorted(f.labels.items()))): f.noise_pct for f in calibration.figures}
    bars = {key: min_change_pct(cfg.min_change_pct, cfg.noise_factor, pct, rounds) for key, pct in noise.items()}
    sides = [(side(root, t.prefix, "base"), side(root, t.prefix, "new")) for t in trials]
    curve = []
    for tenth in range(0, 151, 5):
        slowdown = tenth / 1000
        hits = sum(caught(b, n, slowdown, bars) for b, n in sides)
        curve.append((slowdown, hits / len(sides)))
    return curve


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="A/A and planted comparisons each (20)")
    parser.add_argument("--rounds", type=int, default=CompareConfig().rounds, help="compare's default")
    parser.add_argument("--extra", type=float, default=0.10, help="planted extra multiply-adds (0.10)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", type=Path, help="keep the runs in this folder (default: a temporary one)")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="perf-compare-"))
    root = folder / "results"
    repo, a, b = planted_repo(folder, args.extra)
    console.print(f"perf_compare: {cpu_model_name()}, rounds {args.rounds}, trials {args.trials}, in {folder}")
    started = time.monotonic()
    calibrate = fleetbench("noise", "--rounds", str(args.rounds), "--results-dir", str(root), "--", *PROBE)
    if calibrate.returncode != 0:
        raise SystemExit(f"perf_compare: fleetbench noise failed: {calibrate.stderr.strip()[-400:]}")
    console.print(f"calibrated in {time.monotonic() - started:.0f} s")
    aa, slow = [], []
    for index in range(args.trials):  # A/A and planted alternate: the machine's drift hits both
        aa.append(compare_trial(root, repo, (a, a), args.rounds, f"aa{index:02d}"))
        slow.append(compare_trial(root, repo, (a, b), args.rounds, f"pl{index:02d}"))
        console.print(f"trial {index + 1}: A/A exit {aa[-1].code} {aa[-1].verdicts}; "
                      f"planted exit {slow[-1].code} {slow[-1].change_pct}")  # fmt: skip
    figures = summarise(aa, slow, power_curve(root, aa, args.rounds), args)
    print_table(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def summarise(aa: list[Trial], slow: list[Trial], curve: list[tuple[float, float]], args: Any) -> dict[str, Any]:
    flagged = sum(any(v in ("better", "worse") for v in t.verdicts.values()) or t.code != 0 for t in aa)
    detected = sum(t.code == 1 and any(FLOPS in r for r in t.regressions) for t in slow)
    at_80 = next((d for d, p in curve if p >= 0.8), None)
    changes = [t.change_pct for t in slow if t.change_pct is not None]
    return {
        "cpu_model": cpu_model_name(),
        "rounds": args.rounds,
        "trials": args.trials,
        "planted_extra_work": args.extra,
        "aa_flagged": flagged,
        "aa_flagged_ci": wilson(flagged, len(aa)),
        "planted_detected": detected,
        "planted_detected_ci": wilson(detected, len(slow)),
        "planted_change_pct_median": statistics.median(changes) if changes else None,
        "smallest_slowdown_at_80pct_power": at_80,
        "power_curve": curve,
        "seconds_per_comparison_median": statistics.median(t.seconds for t in aa + slow),
    }


def print_table(f: dict[str, Any]) -> None:
    table = Table(title=f"compare --rounds {f['rounds']}: the gate on real probe runs ({f['cpu_model']})")
    for column in ("row", "figure", "detail"):
        table.add_column(column)
    low, high = f["aa_flagged_ci"]
    table.add_row(
        "A/A false positives",
        f"{f['aa_flagged']}/{f['trials']}",
        f"{f['aa_flagged'] / f['trials']:.0%}, Wilson 95 % CI [{low:.0%}, {high:.0%}]; nominal 5 % (Holm)",
    )
    low, high = f["planted_detected_ci"]
    table.add_row(
        f"planted {f['planted_extra_work']:.0%} more work detected",
        f"{f['planted_detected']}/{f['trials']}",
        f"{f['planted_detected'] / f['trials']:.0%}, CI [{low:.0%}, {high:.0%}]; "
        f"median measured change {f['planted_change_pct_median']:+.1f}%",
    )
    at_80 = f["smallest_slowdown_at_80pct_power"]
    table.add_row(
        "smallest slow-down at 80 % power",
        f"{at_80:.1%}" if at_80 is not None else "> 15 %",
        "the A/A trials' own per-process medians, new scaled by 1 - d, judged as compare does",
    )
    table.add_row("time per comparison", f"{f['seconds_per_comparison_median']:.0f} s",
                  f"median, {2 * f['rounds']} probe processes each")  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    raise SystemExit(main())
