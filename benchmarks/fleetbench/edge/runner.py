"""`fleetbench edge run`: the kernel set on one wgpu adapter, the MPS path, an ExecuTorch program.

Everything that can be refused is checked first, before the run folder exists: the backend and
adapter, float16 and timestamp support, every problem against the adapter's limits, shader
compilation (WGSL, and SPIR-V built by glslc), the .pte file. Then, per kernel: a cooldown, warm-ups,
the first result checked against numpy, tries until the median is stable. Results go through the
telemetry core (metrics, result record) plus edge_results.json / .csv and a latency PNG per kernel.
A kernel whose output is wrong fails the run (exit 1) after everything else has been written.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from fleetbench.config.schema import EDGE_KERNELS, EdgeConfig, FleetbenchConfig
from fleetbench.edge import gpu, kernels, paths, report, spirv, timing
from fleetbench.edge.kernels import Problem
from fleetbench.edge.native import optional_module
from fleetbench.edge.pte import LoadedProgram, ModelTiming
from fleetbench.errors import UserError
from fleetbench.results.record import ResultRecord
from fleetbench.runinfo import host_name, new_run_id
from fleetbench.telemetry.recorder import RunIdentity
from fleetbench.telemetry.session import BenchmarkRun

BENCHMARK = "edge"

# A few seconds on lavapipe: `fleetbench edge run --quick` and the demo stage. Every kernel but the
# slow workgroup-memory GEMM and the GLSL copy of the peak probe (gemm_vec4_spirv shows the SPIR-V path).
QUICK_LEAVES_OUT = ("gemm_tiled", "peak_fma_spirv")
QUICK: dict[str, Any] = {
    "kernels": [k for k in EDGE_KERNELS if k not in QUICK_LEAVES_OUT],
    "dtypes": ["float32"],
    "gemm_sizes": [256],
    "rows": 256,
    "cols": 512,
    "silu_elements": 1 << 18,
    "copy_mib": 8,
    "peak_workgroups": 16,
    "peak_iterations": 256,
    "warmup": 1,
    "try_time_s": 0.03,
    "min_iterations": 3,
    "max_iterations": 50,
    "min_tries": 2,
    "max_tries": 3,
    "cooldown_s": 0.0,
    "mps": False,
}


def quick(cfg: EdgeConfig) -> EdgeConfig:
    """The quick set, except for what the user set explicitly (config file, --set, flags).

    The quick values stay defaults, not user choices: a quick kernel this machine cannot run (no glslc,
    no subgroups) is skipped with a note, as from the full default set, instead of refused.
    """
    values = {**dict(cfg), **{k: v for k, v in QUICK.items() if k not in cfg.model_fields_set}}
    return EdgeConfig.model_construct(_fields_set=set(cfg.model_fields_set), **values)


@dataclass
class Compiled:
    problem: Problem
    pipeline: Any
    source: str  # the file it came from (relative to the kernels folder), or the SPIR-V path


@dataclass
class EdgePlan:
    cfg: EdgeConfig
    adapter: gpu.AdapterReport | None
    device: Any
    timing: str
    period_ns: float
    compiled: list[Compiled]
    notes: list[str] = field(default_factory=list)
    spirv_files: list[str] = field(default_factory=list)
    program: LoadedProgram | None = None


def apply_cpu_affinity(cpus: list[int] | None) -> list[int] | None:
    if cpus is None:
        return None
    if not hasattr(os, "sched_setaffinity"):
        raise UserError(f"edge.cpu_affinity is supported on Linux only, not on {sys.platform}; accepted: unset")
    count = os.cpu_count() or 1
    missing = [c for c in cpus if c >= count]
    if missing:
        raise UserError(f"edge.cpu_affinity: CPU {missing[0]} does not exist; accepted: CPUs 0-{count - 1}")
    try:
        os.sched_setaffinity(0, set(cpus))
    except OSError as exc:
        raise UserError(f"edge.cpu_affinity={cpus}: {exc.strerror}; accepted: CPUs this process may use") from None
    return sorted(os.sched_getaffinity(0))


def _dtypes(cfg: EdgeConfig, rep: gpu.AdapterReport, notes: list[str]) -> list[str]:
    has_f16 = rep.has("shader-f16")
    if cfg.dtypes is None:
        if not has_f16:
            notes.append(f"float16 skipped: {rep.device} does not offer shader-f16")
        return ["float32", "float16"] if has_f16 else ["float32"]
    if "float16" in cfg.dtypes and not has_f16:
        raise UserError(f"edge.dtypes includes float16 but {rep.device} lacks shader-f16; accepted: [float32]")
    return list(cfg.dtypes)


def _timing(cfg: EdgeConfig, rep: gpu.AdapterReport) -> str:
    has_ts = rep.has("timestamp-query")
    if cfg.timing == "auto":
        return "timestamp" if has_ts else "wallclock"
    if cfg.timing == "timestamp" and not has_ts:
        raise UserError(f"edge.timing=timestamp but {rep.device} lacks timestamp-query; accepted: wallclock, auto")
    return cfg.timing


def _with_features(cfg: EdgeConfig, rep: gpu.AdapterReport, wanted: list[str], notes: list[str]) -> list[str]:
    """Drop kernels whose adapter features are missing: with a note, or an error if they were asked for."""
    kept = []
    for name in wanted:
        missing = kernels.KERNELS[name].missing_features(rep.features)
        if not missing:
            kept.append(name)
        elif "kernels" in cfg.model_fields_set:
            others = ", ".join(k for k in wanted if k != name) or "kernels without adapter features"
            raise UserError(
                f"edge kernel {name} needs the {missing[0]!r} feature, which {rep.device} lacks; accepted: {others}"
            )
        else:
            notes.append(f"{name} skipped: {rep.device} does not offer {', '.join(missing)}")
    return kept


def _too_narrow(cfg: EdgeConfig, rep: gpu.AdapterReport, wanted: list[str], notes: list[str]) -> set[str]:
    """Kernels that need wider subgroups than the measured size: a note, or an error if they were asked for."""
    narrow = set()
    for name in wanted:
        need = kernels.MIN_SUBGROUP_SIZE.get(name)
        if need is None or rep.subgroup_size is None or rep.subgroup_size >= need:
            continue
        message = f"{name} needs subgroups of at least {need} invocations; {rep.device} runs {rep.subgroup_size}"
        if "kernels" in cfg.model_fields_set:
            raise UserError(f"{message}; accepted: gemm_vec4 or gemm_tiled instead")
        notes.append(f"{name} skipped: {message}")
        narrow.add(name)
    return narrow


def _compile(device: Any, code: str | bytes, entry_point: str, what: str, adapter: str) -> Any:
    try:
        module = device.create_shader_module(code=code)
        return device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": entry_point})
    except Exception as exc:  # wgpu's GPUValidationError and friends
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise UserError(f"{what}: shader did not compile on {adapter}: {first}") from None


def plan_edge(cfg: EdgeConfig, console: Console) -> EdgePlan:
    """Choose, check and compile everything; raises UserError before anything is written."""
    from fleetbench.edge import pte

    apply_cpu_affinity(cfg.cpu_affinity)
    program = pte.load(cfg.pte) if cfg.pte is not None else None
    if program is not None:
        pte.reference_model(program, cfg.module, cfg.seed)  # refuse a mismatched --module before the run
    if not cfg.kernels:
        if program is None and not cfg.mps:
            raise UserError("nothing to run: edge.kernels is empty, no --pte and edge.mps=false")
        return EdgePlan(cfg, None, None, "wallclock", 1.0, [], program=program)
    adapter = gpu.select_adapter(cfg.backend, cfg.adapter, cfg.power_preference)
    rep = gpu.report(adapter)
    notes: list[str] = []
    dtypes = _dtypes(cfg, rep, notes)
    timing_kind = _timing(cfg, rep)
    wanted: list[str] = list(cfg.kernels)
    if any(kernels.KERNELS[k].lang == "glsl" for k in wanted) and spirv.glslc() is None:
        if "kernels" in cfg.model_fields_set:
            raise UserError(spirv.MISSING_GLSLC)
        wanted = [k for k in wanted if kernels.KERNELS[k].lang != "glsl"]
        notes.append("SPIR-V kernels skipped: glslc not found (Debian package glslc)")
    wanted = _with_features(cfg, rep, wanted, notes)
    problems = kernels.build_problems(cfg, wanted, dtypes, rep.limits)
    for problem in problems:
        kernels.check_limits(problem, rep.limits, rep.device)
    features = (
        (["shader-f16"] if "float16" in dtypes else [])
        + (["timestamp-query"] if timing_kind == "timestamp" else [])
        + sorted({f for name in wanted for f in kernels.KERNELS[name].features})
    )
    device = gpu.open_device(adapter, features)
    if "subgroup" in features:
        rep.subgroup_size = gpu.measure_subgroup_size(device)
        narrow = _too_narrow(cfg, rep, wanted, notes)
        problems = [p for p in problems if p.spec.name not in narrow]
    period = gpu.timestamp_period_ns(device) if timing_kind == "timestamp" else 1.0
    kdir = paths.kernels_dir()
    spirv_dir = cfg.spirv_dir or paths.default_spirv_dir()
    cache: dict[tuple[str, str], tuple[Any, str]] = {}
    compiled: list[Compiled] = []
    spirv_files: list[str] = []
    for problem in problems:
        spec = problem.spec
        key = (spec.name, problem.dtype)
        if key not in cache:
            source = kernels.source_path(kdir, spec)
            if spec.lang == "wgsl":
                code: str | bytes = kernels.wgsl_source(kdir, spec, problem.dtype)
                origin = spec.source
            else:
                built = spirv.build(source, problem.dtype, spirv_dir)
                code = built.read_bytes()
                origin = str(built)
                spirv_files.append(origin)
            what = f"{spec.source}:{spec.entry_point} ({problem.dtype})"
            cache[key] = (_compile(device, code, spec.entry_point, what, rep.device), origin)
        pipeline, origin = cache[key]
        compiled.append(Compiled(problem, pipeline, origin))
    return EdgePlan(cfg, rep, device, timing_kind, period, compiled, notes, spirv_files, program)


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


def run_problem(plan: EdgePlan, item: Compiled, on_try: Any = None) -> report.KernelRow:
    cfg, problem = plan.cfg, item.problem
    with bound(plan, item) as (timer, output):
        warm = [timer.run_once() for _ in range(cfg.warmup)]
        max_abs, max_rel, correct = kernels.compare(problem, plan.device.queue.read_buffer(output))
        row = report.KernelRow(
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
        if not correct:
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
    row.p50_s, row.p90_s, row.p99_s = (measured.percentile(q) for _n, q in report.PERCENTILES)
    row.mean_s = sum(samples) / len(samples)
    row.min_s = min(samples)
    row.variation = measured.variation
    row.stable = measured.stable
    row.tries = len(measured.tries)
    row.dispatches = len(samples)
    row.flop_per_second = problem.flops / row.p50_s if problem.flops else 0.0
    row.bytes_per_second = problem.bytes_moved / row.p50_s
    return row


def record_kernel(run: BenchmarkRun, row: report.KernelRow) -> None:
    ident = {"kernel": row.kernel, "dtype": row.dtype, "size": row.size}
    run.metrics.set("fleetbench_edge_kernel_max_abs_error", row.max_abs_error, **ident)
    run.metrics.set("fleetbench_edge_kernel_max_rel_error", row.max_rel_error, **ident)
    run.metrics.set("fleetbench_edge_kernel_correct", 1 if row.correct else 0, **ident)
    if not row.latencies_s:
        return
    timed = {**ident, "timing": row.timing}
    for value in row.latencies_s:
        run.metrics.observe("fleetbench_edge_kernel_latency_seconds", value, **timed)
    for name, _q in report.PERCENTILES:
        run.metrics.set(
            "fleetbench_edge_kernel_latency_percentile_seconds", getattr(row, f"{name}_s"), percentile=name, **timed
        )
    if row.flops:
        run.metrics.set("fleetbench_edge_kernel_achieved_flop_per_second", row.flop_per_second, **timed)
    run.metrics.set("fleetbench_edge_kernel_achieved_bytes_per_second", row.bytes_per_second, **timed)
    run.metrics.set("fleetbench_edge_kernel_variation_ratio", row.variation, **timed)
    run.metrics.inc("fleetbench_edge_kernel_tries_total", row.tries, **timed)
    run.metrics.inc("fleetbench_edge_kernel_dispatches_total", row.dispatches, **timed)


def peak_ratios(rows: list[report.KernelRow]) -> dict[str, float]:
    """GEMM FLOP/s over the best float32 FMA-peak FLOP/s measured in this run.

    Every GEMM kernel multiplies and accumulates in f32 whatever its storage dtype (f16 only halves
    the bytes it loads), so its FLOPs are f32 FMAs and the f32 probe is their ceiling. Against the
    f16 probe, a float16 GEMM on an adapter without fast f16 (lavapipe converts every f16 FMA) read
    195 % of "peak".
    """
    peak = max(
        (r.flop_per_second for r in rows if r.kernel.startswith("peak_fma") and r.dtype == "float32" and r.latencies_s),
        default=0.0,
    )
    out = {}
    for r in rows:
        if r.kernel.startswith("gemm") and r.latencies_s and peak:
            r.peak_ratio = r.flop_per_second / peak
            out[f"{r.kernel} {r.dtype} {r.size}"] = r.peak_ratio
    return out


def record_model(run: BenchmarkRun, t: ModelTiming, trim_ratio: float) -> dict[str, Any]:
    summary = report.model_summary(t, trim_ratio)
    labels = {"runtime": t.runtime, "model": t.model}
    run.metrics.set("fleetbench_edge_model_load_seconds", t.load_s, **labels)
    for value in t.latencies:
        run.metrics.observe("fleetbench_edge_model_latency_seconds", value, **labels)
    run.metrics.set("fleetbench_edge_model_latency_mean_seconds", summary["mean_s"], **labels)
    run.metrics.set("fleetbench_edge_model_latency_trimmed_mean_seconds", summary["trimmed_mean_s"], **labels)
    for name, _q in report.PERCENTILES:
        run.metrics.set(
            "fleetbench_edge_model_latency_percentile_seconds", summary[f"{name}_s"], percentile=name, **labels
        )
    if t.max_abs_error is not None:
        run.metrics.set("fleetbench_edge_model_max_abs_error", t.max_abs_error, **labels)
    for kind, value in t.memory.items():
        run.metrics.set("fleetbench_edge_model_memory_bytes", value, model=t.model, kind=kind)
    return summary


def _identity(config: FleetbenchConfig, plan: EdgePlan) -> RunIdentity:
    if plan.adapter is not None:
        device, backend = plan.adapter.device, plan.adapter.backend
    else:  # an ExecuTorch program only: it runs on this CPU
        from fleetbench.devices import cpu_model_name

        device, backend = cpu_model_name(), "cpu"
    return RunIdentity(BENCHMARK, config.run.run_id or new_run_id(), host_name(), device, backend, 0)


def run_edge(config: FleetbenchConfig, console: Console) -> ResultRecord:
    cfg = config.edge
    plan = plan_edge(cfg, console)
    identity = _identity(config, plan)
    rows: list[report.KernelRow] = []
    models: list[dict[str, Any]] = []
    failures: list[str] = []
    with BenchmarkRun(
        identity, config.run.results_dir, config.telemetry, config=cfg.model_dump(mode="json"), console=console
    ) as run:
        if plan.adapter is not None:
            rep = plan.adapter
            console.print(
                f"adapter [bold]{rep.device}[/] ({rep.backend}, {rep.adapter_type}, driver {rep.driver}); "
                f"timing: {plan.timing}"
                + (
                    " (GPU timestamp queries)"
                    if plan.timing == "timestamp"
                    else " (host clock around a synchronised submit)"
                )
            )
            coop = ", ".join(
                f"{ext} {'unknown' if v is None else _yes(v)}" for ext, v in rep.cooperative_matrix.items()
            )
            console.print(
                "features: "
                + ", ".join(f"{f} {_yes(rep.has(f))}" for f in ("shader-f16", "subgroup", "timestamp-query"))
                + (f" (subgroup size {rep.subgroup_size})" if rep.subgroup_size else "")
                + (f"; {coop}" if coop else "")
            )
            run.metrics.set(
                "fleetbench_edge_adapter_info",
                1,
                vendor=rep.vendor,
                adapter_type=rep.adapter_type,
                driver=rep.driver,
                shader_f16=_yes(rep.has("shader-f16")),
                timestamp_query=_yes(rep.has("timestamp-query")),
                subgroups=_yes(rep.has("subgroup")),
                cooperative_matrix=rep.cooperative_matrix_label,
            )
        for note in plan.notes:
            console.print(f"[yellow]{note}[/]")
        rows = run_kernels(plan, run, console)
        failures += [
            f"{r.kernel} {r.dtype} {r.size} (max rel error {r.max_rel_error:.2e} > {r.tolerance:g})"
            for r in rows
            if not r.correct
        ]
        ratios = peak_ratios(rows)
        for r in rows:
            if r.peak_ratio is not None:
                run.metrics.set(
                    "fleetbench_edge_gemm_peak_ratio", r.peak_ratio, kernel=r.kernel, dtype=r.dtype, size=r.size
                )
        mps_summary = run_mps_path(cfg, run, console, models)
        if plan.program is not None:
            from fleetbench.edge import pte

            console.print(
                f"ExecuTorch program {plan.program.path} ({cfg.pte_warmup} warm-ups, "
                f"{cfg.pte_iterations} iterations) ..."
            )
            et, eager = pte.run_program(
                plan.program, cfg.module, cfg.seed, cfg.pte_warmup, cfg.pte_iterations, cfg.model_tolerance
            )
            for t in (et, eager):
                if t is not None:
                    models.append(record_model(run, t, cfg.trim_ratio))
                    if t.agrees is False:
                        failures.append(
                            f"{t.runtime} {t.model} disagrees with eager PyTorch "
                            f"(max rel error {t.max_rel_error:.2e} > {cfg.model_tolerance:g})"
                        )
            if et.note:
                console.print(f"[yellow]{et.note}[/]")
        run.summary.update(
            {
                "adapter": _adapter_summary(plan.adapter),
                "timing": plan.timing,
                "timestamp_period_ns": plan.period_ns if plan.timing == "timestamp" else None,
                "kernels": [r.summary() for r in rows],
                "gemm_peak_ratio": ratios,
                "notes": plan.notes,
                "spirv_files": plan.spirv_files,
                "mps": mps_summary,
                "models": models,
                "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                "failures": failures,
            }
        )
        write_outputs(run, plan, rows, models, ratios, identity.device)
        if rows:
            report.show(
                console,
                report.kernel_table(
                    rows,
                    f"edge kernels on {identity.device} ({identity.backend}, {plan.timing} timing; "
                    "var = CV of the tries' medians, ! = not stable)",
                ),
            )
        if ratios:
            console.print("GEMM / f32 FMA peak: " + ", ".join(f"{k} {v:.1%}" for k, v in ratios.items()))
        if models:
            report.show(console, report.model_table(models))
        if failures:
            raise UserError("wrong results: " + "; ".join(failures), exit_code=1)
    assert run.record is not None
    return run.record


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _adapter_summary(rep: gpu.AdapterReport | None) -> dict[str, Any] | None:
    if rep is None:
        return None
    data = rep.as_dict()
    data.pop("vulkan_extensions")  # long; the full list is in edge_results.json
    return data


def run_kernels(plan: EdgePlan, run: BenchmarkRun, console: Console) -> list[report.KernelRow]:
    rows: list[report.KernelRow] = []
    if not plan.compiled:
        return rows
    with Progress(
        TextColumn("[bold]edge[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("", total=len(plan.compiled))
        for item in plan.compiled:
            label = item.problem.label
            if plan.cfg.cooldown_s > 0:
                progress.update(task, description=f"{label}: cooldown")
                time.sleep(plan.cfg.cooldown_s)
            progress.update(task, description=f"{label}: warm-up and check")
            row = run_problem(
                plan, item, on_try=lambda n, label=label: progress.update(task, description=f"{label}: try {n}")
            )
            rows.append(row)
            record_kernel(run, row)
            run.step_done()
            progress.advance(task)
    return rows


def run_mps_path(cfg: EdgeConfig, run: BenchmarkRun, console: Console, models: list[dict[str, Any]]) -> dict[str, Any]:
    if not cfg.mps:
        return {"skipped": "edge.mps=false"}
    from fleetbench.edge import mps

    if not mps.mps_available():
        console.print(f"[yellow]mps: {mps.SKIP_REASON}; skipped[/]")
        return {"skipped": mps.SKIP_REASON}
    from fleetbench.edge.model_factory import build

    built = build(cfg.module, cfg.seed, cfg.model_batch)
    console.print(f"mps: {built.name} forward, {cfg.pte_warmup} warm-ups, {cfg.pte_iterations} iterations ...")
    timing_result = mps.run_mps(built, cfg.pte_warmup, cfg.pte_iterations, cfg.model_tolerance)
    summary = record_model(run, timing_result, cfg.trim_ratio)
    models.append(summary)
    return summary


def write_outputs(
    run: BenchmarkRun,
    plan: EdgePlan,
    rows: list[report.KernelRow],
    models: list[dict[str, Any]],
    ratios: dict[str, float],
    device: str,
) -> None:
    json_path = run.run_dir / "edge_results.json"
    report.write_json(
        json_path,
        {
            "run_id": run.identity.run_id,
            "adapter": plan.adapter.as_dict() if plan.adapter else None,
            "timing": plan.timing,
            "kernels": [{**r.summary(), "latencies_s": r.latencies_s} for r in rows],
            "gemm_peak_ratio": ratios,
            "models": models,
            "notes": plan.notes,
        },
    )
    run.add_artifact(json_path)
    if rows:
        csv_path = run.run_dir / "edge_results.csv"
        report.write_csv(csv_path, rows)
        run.add_artifact(csv_path)
    if plan.cfg.plot and rows:
        for path in report.write_latency_plots(run.run_dir, rows, device):
            run.add_artifact(path)


def run_edge_stage(config: FleetbenchConfig, console: Console) -> ResultRecord:
    """The demo's edge stage: the quick set (fp32, small sizes) on this machine's adapter; seconds on lavapipe."""
    return run_edge(config.model_copy(update={"edge": quick(config.edge)}), console)
