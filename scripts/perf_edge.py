"""`make perf`, edge rows: ratios measured side by side in one run on this machine's wgpu adapter.

1. GEMM at 1024^3 fp32 as a fraction of the same adapter's FMA peak (the fastest of the peak_fma
   probes, 2, 3 or 4 chains per invocation: which one is fastest depends on the driver; each sized to
   fill the device as `edge run` sizes it, fleetbench.edge.peak_sizing), target
   >= 50%: the subgroup GEMM on texture inputs (gemm_texture) where the adapter has subgroups, with
   the storage-buffer subgroup GEMM, the register-blocked vec4 kernel and the workgroup-memory tiled one
   beside it for comparison.
2. On a CPU adapter (lavapipe), the best GEMM's GFLOP/s against torch.matmul on the same CPU, as a ratio.

The variants run interleaved (A B C A B C ...) for ROUNDS rounds, so drift and other load on the
machine hit all of them alike; each figure is the median over the rounds of per-round medians.
Not a test: prints the table and exits 0 (also when no adapter exists: it says why); 1 on a wrong result.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time

import perfkit
from rich.console import Console
from rich.table import Table

from fleetbench.config.schema import EdgeConfig
from fleetbench.edge.plan import EdgePlan
from fleetbench.errors import UserError

ROUNDS = perfkit.rounds(full=7, quick=5)
TARGET = ">= 0.5"  # the first GEMM the adapter runs, over its FMA peak
PER_ROUND = 3  # dispatches (or matmuls) per variant per round
N = 1024
# The first one the adapter can run is the target row; the others are measured beside it for comparison.
GEMMS = ("gemm_texture", "gemm_subgroup", "gemm_vec4", "gemm_tiled")
PROBES = ("peak_fma", "peak_fma_2chain", "peak_fma_4chain")
console = Console()


def plan_gemms() -> tuple[EdgePlan, list[str]] | None:
    """The GEMMs this adapter can run and the three peak probes, planned and compiled; None without one."""
    from fleetbench.edge import gpu, kernels
    from fleetbench.edge.plan import plan_edge

    try:
        rep = gpu.report(gpu.select_adapter("auto", None, "high-performance"))
        gemms = [k for k in GEMMS if not kernels.KERNELS[k].missing_features(rep.features)]
        cfg = EdgeConfig(
            kernels=[*gemms, *PROBES],
            dtypes=["float32"],
            gemm_sizes=[N],
            mps=False,
        )
        return plan_edge(cfg), gemms
    except UserError as exc:
        console.print(f"perf_edge: no edge figures on this machine: {exc}")
        perfkit.emit(perfkit.skipped("edge GEMM / FMA peak", TARGET, f"no adapter: {exc}"))
        return None


def measure_rates(plan: EdgePlan) -> tuple[dict[str, float], dict[str, list[float]]] | None:
    """FLOP/s of every planned kernel and of torch.matmul, medians of interleaved rounds, and each
    round's median seconds; None if a kernel gave a wrong result."""
    from fleetbench.edge import kernels, measure

    with contextlib.ExitStack() as stack:
        timers = {}
        sized = []
        for item in plan.compiled:
            if item.problem.spec.op == "peak":  # grown to fill this device, as `edge run` sizes it
                item, sizing = measure.sized_probe(plan, item)
                console.print(f"perf_edge: {item.problem.spec.name} sized to {sizing.workgroups} workgroups x "
                              f"{sizing.iterations} steps ({sizing.seconds * 1e3:.1f} ms a dispatch)")  # fmt: skip
            sized.append(item)
            timer, out = stack.enter_context(measure.bound(plan, item))
            timer.run_once()
            if not kernels.compare(item.problem, plan.device.queue.read_buffer(out))[2]:
                console.print(f"perf_edge: {item.problem.label} gave a wrong result; no figures")
                return None
            timers[item.problem.spec.name] = timer.sample
        variants = [*timers.items(), ("torch.matmul", torch_matmul(N))]
        medians: dict[str, list[float]] = {name: [] for name, _ in variants}
        for index in range(ROUNDS):
            for name, fn in variants if index % 2 == 0 else reversed(variants):
                medians[name].append(statistics.median(fn(PER_ROUND)))
    seconds = {name: statistics.median(values) for name, values in medians.items()}
    rate = {name: 2.0 * N**3 / s for name, s in seconds.items()}
    for item in sized:
        if item.problem.spec.op == "peak":
            rate[item.problem.spec.name] = item.problem.flops / seconds[item.problem.spec.name]
    return rate, medians


