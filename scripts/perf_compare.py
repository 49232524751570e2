#!/usr/bin/env python3
"""Can the gate be trusted on this machine? False positives and power of `fleetbench compare --rounds`,
on real runs of the probe (`make perf-gate`, not part of the quick `make perf`; 1.5 to 2 hours on a 2-core
machine at the defaults: 20 + 20 comparisons of 2 x 20 processes). Run it on a quiet machine: on a busy
one the gate rightly answers "unstable" (no verdict), and the table counts those apart.

Everything runs through the `fleetbench` CLI, at compare's default settings, in a temporary results
root and a temporary git repository holding a copy of this checkout's `benchmarks/`:

  commit A  the code as it is
  commit B  the planted slow-downs: the matmul probe also multiplies a slab of 10 % of A's rows by B,
            the copy probe also copies a tenth of its bytes again, both inside the timed operation and
            uncounted: 10 % more work for the same result and the same counted FLOPs and bytes, so
            each figure falls by about 9 % (1 - 1/1.1) where the work is all that costs. Real work in
            the code under test, as a regression from a commit is; not a sleep.

  1. calibrate  `fleetbench noise --rounds R -- probe ...`: this machine's run-to-run noise per figure,
                filed in the results root, so every comparison below gets its default minimum change.
  2. A/A        T x `fleetbench compare --rounds R --base-rev A --new-rev A -- probe ...`: the share of
                comparisons with any figure judged better or worse (the nominal rate: Holm keeps the
                family-wise error of a comparison at compare.alpha, 5 %), with its Wilson 95 % interval.
  3. planted    T x the same with --new-rev B: the share where the gate exits 1, and per figure the share
                judged worse.
  4. 80 % power per figure, the smallest slow-down the test catches in 80 % of comparisons: the A/A
                trials' own processes with new's samples scaled by (1 - d), judged by compare itself.

Steps 2-4 are reported for three ways of judging the same processes (VARIANTS): paired by round with
each process's best sample (compare.pair_rounds=true), and unpaired (Mann-Whitney U) with each
process's best sample (the default: compare.process_summary=best) or its median. compare's exit codes in
steps 2 and 3 are those of the default; the other columns come from the same processes judged again
by compare itself.

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

from fleetbench.compare.matching import RunRef, compare_runs
from fleetbench.compare.noise import read
from fleetbench.compare.statistics import settings_from
from fleetbench.config.compare import CompareConfig
from fleetbench.devices import cpu_model_name
from fleetbench.results.record import ResultRecord
from fleetbench.results.store import read_records

REPO = Path(__file__).resolve().parents[1]
PROBE = ("probe", "--set", "probe.matmul_sizes=[256]", "--set", "probe.copy_mib=[4]",
         "--set", "probe.min_run_time_s=0.1", "--set", "probe.threads=1")  # fmt: skip
FLOPS = "fleetbench_probe_achieved_flop_per_second"
ANCHOR = "    flops = count_flops(op)\n    timed = time_op(op, device, min_run_time_s, threads)\n"
COPY_ANCHOR = "    timed = time_op(op, device, min_run_time_s, threads)\n    moved = 2 * numel * element_size"
METRICS = (FLOPS, "fleetbench_probe_achieved_bytes_per_second")
# The ways compare can judge the same processes (compare.pair_rounds, process_summary); DEFAULT names the one
# CompareConfig sets, whose exit codes the trials record.
VARIANTS: dict[str, dict[str, Any]] = {
    "paired best": {"pair_rounds": True, "process_summary": "best"},
    "unpaired best": {"pair_rounds": False, "process_summary": "best"},
    "unpaired median": {"pair_rounds": False, "process_summary": "median"},
}
console = Console(width=150)


def planted_copy(extra: float) -> str:
    """The replacement of COPY_ANCHOR in copy_probe: `extra` of the bytes copied again, inside the timed op."""
    return (
        f"    part = max(1, round(numel * {extra!r}))  # planted: more bytes copied for the same result, uncounted\n\n"
        "    def slow_op() -> object:\n"
        "        dst[:part].copy_(src[:part])\n"
        "        return op()\n\n"
        "    timed = time_op(slow_op, device, min_run_time_s, threads)\n    moved = 2 * numel * element_size"
    )


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
    if text.count(ANCHOR) != 1 or text.count(COPY_ANCHOR) != 1:
        raise SystemExit("perf_compare: the probe changed; update ANCHOR and COPY_ANCHOR to plant the slow-downs")
    compute.write_text(text.replace(ANCHOR, planted(extra)).replace(COPY_ANCHOR, planted_copy(extra)))
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
    changes: dict[str, float | None]
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
    changes = {row["metric"]: row["change_pct"] for row in report["rows"]}
    return Trial(done.returncode, verdicts, changes, seconds, prefix, report["regressions"])


def wilson(hits: int, n: int) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(hits, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def side_ref(root: Path, prefix: str, name: str, slowdown: float = 0.0) -> RunRef:
    """One side of a trial as compare reads it; with `slowdown`, every sample of new scaled by 1 - slowdown."""
    folders = sorted(root.glob(f"{prefix}-{name}-*"))
    records = [r for folder in folders for r in read_records(folder)]
    if slowdown:
        records = [scaled(r, 1 - slowdown) for r in records]
    return RunRef(name, f"{prefix}-{name}", records, processes=len(folders), rounds=prefix)


def scaled(record: ResultRecord, factor: float) -> ResultRecord:
    figures = [f.model_copy(update={"value": f.value * factor, "samples": [x * factor for x in f.samples]})
               for f in record.headline]  # fmt: skip
    return record.model_copy(update={"headline": figures})


def judged(root: Path, prefix: str, variant: str, slowdown: float = 0.0) -> dict[str, str]:
    """compare's verdict on each figure of a trial, judged one way (VARIANTS; and a slow-down applied)."""
    cfg = CompareConfig(**VARIANTS[variant])
    calibration = read(next((root / "calibration").glob("noise-*.json")))
    base, new = side_ref(root, prefix, "base"), side_ref(root, prefix, "new", slowdown)
    comparison = compare_runs(base, new, settings_from(cfg), calibration=calibration, noise_factor=cfg.noise_factor)
    return {row.metric: row.verdict for bench in comparison.benchmarks for row in bench.rows}


