"""`make perf`: performance ratios measured side by side in one run. Not a test: these machines are noisy.

Each row compares two variants of the same work, interleaved (A B A B ...) so drift hits both,
and prints the ratio of medians. Later rows come from the benchmarks' own perf scripts.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from fleetbench.config.schema import TelemetryConfig
from fleetbench.services.stack import LocalStack, free_port
from fleetbench.telemetry.recorder import RunIdentity
from fleetbench.telemetry.session import BenchmarkRun

console = Console()
SCRIPTS = Path(__file__).resolve().parent


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


def interleaved(variants: dict[str, Callable[[int], float]], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in variants}
    for index in range(rounds):
        for name, fn in variants.items() if index % 2 == 0 else reversed(list(variants.items())):
            times[name].append(fn(index))
    return {name: statistics.median(values) for name, values in times.items()}


def telemetry_overhead_row(table: Table) -> None:
    torch.manual_seed(0)
    a = torch.randn(512, 512) / 23
    steps = 100
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stack = LocalStack(root / "stack", free_port(), free_port(), scrape_interval_s=1.0).up()
        try:
            every_step = TelemetryConfig(pushgateway=stack.pushgateway_url, push_interval_s=0.0)
            default = TelemetryConfig(pushgateway=stack.pushgateway_url)
            medians = interleaved(
                {
                    "plain": lambda i: loop_plain(a, steps),
                    "push every step": lambda i: loop_with_telemetry(a, steps, every_step, root, f"e{i}"),
                    "push coalesced (1/s)": lambda i: loop_with_telemetry(a, steps, default, root, f"c{i}"),
                },
                rounds=6,
            )
        finally:
            stack.down()
    base = medians["plain"]
    for name in ("push every step", "push coalesced (1/s)"):
        table.add_row(
            f"telemetry overhead, {name}",
            f"{medians[name] / base:.3f}",
            f"{medians[name] * 1e3:.2f} ms/step vs {base * 1e3:.2f} ms/step without telemetry "
            f"({steps} steps x 6 rounds, medians)",
        )


def main() -> int:
    table = Table(title="fleetbench perf (ratios of medians, measured side by side in this run)")
    table.add_column("row")
    table.add_column("ratio", justify="right")
    table.add_column("detail")
    console.print("measuring: telemetry overhead of one push request per step ...")
    telemetry_overhead_row(table)
    console.print(table)
    status = 0
    for extra in sorted(SCRIPTS.glob("perf_*.py")):
        console.rule(extra.stem)
        status |= subprocess.run([sys.executable, str(extra)], check=False).returncode
    return status


if __name__ == "__main__":
    raise SystemExit(main())