def emit_target_row(gemms: list[str], rate: dict[str, float], rounds: dict[str, list[float]]) -> None:
    """The target row for `make perf`: the first GEMM over the fastest probe, per round and overall."""
    probe = max(PROBES, key=rate.__getitem__)
    gemm = gemms[0]
    # Seconds per round become a ratio of rates per round: (probe time / probe flops) over GEMM's.
    probe_flops = rate[probe] * statistics.median(rounds[probe])
    per_round = [(2.0 * N**3 / g) / (probe_flops / p) for g, p in zip(rounds[gemm], rounds[probe], strict=True)]
    perfkit.emit(
        perfkit.judged(
            f"edge {gemm} {N}^3 fp32 / FMA peak",
            rate[gemm] / rate[probe],
            TARGET,
            f"{rate[gemm] / 1e9:.1f} GFLOP/s vs {probe} {rate[probe] / 1e9:.1f} GFLOP/s, {ROUNDS} rounds",
            samples=per_round,
        )
    )


def perf_table(plan: EdgePlan, gemms: list[str], rate: dict[str, float]) -> Table:
    """GEMM / fastest probe (the target row first), each probe against the fastest, GEMM / torch."""
    from fleetbench.edge import kernels

    rep = plan.adapter
    assert rep is not None
    probe = max(PROBES, key=rate.__getitem__)
    table = Table(title=f"fleetbench perf, edge ({rep.device}, {plan.timing} timing; medians of {ROUNDS} rounds)")
    table.add_column("row")
    table.add_column("ratio", justify="right")
    table.add_column("detail")
    for kernel in gemms:
        ratio = rate[kernel] / rate[probe]
        target = " (target >= 0.50)" if kernel == gemms[0] else " (for comparison)"
        table.add_row(
            f"{kernel} {N}^3 fp32 / FMA peak{target}",
            f"{ratio:.3f}",
            f"{rate[kernel] / 1e9:.1f} GFLOP/s vs {probe} {rate[probe] / 1e9:.1f} GFLOP/s"
            + ("" if ratio >= 0.5 or kernel != gemms[0] else " [yellow]below target[/]"),
        )
    for name in PROBES:  # the denominator, and how much the chain count matters on this driver
        table.add_row(
            f"{name} fp32 / fastest probe",
            f"{rate[name] / rate[probe]:.3f}",
            f"{rate[name] / 1e9:.1f} GFLOP/s ({kernels.PEAK_LANES[name] // 4} chains)",
        )
    best = gemms[0]
    if rep.adapter_type == "CPU":
        table.add_row(
            f"{best} on {rep.device.split(' (')[0]} / torch.matmul, same CPU",
            f"{rate[best] / rate['torch.matmul']:.3f}",
            f"{rate[best] / 1e9:.1f} GFLOP/s vs torch.matmul {rate['torch.matmul'] / 1e9:.1f} GFLOP/s "
            f"({torch_threads()} threads)",
        )
    else:
        table.add_row(f"{best} / torch.matmul", "-", f"adapter is {rep.adapter_type}, not this CPU: not comparable")
    return table


def main() -> int:
    planned = plan_gemms()
    if planned is None:
        return 0
    plan, gemms = planned
    assert plan.adapter is not None
    rep = plan.adapter
    console.print(
        f"measuring on {rep.device} ({rep.backend}, {rep.adapter_type}), {plan.timing} timing, "
        f"{ROUNDS} interleaved rounds ..."
    )
    measured = measure_rates(plan)
    if measured is None:
        perfkit.emit(perfkit.Row("edge GEMM / FMA peak", None, TARGET, "FAIL", "a kernel gave a wrong result"))
        return 1
    rate, per_round = measured
    emit_target_row(gemms, rate, per_round)
    if rep.subgroup_size:
        console.print(f"subgroup size measured on {rep.device}: {rep.subgroup_size}")
    console.print(perf_table(plan, gemms, rate))
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
