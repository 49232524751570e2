"""`make perf`: every performance row, measured side by side in one run. Not a test: these machines are noisy.

Each row compares two variants of the same work, interleaved (A B A B ...) so drift hits both, and
is judged against its target: PASS, FAIL, NOISY (the interval straddles the target) or SKIP (with
the reason); `scripts/perfkit.py` holds the rule. The first row is measured here, the others by the
benchmarks' own `scripts/perf_*.py`, each run with quick settings (FLEETBENCH_PERF_QUICK=1) so the
whole set is meant to fit ten minutes on a quiet 2-core machine; each script alone runs its full settings.
`scripts/perf_compare.py`, the compare gate's own hour-long measurement, is `make perf-gate`.

The rows are written as data, `results/perf/<UTC time>.json`, and as a page beside it made from
that file (`--publish` also puts both under docs/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import perfkit
import torch
from rich.console import Console
from rich.table import Table

from fleetbench.config.schema import TelemetryConfig
from fleetbench.devices import cpu_model_name
from fleetbench.services.stack import LocalStack, free_port
from fleetbench.telemetry.recorder import RunIdentity
from fleetbench.telemetry.session import BenchmarkRun

console = Console()
SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
GATE_SCRIPT = "perf_compare.py"  # `make perf-gate`: an hour or more, not part of `make perf`
TELEMETRY_TARGET = "<= 1.05"  # a push request per step costs at most 5 % of a few-ms step


def step_work(a: torch.Tensor) -> float:
    """A fixed CPU step of a few milliseconds, the shape of a small training step."""
    out = a
    for _ in range(4):
        out = torch.tanh(out @ a)
    return float(out[0, 0])


def loop_plain(a: torch.Tensor, steps: int) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        step_work(a)
    return (time.perf_counter() - started) / steps


def loop_with_telemetry(a: torch.Tensor, steps: int, telemetry: TelemetryConfig, root: Path, tag: str) -> float:
    identity = RunIdentity("perf-loop", f"perf-{tag}", "perf-host", "cpu", "cpu", 0)
    with BenchmarkRun(identity, root, telemetry, config={}) as run:
        started = time.perf_counter()
        for step in range(steps):
            step_started = time.perf_counter()
            step_work(a)
            run.metrics.set("fleetbench_step_seconds", time.perf_counter() - step_started)
            run.metrics.inc("fleetbench_steps_total")
            run.step_done()
            del step
        elapsed = time.perf_counter() - started
    return elapsed / steps


def interleaved(variants: dict[str, Callable[[int], float]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in variants}
    for index in range(rounds):
        for name, fn in variants.items() if index % 2 == 0 else reversed(list(variants.items())):
            times[name].append(fn(index))
    return times


def telemetry_overhead_rows() -> list[perfkit.Row]:
    torch.manual_seed(0)
    a = torch.randn(512, 512) / 23
    steps = 100
    rounds = 4  # `make perf` is this script: its own row always runs at the quick setting
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stack = LocalStack(root / "stack", free_port(), free_port(), scrape_interval_s=1.0).up()
        try:
            every_step = TelemetryConfig(pushgateway=stack.pushgateway_url, push_interval_s=0.0)
            default = TelemetryConfig(pushgateway=stack.pushgateway_url)
            times = interleaved(
                {
                    "plain": lambda i: loop_plain(a, steps),
                    "push every step": lambda i: loop_with_telemetry(a, steps, every_step, root, f"e{i}"),
                    "push coalesced (1/s)": lambda i: loop_with_telemetry(a, steps, default, root, f"c{i}"),
                },
                rounds=rounds,
            )
        finally:
            stack.down()
    base = times["plain"]
    rows = []
    for name in ("push every step", "push coalesced (1/s)"):
        ratios = [variant / plain for variant, plain in zip(times[name], base, strict=True)]
        rows.append(
            perfkit.judged(
                f"telemetry overhead, {name}",
                statistics.median(ratios),
                TELEMETRY_TARGET,
                f"{statistics.median(times[name]) * 1e3:.2f} ms/step vs {statistics.median(base) * 1e3:.2f} ms/step "
                f"without telemetry ({steps} steps x {rounds} rounds)",
                samples=ratios,
            )
        )
    return rows


def run_script(script: Path, summary: Path) -> int:
    """One perf script with quick settings, its rows appended to `summary`; its exit status."""
    env = {**os.environ, "FLEETBENCH_PERF_QUICK": "1", perfkit.SUMMARY_ENV: str(summary)}
    return subprocess.run([sys.executable, str(script)], env=env, check=False).returncode


def final_table(rows: list[perfkit.Row], cpu: str, took_s: float) -> Table:
    colour = {"PASS": "green", "FAIL": "red", "NOISY": "yellow", "SKIP": "dim"}
    table = Table(title=f"fleetbench perf on {cpu} ({os.cpu_count()} cores), {took_s / 60:.1f} min")
    for column in ("row", "value", "target", "verdict", "detail"):
        table.add_column(column, justify="right" if column == "value" else "left")
    for row in rows:
        value = "-" if row.value is None else f"{row.value:.3g}"
        if row.interval is not None:
            value += f" [{row.interval[0]:.3g}, {row.interval[1]:.3g}]"
        table.add_row(row.row, value, row.target, f"[{colour[row.verdict]}]{row.verdict}[/]", row.detail)
    return table


def page(rows: list[perfkit.Row], meta: dict[str, object]) -> str:
    """The markdown page of one `make perf` run, made from its data file alone."""
    lines = [
        f"# make perf, {meta['time']}",
        "",
        f"CPU {meta['cpu']} ({meta['cores']} cores), commit `{meta['commit']}`, {meta['minutes']} min. "
        "Written by `scripts/perf.py` from the JSON file of the same name.",
        "",
        "| row | value [95 % interval] | target | verdict | detail |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        value = "-" if row.value is None else f"{row.value:.3g}"
        if row.interval is not None:
            value += f" [{row.interval[0]:.3g}, {row.interval[1]:.3g}]"
        detail = row.detail.replace("|", "/").replace("\n", " ")
        lines.append(f"| {row.row} | {value} | {row.target} | {row.verdict} | {detail} |")
    return "\n".join(lines) + "\n"


def commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "perf", help="where the data file and page go")
    parser.add_argument("--publish", action="store_true", help="also copy both into docs/results/")
    args = parser.parse_args()
    started = time.monotonic()
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M")
    cpu = cpu_model_name() or platform.processor() or platform.machine()
    with tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "rows.jsonl"
        console.print("measuring: telemetry overhead of one push request per step ...")
        os.environ[perfkit.SUMMARY_ENV] = str(summary)
        for row in telemetry_overhead_rows():
            perfkit.emit(row)
        for script in sorted(SCRIPTS.glob("perf_*.py")):
            if script.name == GATE_SCRIPT:
                continue
            console.rule(script.stem)
            before = len(perfkit.read_summary(summary))
            status = run_script(script, summary)
            if status != 0 and len(perfkit.read_summary(summary)) == before:
                perfkit.emit(perfkit.Row(script.stem, None, "-", "FAIL", f"the script exited {status} with no row"))
        rows = perfkit.read_summary(summary)
    took = time.monotonic() - started
    console.print(final_table(rows, cpu, took))
    meta: dict[str, object] = {
        "time": stamp,
        "cpu": cpu,
        "cores": os.cpu_count(),
        "commit": commit(),
        "minutes": round(took / 60, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    data = args.out / f"perf-{stamp}.json"
    data.write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=1) + "\n")
    (args.out / f"perf-{stamp}.md").write_text(page(rows, meta))
    console.print(f"rows: {data} and {data.with_suffix('.md')}")
    if args.publish:
        docs = REPO / "docs" / "results"
        (docs / data.name).write_text(data.read_text())
        (docs / f"perf-{stamp}.md").write_text(page(rows, meta))
    return 1 if any(r.verdict == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
