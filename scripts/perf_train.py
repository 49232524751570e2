#!/usr/bin/env python3
"""Perf rows of the FSDP2 trainer on the CPU, measured side by side in one run (`make perf`).

  1. FSDP2 on 2 gloo ranks (1 thread each) vs one unsharded process (2 threads) training the same
     model on the same global batch: tokens/s and their ratio (target >= 0.8).
  2. Telemetry overhead on the training loop (metrics, background push, step history), as the
     trainer measures it around its own telemetry calls: share of step time (target <= 1%).

The two setups alternate (A B A B ...) so drift on a shared machine hits both. The ratio is taken
between the best run of each setup (like timeit's minimum: other processes only ever slow a run
down); the median ratio is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fleetbench.results.store import read_records

RATIO_TARGET = 0.8
TELEMETRY_TARGET = 0.01


def run(results: Path, run_id: str, nproc: int, sets: list[str]) -> list[dict[str, Any]]:
    cmd = [
        sys.executable,
        "-m",
        "fleetbench",
        "train",
        "--results-dir",
        str(results),
        "--run-id",
        run_id,
        "--nproc",
        str(nproc),
        "--device",
        "cpu",
        *(f"--set=train.{item}" for item in sets),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"perf_train: {run_id} failed: {done.stderr.strip().splitlines()[-1:]}")
    return [r.summary for r in read_records(results / run_id) if r.status == "ok"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--log-every", type=int, default=10, help="log interval (both setups)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()

    common = [f"preset={args.preset}", f"steps={args.steps}", f"log_every={args.log_every}", "plot=false"]
    from fleetbench.config.train import PRESETS

    per_rank = PRESETS[args.preset].batch_size
    fsdp_tps: list[float] = []
    single_tps: list[float] = []
    telemetry: list[float] = []
    with tempfile.TemporaryDirectory(prefix="perf-train-") as scratch:
        results = Path(scratch)
        for i in range(args.repeats):
            sharded = run(results, f"fsdp2-{i}", 2, [*common, "threads=1", f"batch_size={per_rank}"])
            single = run(results, f"single-{i}", 1, [*common, "threads=2", "fsdp=false", f"batch_size={2 * per_rank}"])
            fsdp_tps.append(statistics.mean(s["tokens_per_s"] for s in sharded))
            single_tps.append(single[0]["tokens_per_s"])
            telemetry.append(max(s["telemetry_overhead_ratio"] for s in sharded + single))
    fsdp, one = max(fsdp_tps), max(single_tps)
    ratio = fsdp / one
    median_ratio = statistics.median(fsdp_tps) / statistics.median(single_tps)
    overhead = max(telemetry)
    rows = [
        {"row": "train.cpu.fsdp2_2ranks_tokens_per_s", "value": round(fsdp, 1), "runs": fsdp_tps},
        {"row": "train.cpu.single_process_tokens_per_s", "value": round(one, 1), "runs": single_tps},
        {
            "row": "train.cpu.fsdp2_vs_single_ratio",
            "value": round(ratio, 3),
            "target": f">= {RATIO_TARGET}",
            "ok": ratio >= RATIO_TARGET,
        },
        {"row": "train.cpu.fsdp2_vs_single_median_ratio", "value": round(median_ratio, 3)},
        {
            "row": "train.telemetry_overhead_ratio",
            "value": round(overhead, 5),
            "target": f"<= {TELEMETRY_TARGET}",
            "ok": overhead <= TELEMETRY_TARGET,
        },
    ]
    print(f"{'row':42} {'value':>12} {'target':>10}  status")
    for row in rows:
        status = "" if "ok" not in row else ("ok" if row["ok"] else "BELOW TARGET")
        print(f"{row['row']:42} {row['value']:>12} {row.get('target', ''):>10}  {status}")
    for row in rows[:2]:
        print(f"  {row['row']} runs: {', '.join(f'{v:,.0f}' for v in row['runs'])}")
    print(
        f"({args.preset} preset, {args.steps} steps, log every {args.log_every}, {args.repeats} alternating "
        "repeats, best of each; tokens/s exclude the first log interval; telemetry: worst rank of any run)"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    missed = [row["row"] for row in rows if row.get("ok") is False]
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    raise SystemExit(main())
