"""What `edge run` will run, checked before anything is written: adapter, dtypes, timing, kernels.

Everything that can be refused is checked here, before the run folder exists: the backend and
adapter, float16 and timestamp support, every problem against the adapter's limits, shader
compilation (WGSL, and SPIR-V built by glslc), the .pte file. `quick()` is the small set of the
demo and `--quick`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

from fleetbench.config.schema import EDGE_KERNELS, EdgeConfig
from fleetbench.edge import coopmat, gpu, kernels, paths, spirv
from fleetbench.edge.kernels import Problem
from fleetbench.edge.pte import LoadedProgram
from fleetbench.errors import UserError

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
    "peak_dispatch_s": 0.01,
    "warmup": 1,
    "try_time_s": 0.03,
    "min_iterations": 3,
    "max_iterations": 50,
    "min_tries": 2,
    "max_tries": 3,
    "cooldown_s": 0.0,
    "cooldown_timeout_s": 5.0,
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
    """A problem with its compiled pipeline and where its shader came from."""

    problem: Problem
    pipeline: Any
    source: str  # the file it came from (relative to the kernels folder), or the SPIR-V path


@dataclass
class EdgePlan:
    """Everything `edge run` needs, checked: adapter and device, timing, compiled problems, notes, the program."""

    cfg: EdgeConfig
    adapter: gpu.AdapterReport | None
    device: Any
    timing: str
    period_ns: float
    compiled: list[Compiled]
    notes: list[str] = field(default_factory=list)
    spirv_files: list[str] = field(default_factory=list)
    program: LoadedProgram | None = None
    coopmat: coopmat.CoopPlan | None = None  # gemm_coopmat, through the raw Vulkan path

    def runs_on(self) -> tuple[str, str]:
        """The `device` and `backend` labels: the adapter and its API; an ExecuTorch program alone runs on this CPU."""
        if self.adapter is not None:
            return self.adapter.device, self.adapter.backend
        from fleetbench.devices import cpu_model_name

        return cpu_model_name(), "cpu"


def apply_cpu_affinity(cpus: list[int] | None) -> list[int] | None:
    """Pin this process to `cpus` (Linux); returns the CPUs now allowed, or None when unset."""
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


def check_thermal_root(cfg: EdgeConfig) -> None:
    """A thermal root that is not a folder is a mistake, not an absent sensor: refuse it before the run."""
    if cfg.thermal_sources and not cfg.thermal_root.is_dir():
        raise UserError(
            f"edge.thermal_root={cfg.thermal_root}: not a folder; accepted: a folder holding sys/class/thermal "
            "or sys/class/hwmon (default /)"
        )


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


def plan_edge(cfg: EdgeConfig) -> EdgePlan:
    """Choose, check and compile everything; raises UserError before anything is written.

    What was skipped is in the plan's notes.
    """
    from fleetbench.edge import pte

    apply_cpu_affinity(cfg.cpu_affinity)
    check_thermal_root(cfg)
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
    wanted = _with_features(cfg, rep, _without_glsl(cfg, notes), notes)
    problems = kernels.build_problems(cfg, wanted, dtypes, rep.limits)
    for problem in problems:
        kernels.check_limits(problem, rep.limits, rep.device)
    features = _device_features(dtypes, timing_kind, wanted)
    device = gpu.open_device(adapter, features)
    if "subgroup" in features:
        rep.subgroup_size = gpu.measure_subgroup_size(device)
        narrow = _too_narrow(cfg, rep, wanted, notes)
        problems = [p for p in problems if p.spec.name not in narrow]
    period = gpu.timestamp_period_ns(device) if timing_kind == "timestamp" else 1.0
    compiled, spirv_files = _compile_all(device, problems, cfg, rep.device)
    coop = _coopmat(cfg, rep, notes)
    if coop is not None and coop.spirv:
        spirv_files.append(coop.spirv)
    return EdgePlan(cfg, rep, device, timing_kind, period, compiled, notes, spirv_files, program, coop)


def _coopmat(cfg: EdgeConfig, rep: gpu.AdapterReport, notes: list[str]) -> coopmat.CoopPlan | None:
    """gemm_coopmat's plan where it was asked for: compiled and validated always, skipped with the reason
    where the adapter cannot run it (asked for by name too: the kernel exists to say so)."""
    if coopmat.NAME not in cfg.kernels:
        return None
    coop = coopmat.prepare(cfg, (rep.vendor_id, rep.device_id, rep.device), rep.backend)
    if coop.skipped:
        notes.append(f"{coopmat.NAME} skipped: {coop.skipped}")
    return coop


def _without_glsl(cfg: EdgeConfig, notes: list[str]) -> list[str]:
    """The kernels asked for, less the GLSL ones when glslc is missing: a note, or an error if they were asked for."""
    wanted: list[str] = [k for k in cfg.kernels if k != coopmat.NAME]  # not a wgpu kernel: see _coopmat
    if any(kernels.KERNELS[k].lang == "glsl" for k in wanted) and spirv.glslc() is None:
        if "kernels" in cfg.model_fields_set:
            raise UserError(spirv.MISSING_GLSLC)
        wanted = [k for k in wanted if kernels.KERNELS[k].lang != "glsl"]
        notes.append("SPIR-V kernels skipped: glslc not found (Debian package glslc)")
    return wanted


def _device_features(dtypes: list[str], timing_kind: str, wanted: list[str]) -> list[str]:
    """The wgpu features to open the device with: f16 and timestamps when used, and what the kernels need."""
    return (
        (["shader-f16"] if "float16" in dtypes else [])
        + (["timestamp-query"] if timing_kind == "timestamp" else [])
        + sorted({f for name in wanted for f in kernels.KERNELS[name].features})
    )


def _compile_all(
    device: Any, problems: list[Problem], cfg: EdgeConfig, adapter: str
) -> tuple[list[Compiled], list[str]]:
    """A pipeline per problem, compiled once per (kernel, dtype); also the SPIR-V files glslc built or reused."""
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
            cache[key] = (_compile(device, code, spec.entry_point, what, adapter), origin)
        pipeline, origin = cache[key]
        compiled.append(Compiled(problem, pipeline, origin))
    return compiled, spirv_files
