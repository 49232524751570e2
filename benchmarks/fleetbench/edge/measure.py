"""Time the planned kernels: per kernel a cooldown back to the idle temperature, the thermal state
before, warm-ups, the first result checked against numpy, tries until the median latency is stable,
and the thermal state after (fleetbench.edge.discipline)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from fleetbench.edge import kernels, peak_sizing, timing
from fleetbench.edge.discipline import ThermalRecord, Watch
from fleetbench.edge.export import record_kernel
from fleetbench.edge.native import optional_module
from fleetbench.edge.plan import Compiled, EdgePlan
from fleetbench.edge.rows import PERCENTILES, KernelRow
from fleetbench.edge.stability import Stability, supported_percentile
from fleetbench.errors import UserError
from fleetbench.job import Progress
from fleetbench.telemetry.session import BenchmarkRun


@contextlib.contextmanager
def bound(plan: EdgePlan, item: Compiled) -> Iterator[tuple[timing.DispatchTimer, Any]]:
    """Buffers (or input textures) and bind group for one problem, a timer on them, and the output
    buffer; freed on exit."""
    wgpu = optional_module("wgpu")
    device, problem = plan.device, item.problem
    usage = wgpu.BufferUsage
    buffers = [device.create_buffer_with_data(data=problem.params, usage=usage.UNIFORM | usage.COPY_DST)]
    textures: list[Any] = []
    try:
        resources: list[Any] = []
        for i, array in enumerate(problem.inputs()):
            if problem.texture_sizes:
                textures.append(_input_texture(device, array, problem.texture_sizes[i], problem.dtype))
                resources.append(textures[-1].create_view())
            else:
                buffers.append(device.create_buffer_with_data(data=array.tobytes(), usage=usage.STORAGE))
                resources.append(_whole(buffers[-1]))
        buffers.append(device.create_buffer(size=problem.output_nbytes, usage=usage.STORAGE | usage.COPY_SRC))
        resources = [_whole(buffers[0]), *resources, _whole(buffers[-1])]
        bind_group = device.create_bind_group(
            layout=item.pipeline.get_bind_group_layout(0),
            entries=[{"binding": i, "resource": r} for i, r in enumerate(resources)],
        )
        yield (
            timing.DispatchTimer(device, item.pipeline, bind_group, problem.groups, plan.timing, plan.period_ns),
            buffers[-1],
        )
    finally:
        for resource in (*buffers, *textures):
            resource.destroy()
        problem.release()


def _whole(buffer: Any) -> dict[str, Any]:
    return {"buffer": buffer, "offset": 0, "size": buffer.size}


def _input_texture(device: Any, array: Any, size: tuple[int, int], dtype: str) -> Any:
    """A read-only storage texture holding `array` in its own row-major order, 4 values per texel."""
    wgpu = optional_module("wgpu")
    width, height = size
    texture = device.create_texture(
        size=(width, height, 1),
        format=kernels.TEXTURE_FORMAT[dtype],
        usage=wgpu.TextureUsage.STORAGE_BINDING | wgpu.TextureUsage.COPY_DST,
    )
    device.queue.write_texture(
        {"texture": texture},
        array.tobytes(),
        {"bytes_per_row": width * 4 * array.itemsize, "rows_per_image": height},
        (width, height, 1),
    )
    return texture


def run_problem(plan: EdgePlan, item: Compiled, on_try: Callable[[int], None] | None = None) -> KernelRow:
    """Warm up, check the first output against numpy, then time until stable; a wrong result stays untimed.

    A peak probe is first checked at its configured step count, then sized to the device
    (fleetbench.edge.peak_sizing) and the sized dispatch is checked and timed. `on_try` is called with
    the number of each finished try (for progress).
    """
    sizing = None
    if item.problem.spec.op == "peak":
        row = _checked_row(plan, item)
        if not row.correct:
            return row
        item, sizing = sized_probe(plan, item)
    cfg, problem = plan.cfg, item.problem
    with bound(plan, item) as (timer, output):
        warm = [timer.run_once() for _ in range(cfg.warmup)]
        row = _row(plan, item, plan.device.queue.read_buffer(output))
        if sizing is not None:
            row.sizing = sizing.as_dict()
        if not row.correct:
            return row
        estimate = min(warm)
        measured = timing.measure_until_stable(
            lambda: timing.run_try(timer, cfg.try_time_s, cfg.min_iterations, cfg.max_iterations, estimate),
            plan.timing,
            cfg.min_tries,
            cfg.max_tries,
            cfg.cv_target,
            on_try,
        )
    samples = measured.samples
    row.latencies_s = samples
    row.try_medians_s = measured.try_medians
    row.p50_s, row.p90_s, row.p99_s = (supported_percentile(samples, q) for _n, q in PERCENTILES)
    row.mean_s = sum(samples) / len(samples)
    row.min_s = min(samples)
    row.variation = measured.variation
    row.stable = measured.stable
    row.cv_target = cfg.cv_target
    row.verdict = Stability(len(measured.tries), measured.variation, cfg.cv_target).verdict
    row.tries = len(measured.tries)
    row.dispatches = len(samples)
    row.flop_per_second = problem.flops / row.p50_s if problem.flops else 0.0
    row.bytes_per_second = problem.bytes_moved / row.p50_s
    return row


def _row(plan: EdgePlan, item: Compiled, raw: memoryview | bytes) -> KernelRow:
    """An untimed row for `item` with its output `raw` compared against the reference."""
    problem = item.problem
    max_abs, max_rel, correct = kernels.compare(problem, raw)
    return KernelRow(
        kernel=problem.spec.name,
        lang=problem.spec.lang,
        dtype=problem.dtype,
        size=problem.size,
        timing=plan.timing,
        correct=correct,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        tolerance=problem.tolerance,
        flops=problem.flops,
        bytes_moved=problem.bytes_moved,
    )


def _checked_row(plan: EdgePlan, item: Compiled) -> KernelRow:
    """One dispatch of `item` and its output checked (the peak probe's step-count check)."""
    with bound(plan, item) as (timer, output):
        timer.run_once()
        return _row(plan, item, plan.device.queue.read_buffer(output))


def _sized_peak(plan: EdgePlan, item: Compiled, workgroups: int, iterations: int) -> kernels.Problem:
    spec, limits = item.problem.spec, plan.adapter.limits if plan.adapter else {}
    return kernels.peak_problem(spec, item.problem.dtype, workgroups, iterations, limits, timed=True)


def sized_probe(plan: EdgePlan, item: Compiled) -> tuple[Compiled, peak_sizing.Sizing]:
    """A peak probe grown to fill this device (see _size_peak), compiled as it will be timed, and its sizing."""
    sizing = _size_peak(plan, item)
    sized = Compiled(_sized_peak(plan, item, sizing.workgroups, sizing.iterations), item.pipeline, item.source)
    return sized, sizing


def _size_peak(plan: EdgePlan, item: Compiled) -> peak_sizing.Sizing:
    """Grow the probe until it fills the device and a dispatch takes edge.peak_dispatch_s; each sizing
    dispatch's output is checked (a wrong one stops the run: the probe is broken on this device)."""
    limits = plan.adapter.limits if plan.adapter else {}
    binding = min(limits["max-storage-buffer-binding-size"], limits["max-buffer-size"])
    max_dim = limits["max-compute-workgroups-per-dimension"]
    max_workgroups = min(binding // (256 * 4), max_dim * max_dim, 1 << 20)

    def seconds_at(workgroups: int, iterations: int) -> float:
        sized = Compiled(_sized_peak(plan, item, workgroups, iterations), item.pipeline, item.source)
        with bound(plan, sized) as (timer, output):
            timer.run_once()
            if not kernels.compare(sized.problem, plan.device.queue.read_buffer(output))[2]:
                raise UserError(
                    f"{sized.problem.label}: the peak probe's sized dispatch ({workgroups} workgroups, "
                    f"{iterations} steps) returned a wrong result on this adapter; accepted: leave "
                    f"{item.problem.spec.name} out of edge.kernels"
                )
            return min(timer.sample(2))

    def flops_at(workgroups: int, iterations: int) -> float:
        return _sized_peak(plan, item, workgroups, iterations).flops

    return peak_sizing.size_probe(
        seconds_at,
        flops_at,
        plan.cfg.peak_workgroups,
        plan.cfg.peak_iterations,
        plan.cfg.peak_dispatch_s,
        max_workgroups,
    )


def add_thermal(row: KernelRow, record: ThermalRecord) -> None:
    """Put a measurement's thermal record on its row: the compact figures and both full states."""
    row.celsius_before = record.summary()["celsius_before"]
    row.celsius_after = record.summary()["celsius_after"]
    row.throttled = record.throttled
    row.throttle_reasons = record.throttle_reasons
    row.cooldown_s = record.cooldown.waited_s
    row.warnings = record.warnings
    row.thermal = record.as_dict()


def run_kernels(plan: EdgePlan, run: BenchmarkRun, progress: Progress, watch: Watch) -> list[KernelRow]:
    """Run every compiled problem as one progress task, recording each row's metrics as it finishes."""
    rows: list[KernelRow] = []
    if not plan.compiled:
        return rows
    with progress.task("edge", total=len(plan.compiled)) as task:
        for item in plan.compiled:
            label = item.problem.label

            def show_try(n: int, label: str = label) -> None:
                task.update(f"{label}: try {n}")

            def measure(item: Compiled = item, label: str = label, show: Callable[[int], None] = show_try) -> KernelRow:
                task.update(f"{label}: warm-up and check")
                return run_problem(plan, item, on_try=show)

            def cooling(label: str = label) -> None:
                task.update(f"{label}: cooldown")

            row, record = watch.around(measure, on_cooldown=cooling)
            add_thermal(row, record)
            rows.append(row)
            record_kernel(run, row)
            run.step_done()
            task.advance()
    return rows


def run_coopmat(plan: EdgePlan, run: BenchmarkRun, progress: Progress, watch: Watch) -> list[KernelRow]:
    """gemm_coopmat at every GEMM size through the raw Vulkan path, where the plan could open it."""
    from fleetbench.edge import coopmat

    coop = plan.coopmat
    if coop is None or coop.device is None:
        return []
    rows: list[KernelRow] = []
    try:
        with progress.task("edge coopmat", total=len(plan.cfg.gemm_sizes)) as task:
            for n in plan.cfg.gemm_sizes:

                def measure(n: int = n) -> KernelRow:
                    task.update(f"{coopmat.NAME} float16 {n}")
                    return coopmat.run_size(
                        coop, plan.cfg, n, on_try=lambda t: task.update(f"{coopmat.NAME} {n}: try {t}")
                    )

                row, record = watch.around(measure)
                add_thermal(row, record)
                rows.append(row)
                record_kernel(run, row)
                run.step_done()
                task.advance()
    finally:
        coop.close()
    return rows