def power_curves(root: Path, trials: list[Trial]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Per way of judging and figure: (slow-down, share of the A/A trials that catch it as worse)."""
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {s: {m: [] for m in METRICS} for s in VARIANTS}
    for variant in VARIANTS:
        for step in range(1, 31):
            slowdown = step / 200  # 0.5 % to 15 %
            verdicts = [judged(root, t.prefix, variant, slowdown) for t in trials]
            for metric in METRICS:
                share = sum(v.get(metric) == "worse" for v in verdicts) / len(verdicts)
                curves[variant][metric].append((slowdown, share))
    return curves


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
                      f"planted exit {slow[-1].code} {slow[-1].changes}", soft_wrap=True)  # fmt: skip
    figures = summarise(root, aa, slow, power_curves(root, aa), args)
    print_table(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def shares(root: Path, aa: list[Trial], slow: list[Trial], variant: str) -> dict[str, Any]:
    """A/A flagged and planted detected when judged one way, by compare itself from the same processes."""
    aa_v = [judged(root, t.prefix, variant) for t in aa]
    slow_v = [judged(root, t.prefix, variant) for t in slow]
    flagged = sum(any(v in ("better", "worse") for v in verdicts.values()) for verdicts in aa_v)
    out: dict[str, Any] = {"aa_flagged": flagged, "aa_flagged_ci": wilson(flagged, len(aa))}
    unstable = [sum(any(v == "unstable" for v in verdicts.values()) for verdicts in side) for side in (aa_v, slow_v)]
    out["unstable"] = {"aa": unstable[0], "planted": unstable[1]}
    for metric in METRICS:
        hits = sum(v.get(metric) == "worse" for v in slow_v)
        out[f"detected {metric}"] = (hits, wilson(hits, len(slow)))
    caught = sum(any(v == "worse" for v in verdicts.values()) for verdicts in slow_v)
    out["gate_failed"] = (caught, wilson(caught, len(slow)))
    return out


DEFAULT = next(name for name, how in VARIANTS.items() if all(getattr(CompareConfig(), k) == v for k, v in how.items()))


def summarise(root: Path, aa: list[Trial], slow: list[Trial], curves: Any, args: Any) -> dict[str, Any]:
    changes = {m: [t.changes[m] for t in slow if t.changes.get(m) is not None] for m in METRICS}
    return {
        "cpu_model": cpu_model_name(),
        "rounds": args.rounds,
        "trials": args.trials,
        "planted_extra_work": args.extra,
        "exit_codes": {"aa_nonzero": sum(t.code != 0 for t in aa), "planted_exit_1": sum(t.code == 1 for t in slow)},
        "planted_change_pct_median": {m: statistics.median(v) if v else None for m, v in changes.items()},
        "by_summary": {s: shares(root, aa, slow, s) for s in VARIANTS},
        "smallest_slowdown_at_80pct_power": {
            s: {m: next((d for d, p in curves[s][m] if p >= 0.8), None) for m in METRICS} for s in VARIANTS
        },
        "power_curves": curves,
        "seconds_per_comparison_median": statistics.median(t.seconds for t in aa + slow),
    }


def pct(pair: Any) -> str:
    hits, (low, high) = pair
    return f"{hits}/{{n}} [{low:.0%}, {high:.0%}]"


def print_table(f: dict[str, Any]) -> None:
    n = f["trials"]
    table = Table(title=f"compare --rounds {f['rounds']}: the gate on real probe runs ({f['cpu_model']})")
    for column in ("row", *VARIANTS):
        table.add_column(column if column == "row" else f"{column}{' (default)' if column == DEFAULT else ''}")
    by = f["by_summary"]
    table.add_row(
        "A/A flagged (nominal 5 %, Holm), Wilson 95 % CI",
        *(pct((by[s]["aa_flagged"], by[s]["aa_flagged_ci"])).format(n=n) for s in VARIANTS),
    )
    table.add_row(
        f"planted {f['planted_extra_work']:.0%} more work: gate exits 1",
        *(pct(by[s]["gate_failed"]).format(n=n) for s in VARIANTS),
    )
    for metric in METRICS:
        short = metric.removeprefix("fleetbench_probe_achieved_")
        change = f["planted_change_pct_median"][metric]
        table.add_row(
            f"  {short} judged worse (median change {change:+.1f}%)" if change is not None else short,
            *(pct(by[s][f"detected {metric}"]).format(n=n) for s in VARIANTS),
        )
        table.add_row(
            f"  {short}: smallest slow-down at 80 % power",
            *(
                f"{d:.1%}" if (d := f["smallest_slowdown_at_80pct_power"][s][metric]) is not None else "> 15 %"
                for s in VARIANTS
            ),
        )
    table.add_row(
        "unstable: no verdict (A/A, planted)",
        *(f"{by[s]['unstable']['aa']}/{n}, {by[s]['unstable']['planted']}/{n}" for s in VARIANTS),
    )
    table.add_row(f"exit codes of compare ({DEFAULT})",
                  f"A/A non-zero {f['exit_codes']['aa_nonzero']}/{n}; planted exit 1 {f['exit_codes']['planted_exit_1']}/{n}",
                  f"{f['seconds_per_comparison_median']:.0f} s per comparison ({2 * f['rounds']} processes)")  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    raise SystemExit(main())
