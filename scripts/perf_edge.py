"""`make perf`, edge rows: ratios measured side by side in one run on this machine's wgpu adapter.

1. GEMM at 1024^3 fp32 (the register-blocked vec4 kernel, and the tiled one for comparison) as a
   fraction of the same adapter's FMA peak (the peak_fma probe), target >= 50%.
2. On a CPU adapter (lavapipe), the GEMM's GFLOP/s against torch.matmul on the same CPU, as a ratio.

The variants run interleaved (A B C A B C ...) for ROUNDS rounds, so drift and other load on the
machine hit all of them alike; each figure is the median over the rounds of per-round medians.
Not a test: prints the table and exits 0 (also when no adapter exists: it says why); 1 on a wrong result.
"""

from __future__ import annotations

import statistics
import sys
import time

from rich.console import Console
from rich.table import Table

from fleetbench.config.schema import EdgeConfig
from fleetbench.errors import UserError

ROUNDS = 7
PER_ROUND = 3  # dispatches (or matmuls) per variant per round
N = 1024
console = Console()


def main() -> int:
    from fleetbench.edge import kernels, runner

    cfg = EdgeConfig(
        kernels=["gemm_vec4", "gemm_tiled", "peak_fma"],
        dtypes=["float32"],
        gemm_sizes=[N],
        peak_workgroups=64,
        peak_iterations=1024,
        mps=False,
    )
    try:
        plan = runner.plan_edge(cfg, console)
    except UserError as exc:
        console.print(f"perf_edge: no edge figures on this machine: {exc}")
        return 0
    assert plan.adapter is not None
    rep = plan.adapter
    console.print(
        f"measuring on {rep.device} ({rep.backend}, {rep.adapter_type}), {plan.timing} timing, "
        f"{ROUNDS} interleaved rounds ..."
    )
    with (
        runner.bound(plan, plan.compiled[0]) as (vec4, vec4_out),
        runner.bound(plan, plan.compiled[1]) as (tiled, tiled_out),
        runner.bound(plan, plan.compiled[2]) as (peak, peak_out),
    ):
        outputs = (
            (plan.compiled[0], vec4, vec4_out),
            (plan.compiled[1], tiled, tiled_out),
            (plan.compiled[2], peak, peak_out),
        )
        for item, timer, out in outputs:
            timer.run_once()
            if not kernels.compare(item.problem, plan.device.queue.read_buffer(out))[2]:
                console.print(f"perf_edge: {item.problem.label} gave a wrong result; no figures")
                return 1
        matmul = torch_matmul(N)
        medians: dict[str, list[float]] = {"gemm_vec4": [], "gemm_tiled": [], "peak_fma": [], "torch.matmul": []}
        for index in range(ROUNDS):
            variants = [
                ("gemm_vec4", vec4.sample),
                ("gemm_tiled", tiled.sample),
                ("peak_fma", peak.sample),
                ("torch.matmul", matmul),
            ]
            for name, fn in variants if index % 2 == 0 else reversed(variants):
                medians[name].append(statistics.median(fn(PER_ROUND)))
    seconds = {name: statistics.median(values) for name, values in medians.items()}
    gemm_flops = 2.0 * N**3
    rate = {
        "gemm_vec4": gemm_flops / seconds["gemm_vec4"],
        "gemm_tiled": gemm_flops / seconds["gemm_tiled"],
        "peak_fma": plan.compiled[2].problem.flops / seconds["peak_fma"],
        "torch.matmul": gemm_flops / seconds["torch.matmul"],
    }
    table = Table(title=f"fleetbench perf, edge ({rep.device}, {plan.timing} timing; medians of {ROUNDS} rounds)")
    table.add_column("row")
    table.add_column("ratio", justify="right")
    table.add_column("detail")
    for kernel in ("gemm_vec4", "gemm_tiled"):
        ratio = rate[kernel] / rate["peak_fma"]
        table.add_row(
            f"{kernel} {N}^3 fp32 / FMA peak (target >= 0.50)",
            f"{ratio:.3f}",
            f"{rate[kernel] / 1e9:.1f} GFLOP/s vs peak_fma {rate['peak_fma'] / 1e9:.1f} GFLOP/s"
            + ("" if ratio >= 0.5 else " [yellow]below target[/]"),
        )
    if rep.adapter_type == "CPU":
        table.add_row(
            f"gemm_vec4 on {rep.device.split(' (')[0]} / torch.matmul, same CPU",
            f"{rate['gemm_vec4'] / rate['torch.matmul']:.3f}",
            f"{rate['gemm_vec4'] / 1e9:.1f} GFLOP/s vs torch.matmul {rate['torch.matmul'] / 1e9:.1f} GFLOP/s "
            f"({torch_threads()} threads)",
        )
    else:
        table.add_row("gemm_vec4 / torch.matmul", "-", f"adapter is {rep.adapter_type}, not this CPU: not comparable")
    console.print(table)
    return 0


def torch_matmul(n: int):  # type: ignore[no-untyped-def]
    import torch

    torch.manual_seed(0)
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)

    def sample(count: int) -> list[float]:
        out = []
        for _ in range(count):
            started = time.perf_counter()
            torch.matmul(a, b)
            out.append(time.perf_counter() - started)
        return out

    return sample


def torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


if __name__ == "__main__":
    sys.exit(main())
