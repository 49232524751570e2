"""Profiling: where the time goes and what limits each kernel (ncu) or operator (torch.profiler).

Each panel reads kernel metrics (Nsight Compute, GPU) or operator metrics (torch.profiler, any
device), whichever the selected runs have, so the same dashboard serves a GPU cluster and a laptop.
"""

from __future__ import annotations

from fleetbench.dashboards.definition import Dashboard, Panel, Query, Row, sel, unit_of


def kernel_or_op(kernel_metric: str, op_metric: str, how: str = "max", top: int = 15) -> str:
    """The `top` kernels by `kernel_metric`, or where a run has no kernels, the top ops by `op_metric`."""
    return f"topk({top}, {how} by (kernel) ({sel(kernel_metric)})) or topk({top}, {how} by (op) ({sel(op_metric)}))"


time_row = Row(
    "Where the time goes",
    (
        Panel(
            "Top kernels and ops by time",
            "bargauge",
            (
                Query(
                    kernel_or_op("fleetbench_kernel_duration_seconds", "fleetbench_profile_op_seconds"),
                    legend="{{kernel}}{{op}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_profile_op_seconds"),
            "GPU time per kernel (ncu gpu__time_duration.sum) or device time per operator (torch.profiler)",
            width=12,
            height=10,
        ),
        Panel(
            "Classes",
            "bargauge",
            (
                Query(
                    f"count by (class) ({sel('fleetbench_kernel_class_info')})",
                    legend="kernels: {{class}}",
                    instant=True,
                ),
                Query(
                    f"count by (class) ({sel('fleetbench_profile_op_class_info')})",
                    legend="ops: {{class}}",
                    instant=True,
                ),
            ),
            "short",
            "How many kernels / operators are memory-bound, compute-bound, balanced or latency-bound",
            width=12,
            height=10,
        ),
    ),
)

limits_row = Row(
    "What limits them",
    (
        Panel(
            "Compute utilisation (speed-of-light)",
            "bargauge",
            (
                Query(
                    kernel_or_op("fleetbench_kernel_compute_sol_ratio", "fleetbench_profile_op_compute_peak_ratio"),
                    legend="{{kernel}}{{op}}",
                    instant=True,
                ),
            ),
            "percentunit",
            "ncu sm__throughput % of peak per kernel, or achieved FLOP/s over the peak per operator",
            width=12,
            height=10,
        ),
        Panel(
            "Memory utilisation (speed-of-light)",
            "bargauge",
            (
                Query(
                    kernel_or_op("fleetbench_kernel_memory_sol_ratio", "fleetbench_profile_op_memory_peak_ratio"),
                    legend="{{kernel}}{{op}}",
                    instant=True,
                ),
            ),
            "percentunit",
            "ncu gpu__compute_memory_throughput % of peak per kernel, or achieved bytes/s over peak bandwidth per op",
            width=12,
            height=10,
        ),
    ),
)

roofline_row = Row(
    "Roofline",
    (
        Panel(
            "Arithmetic intensity",
            "table",
            (
                Query(
                    kernel_or_op(
                        "fleetbench_kernel_arithmetic_intensity_flop_per_byte",
                        "fleetbench_profile_op_arithmetic_intensity_flop_per_byte",
                    ),
                    instant=True,
                ),
            ),
            "short",
            "FLOPs per byte of DRAM traffic (ncu) or of tensor traffic (torch.profiler): the roofline's x",
            width=12,
        ),
        Panel(
            "Achieved FLOP/s",
            "table",
            (
                Query(
                    kernel_or_op(
                        "fleetbench_kernel_achieved_flop_per_second", "fleetbench_profile_op_achieved_flop_per_second"
                    ),
                    instant=True,
                ),
            ),
            unit_of("fleetbench_profile_op_achieved_flop_per_second"),
            "Achieved FLOP/s: the roofline's y",
            width=12,
        ),
        Panel(
            "Peak FLOP/s under the roofline",
            "stat",
            (
                Query(
                    f"max by (dtype, source) ({sel('fleetbench_profile_peak_flop_per_second')})",
                    legend="{{dtype}} ({{source}})",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_profile_peak_flop_per_second"),
            "Compute roof: measured matmul peak or datasheet",
            width=12,
        ),
        Panel(
            "Peak bandwidth under the roofline",
            "stat",
            (
                Query(
                    f"max by (source) ({sel('fleetbench_profile_peak_bytes_per_second')})",
                    legend="{{source}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_profile_peak_bytes_per_second"),
            "Memory roof: measured copy/triad or datasheet",
            width=12,
        ),
    ),
)

ops_row = Row(
    "Operators over time",
    (
        Panel(
            "Per-op device time",
            "timeseries",
            (Query(f"topk(10, {sel('fleetbench_profile_op_seconds')})", legend="{{op}} {{run_id}}"),),
            unit_of("fleetbench_profile_op_seconds"),
            "Device time of the ten slowest operators per run, run after run",
            width=24,
        ),
    ),
)

# `fleetbench trace summarize --record` (and the demo's trace stage): one record per rank trace of a
# distributed job, the trace's rank in the common `rank` label.
ranks_row = Row(
    "The distributed job, rank by rank",
    (
        Panel(
            "Time per rank: compute, communication, memory, idle",
            "barchart",
            (
                Query(
                    f"max by (rank, category) ({sel('fleetbench_profile_time_share_ratio', benchmark='trace')})",
                    legend="rank {{rank}} {{category}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_profile_time_share_ratio"),
            "Share of each rank's profiled steps in compute, exposed communication, memory and idle "
            "(HTA's temporal breakdown; on CPU ranks the gloo collectives count as communication)",
            width=12,
        ),
        Panel(
            "Communication hidden under compute",
            "bargauge",
            (
                Query(
                    f"max by (rank) ({sel('fleetbench_profile_comm_overlap_ratio')})",
                    legend="rank {{rank}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_profile_comm_overlap_ratio"),
            "Share of each rank's communication time that overlaps computation (HTA's definition); higher is better",
            width=6,
        ),
        Panel(
            "Straggler",
            "table",
            (
                Query(
                    f"max by (run_id, rank, figure) ({sel('fleetbench_profile_straggler_gap_ratio')})",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_profile_straggler_gap_ratio"),
            "The rank furthest above the ranks' median in step time or exposed communication, and by how much",
            width=6,
        ),
    ),
)

PROFILING = Dashboard(
    uid="fleetbench-profiling",
    title="fleetbench / Profiling",
    description="torch.profiler and Nsight Compute: top kernels and ops, speed-of-light, classes, roofline, "
    "and the distributed job rank by rank",
    benchmarks=("profile", "trace"),
    rows=(time_row, limits_row, roofline_row, ops_row, ranks_row),
)
