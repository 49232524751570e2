"""The edge kernel set: sources, inputs, dispatch geometry, work counts, numpy references, limit checks.

Every kernel reads a uniform `Params` at binding 0, its inputs at bindings 1..n and writes its output
at the last binding (see mobile/kernels/*.wgsl); a kernel with `texture_inputs` reads its (matrix)
inputs from read-only storage textures of 4-value texels instead. WGSL sources get a prelude that fixes
the storage type (`alias T = f32;` or `enable f16; alias T = f16;`) and have their `//! unroll` lines
expanded (see `expand_unrolls`); `wgsl_source` does both. GLSL sources are compiled by glslc, with
-DFLEETBENCH_F16 for float16. References are computed in float64 from the very inputs the GPU saw
(after rounding to the storage type); the error reported is the largest absolute difference and that
difference over the largest reference magnitude (a normwise relative error).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from fleetbench.errors import UserError

if TYPE_CHECKING:
    import numpy as np

    from fleetbench.config.schema import EdgeConfig

Lang = Literal["wgsl", "glsl"]
FLOAT_DTYPES = ("float32", "float16")


@dataclass(frozen=True)
class KernelSpec:
    """One kernel of the set: operation, source file and language, workgroup shape and what it needs."""

    name: str
    op: Literal["gemm", "softmax", "rmsnorm", "silu", "peak", "copy"]
    source: str  # relative to the kernels folder
    lang: Lang
    workgroup: tuple[int, int]
    workgroup_storage_bytes: int
    about: str
    features: tuple[str, ...] = ()  # adapter features the kernel needs beyond core WebGPU
    entry_point: str = "main"  # WGSL modules may hold several (the peak probe's chain counts)
    texture_inputs: bool = False  # inputs bound as read-only storage textures (`InTex`), not buffers

    def missing_features(self, offered: Collection[str]) -> list[str]:
        """The adapter features this kernel needs that `offered` (an adapter's feature list) lacks."""
        return [f for f in self.features if f not in offered]

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The storage dtypes it runs at: u32 for the copy, float32 and float16 otherwise."""
        return ("u32",) if self.op == "copy" else FLOAT_DTYPES


KERNELS: dict[str, KernelSpec] = {
    spec.name: spec
    for spec in (
        KernelSpec(
            "gemm_tiled",
            "gemm",
            "gemm_tiled.wgsl",
            "wgsl",
            (16, 16),
            8192,
            "GEMM, 64x64 workgroup tiles staged in workgroup memory, 4x4 per invocation",
        ),
        KernelSpec(
            "gemm_vec4",
            "gemm",
            "gemm_vec4.wgsl",
            "wgsl",
            (16, 8),
            0,
            "GEMM, register-blocked 16x8 per invocation, vec4 loads, no workgroup memory",
        ),
        KernelSpec(
            "gemm_subgroup",
            "gemm",
            "gemm_subgroup.wgsl",
            "wgsl",
            (16, 1),
            0,
            "GEMM, 64x8 per invocation, A shared through subgroup broadcasts, 64-bit loads (tuned for CPU adapters)",
            features=("subgroup", "shader-int64"),
        ),
        KernelSpec(
            "gemm_texture",
            "gemm",
            "gemm_texture.wgsl",
            "wgsl",
            (16, 1),
            0,
            "GEMM, A and B read from storage textures, 64x8 per invocation, A shared through subgroup broadcasts",
            features=("subgroup",),
            texture_inputs=True,
        ),
        KernelSpec(
            "gemm_vec4_spirv",
            "gemm",
            "glsl/gemm_vec4.comp",
            "glsl",
            (16, 8),
            0,
            "the register-blocked GEMM in GLSL, compiled to SPIR-V by glslc",
        ),
        KernelSpec(
            "softmax",
            "softmax",
            "softmax.wgsl",
            "wgsl",
            (64, 1),
            256,
            "row-wise softmax, one workgroup per row, tree reductions",
        ),
        KernelSpec(
            "rmsnorm",
            "rmsnorm",
            "rmsnorm.wgsl",
            "wgsl",
            (64, 1),
            256,
            "RMSNorm over rows with a weight vector, one workgroup per row",
        ),
        KernelSpec("silu", "silu", "silu.wgsl", "wgsl", (256, 1), 0, "SiLU elementwise, vec4"),
        KernelSpec(
            "peak_fma",
            "peak",
            "peak_fma.wgsl",
            "wgsl",
            (256, 1),
            0,
            "peak FLOP/s: 3 independent vec4 FMA chains per invocation, 16 deep (vkpeak style)",
        ),
        KernelSpec(
            "peak_fma_2chain",
            "peak",
            "peak_fma.wgsl",
            "wgsl",
            (256, 1),
            0,
            "the FMA peak probe with 2 chains per invocation (fastest where a compiler spills 3)",
            entry_point="two_chains",
        ),
        KernelSpec(
            "peak_fma_4chain",
            "peak",
            "peak_fma.wgsl",
            "wgsl",
            (256, 1),
            0,
            "the FMA peak probe with 4 chains per invocation (more independent work per invocation)",
            entry_point="four_chains",
        ),
        KernelSpec(
            "peak_fma_spirv",
            "peak",
            "glsl/peak_fma.comp",
            "glsl",
            (256, 1),
            0,
            "the FMA peak probe in GLSL, compiled to SPIR-V by glslc",
        ),
        KernelSpec("copy", "copy", "copy.wgsl", "wgsl", (256, 1), 0, "copy bandwidth, 16 bytes per load/store"),
    )
}

# The C tile of one workgroup, (columns, rows): sizes are multiples of 128, so every tile divides them.
GEMM_TILE = {
    "gemm_tiled": (64, 64),
    "gemm_vec4": (128, 128),
    "gemm_vec4_spirv": (128, 128),
    "gemm_subgroup": (128, 64),
    "gemm_texture": (128, 64),
}
# The subgroup GEMMs broadcast rows from lanes 0-7 of each subgroup: narrower subgroups cannot run them.
MIN_SUBGROUP_SIZE = {"gemm_subgroup": 8, "gemm_texture": 8}
# Texel formats of `texture_inputs` kernels: 4 values of the storage type per texel.
TEXTURE_FORMAT = {"float32": "rgba32float", "float16": "rgba16float"}
# vec4 chains x 4 per invocation of each peak probe; the fastest f32 probe of a run is the adapter's peak.
PEAK_LANES = {"peak_fma": 12, "peak_fma_spirv": 12, "peak_fma_2chain": 8, "peak_fma_4chain": 16}
TOLERANCE = {"float32": 1e-4, "float16": 2e-3}  # normwise relative; copy and peak must be exact


# Wide loads for kernels that declare `shader-int64`: 64-bit words that carry 4 (Wide4) or 8 (Wide8)
# values of T, unpacked to f32. CPU adapters build every storage load as a loop over the SIMD lanes,
# whose cost is per load, not per byte (mobile/README.md has what that saves on lavapipe).
_WIDE_F32 = """alias Wide4 = vec2<u64>;
alias Wide8 = vec4<u64>;
fn lo32(x: u64) -> f32 { return bitcast<f32>(u32(x)); }
fn hi32(x: u64) -> f32 { return bitcast<f32>(u32(x >> 32u)); }
fn wide4(w: Wide4) -> vec4<f32> { return vec4<f32>(lo32(w.x), hi32(w.x), lo32(w.y), hi32(w.y)); }
fn wide8_lo(w: Wide8) -> vec4<f32> { return wide4(w.xy); }
fn wide8_hi(w: Wide8) -> vec4<f32> { return wide4(w.zw); }
"""
_WIDE_F16 = """alias Wide4 = u64;
alias Wide8 = vec2<u64>;
fn halves(x: u64) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(u32(x)), unpack2x16float(u32(x >> 32u)));
}
fn wide4(w: Wide4) -> vec4<f32> { return halves(w); }
fn wide8_lo(w: Wide8) -> vec4<f32> { return wide4(w.x); }
fn wide8_hi(w: Wide8) -> vec4<f32> { return wide4(w.y); }
"""


def wgsl_prelude(dtype: str, features: Collection[str] = (), texture_inputs: bool = False) -> str:
    """What the runner prepends to a WGSL kernel: the storage type T, the wide-load helpers for kernels
    that need `shader-int64` (naga refuses 64-bit types in a module without that feature), and the
    input texture type `InTex` for kernels with texture inputs."""
    wide = "shader-int64" in features
    textures = f"alias InTex = texture_storage_2d<{TEXTURE_FORMAT[dtype]}, read>;\n" if texture_inputs else ""
    if dtype == "float16":
        return "enable f16;\nalias T = f16;\n" + textures + (_WIDE_F16 if wide else "")
    return "alias T = f32;\n" + textures + (_WIDE_F32 if wide else "")


# Unroll directives. A WGSL line `//! unroll <name> in <start>..<stop>: <template>` stands for one copy of
# <template> per integer value of <name> from <start> up to (not including) <stop>, each on its own line at the
# directive's indentation. In the template, `{expr}` is replaced by the value of an integer expression over
# <name> (integers, + - * / %, parentheses; / rounds down), so `c{i} = step(c{i}, a{i / 8}, {i % 8}u);` at i = 9
# reads `c9 = step(c9, a1, 1u);`. Templates hold no other braces. The copies are straight-line code, not a
# loop, on purpose: llvmpipe does not unroll loops over constants, and the GEMMs' accumulators must be
# separate variables to stay out of scratch memory. Every other line of the file is kept byte for byte.
UNROLL_MARK = "//!"
_UNROLL = re.compile(r"unroll\s+([A-Za-z_]\w*)\s+in\s+(\d+)\s*\.\.\s*(\d+)\s*:\s*(\S.*?)\s*")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_UNROLL_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.floordiv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def expand_unrolls(text: str, origin: str) -> str:
    """`text` (a WGSL file's contents) with every `//! unroll` line replaced by its copies; `origin` names the
    file in errors. A line starting with `//!` that is not a well-formed directive is a UserError naming
    `origin` and the line number."""
    lines = text.split("\n")
    for index in reversed(range(len(lines))):
        body = lines[index].lstrip()
        if body.startswith(UNROLL_MARK):
            indent = lines[index][: len(lines[index]) - len(body)]
            copies = _unroll(body[len(UNROLL_MARK) :].strip(), f"{origin}:{index + 1}")
            lines[index : index + 1] = [indent + copy for copy in copies]
    return "\n".join(lines)


def _unroll(directive: str, where: str) -> list[str]:
    match = _UNROLL.fullmatch(directive)
    if match is None:
        raise UserError(
            f"{where}: bad unroll directive {directive!r}; expected `{UNROLL_MARK} unroll <name> in <start>..<stop>: "
            "<line with {expressions of name}>`"
        )
    name, start, stop, template = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
    if stop <= start:
        raise UserError(f"{where}: unroll range {start}..{stop} is empty; accepted: <start> < <stop>")
    return [_fill(template, name, value, where) for value in range(start, stop)]


def _fill(template: str, name: str, value: int, where: str) -> str:
    filled = _PLACEHOLDER.sub(lambda m: str(_evaluate(m.group(1), name, value, where)), template)
    if "{" in filled or "}" in filled:
        raise UserError(
            f"{where}: unbalanced brace in unroll template {template!r}; templates hold no braces but {{expr}}"
        )
    return filled


def _evaluate(expr: str, name: str, value: int, where: str) -> int:
    """An integer expression over `name` (at `value`): integers, + - * / % and parentheses only."""

    def walk(node: ast.expr) -> int:
        if isinstance(node, ast.Name) and node.id == name:
            return value
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _UNROLL_OPS:
            return _UNROLL_OPS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError

    try:
        return walk(ast.parse(expr.strip(), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError):
        raise UserError(
            f"{where}: cannot evaluate {{{expr}}} in unroll template; accepted: integers, {name}, + - * / % and "
            "parentheses (templates hold no braces but {expr})"
        ) from None


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a storage dtype name (float32, float16, u32)."""
    import numpy as np

    return np.dtype({"float32": np.float32, "float16": np.float16, "u32": np.uint32}[dtype])


@dataclass
class Problem:
    """One kernel at one dtype and size, with everything needed to run and check it."""

    spec: KernelSpec
    dtype: str
    size: str  # the `size` label
    params: bytes
    input_nbytes: list[int]  # known before any input is drawn, for the limit checks
    make_inputs: Callable[[], list[np.ndarray]]  # drawn on first use, dropped by release()
    output_nbytes: int
    output_dtype: str  # numpy name of the output's element type
    groups: tuple[int, int, int]
    flops: float  # per dispatch; 0 where FLOPs are not the point (memory-bound kernels)
    bytes_moved: float  # per dispatch, read plus written once
    reference: Callable[[], np.ndarray]
    tolerance: float  # 0: must be bit-exact
    accepted: str  # what sizes this adapter accepts, for limit errors
    texture_sizes: list[tuple[int, int]] = field(default_factory=list)  # (texels wide, rows) per input, if textures

    @property
    def label(self) -> str:
        """`kernel dtype size`, as progress lines and errors name a problem."""
        return f"{self.spec.name} {self.dtype} {self.size}"

    def buffer_sizes(self) -> list[int]:
        """The storage buffers' sizes: inputs (unless they are textures), then the output."""
        return [*([] if self.texture_sizes else self.input_nbytes), self.output_nbytes]

    def inputs(self) -> list[np.ndarray]:
        """The input arrays, drawn on first use and shared with the reference until `release`."""
        return self.make_inputs()

    def release(self) -> None:
        """Drop the host copies of inputs (and so the reference's) once the problem has run."""
        release = getattr(self.make_inputs, "release", None)
        if release is not None:
            release()


class Drawn:
    """Inputs drawn once, on first use; `release` frees them. The reference reads the very same arrays."""

    def __init__(self, factory: Callable[[], list[np.ndarray]]) -> None:
        self._factory = factory
        self._value: list[np.ndarray] | None = None

    def __call__(self) -> list[np.ndarray]:
        """The inputs, drawn by the factory the first time."""
        if self._value is None:
            self._value = self._factory()
        return self._value

    def release(self) -> None:
        """Forget the drawn inputs so that their memory can be freed."""
        self._value = None


def grid(count: int, max_per_dim: int) -> tuple[int, int, int]:
    """Workgroups as (x, y, 1); the kernels flatten y * num_workgroups.x + x and skip the excess."""
    x = min(count, max_per_dim)
    return (x, math.ceil(count / x), 1)


def _u32_params(*values: int | float) -> bytes:
    import numpy as np

    out = np.zeros(4, dtype=np.uint32)
    for i, value in enumerate(values):
        out[i] = np.array([value], dtype=np.float32).view(np.uint32)[0] if isinstance(value, float) else value
    return out.tobytes()


def max_abs_rel(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max abs error, normwise relative error) of `out` against the float64 reference `ref`; inf if not finite."""
    import numpy as np

    diff = np.abs(out.astype(np.float64) - ref)
    if not np.all(np.isfinite(out)):
        return math.inf, math.inf
    max_abs = float(diff.max()) if diff.size else 0.0
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    return max_abs, (max_abs / scale if scale > 0 else max_abs)


def compare(problem: Problem, raw: memoryview | bytes) -> tuple[float, float, bool]:
    """(max abs error, max rel error, correct) of the GPU's output bytes against the reference."""
    import numpy as np

    out = np.frombuffer(bytes(raw)[: problem.output_nbytes], dtype=problem.output_dtype)
    ref = problem.reference().reshape(-1)
    if out.size != ref.size:
        return math.inf, math.inf, False
    if problem.tolerance == 0:
        exact = bool(np.array_equal(out, ref.astype(out.dtype)) and np.array_equal(out.astype(np.float64), ref))
        max_abs, max_rel = max_abs_rel(out, ref.astype(np.float64))
        return max_abs, max_rel, exact
    max_abs, max_rel = max_abs_rel(out, ref)
    return max_abs, max_rel, max_rel <= problem.tolerance


def _gemm(spec: KernelSpec, dtype: str, n: int, seed: list[int], limits: dict[str, int]) -> Problem:
    import numpy as np

    np_dtype = numpy_dtype(dtype)

    def draw() -> list[np.ndarray]:
        rng = _rng(seed)
        return [rng.standard_normal((n, n), dtype=np.float32).astype(np_dtype) for _ in range(2)]

    drawn = Drawn(draw)

    def gemm_ref() -> np.ndarray:
        a, b = drawn()
        result: np.ndarray = a.astype(np.float64) @ b.astype(np.float64)
        return result

    tile_cols, tile_rows = GEMM_TILE[spec.name]
    binding = min(limits["max-storage-buffer-binding-size"], limits["max-buffer-size"])
    largest = math.isqrt(binding // np_dtype.itemsize) // 128 * 128
    if spec.texture_inputs:  # A and B are n rows of n / 4 texels each
        largest = min(largest, limits["max-texture-dimension-2d"] // 128 * 128)
    return Problem(
        spec=spec,
        dtype=dtype,
        size=str(n),
        params=_u32_params(n, n, n),
        input_nbytes=[n * n * np_dtype.itemsize] * 2,
        make_inputs=drawn,
        output_nbytes=n * n * np_dtype.itemsize,
        output_dtype=np_dtype.name,
        groups=(n // tile_cols, n // tile_rows, 1),
        flops=2.0 * n**3,
        bytes_moved=3.0 * n * n * np_dtype.itemsize,
        reference=gemm_ref,
        tolerance=TOLERANCE[dtype],
        accepted=f"edge.gemm_sizes multiples of 128 up to {largest} for {spec.name} {dtype} on this adapter",
        texture_sizes=[(n // 4, n)] * 2 if spec.texture_inputs else [],
    )


def _rows(spec: KernelSpec, dtype: str, rows: int, cols: int, seed: list[int], limits: dict[str, int]) -> Problem:
    import numpy as np

    np_dtype = numpy_dtype(dtype)
    nbytes = rows * cols * np_dtype.itemsize
    binding = min(limits["max-storage-buffer-binding-size"], limits["max-buffer-size"])
    accepted = f"edge.rows x edge.cols up to {binding // np_dtype.itemsize} elements for {dtype} on this adapter"
    groups = grid(rows, limits["max-compute-workgroups-per-dimension"])
    if spec.op == "softmax":
        drawn = Drawn(lambda: [(_rng(seed).standard_normal((rows, cols), dtype=np.float32) * 3).astype(np_dtype)])

        def softmax_ref() -> np.ndarray:
            x64 = drawn()[0].astype(np.float64)
            e = np.exp(x64 - x64.max(axis=1, keepdims=True))
            result: np.ndarray = e / e.sum(axis=1, keepdims=True)
            return result

        return Problem(
            spec,
            dtype,
            f"{rows}x{cols}",
            _u32_params(rows, cols),
            [nbytes],
            drawn,
            nbytes,
            np_dtype.name,
            groups,
            0.0,
            2.0 * nbytes,
            softmax_ref,
            TOLERANCE[dtype],
            accepted,
        )
    eps = 1e-6

    def draw() -> list[np.ndarray]:
        rng = _rng(seed)
        return [
            (rng.standard_normal((rows, cols), dtype=np.float32) * 3).astype(np_dtype),
            (1.0 + 0.1 * rng.standard_normal(cols, dtype=np.float32)).astype(np_dtype),
        ]

    drawn = Drawn(draw)

    def rmsnorm_ref() -> np.ndarray:
        x, w = drawn()
        x64 = x.astype(np.float64)
        result: np.ndarray = x64 / np.sqrt((x64**2).mean(axis=1, keepdims=True) + eps) * w.astype(np.float64)
        return result

    w_nbytes = cols * np_dtype.itemsize
    return Problem(
        spec,
        dtype,
        f"{rows}x{cols}",
        _u32_params(rows, cols, eps),
        [nbytes, w_nbytes],
        drawn,
        nbytes,
        np_dtype.name,
        groups,
        0.0,
        2.0 * nbytes + w_nbytes,
        rmsnorm_ref,
        TOLERANCE[dtype],
        accepted,
    )


def _silu(spec: KernelSpec, dtype: str, n: int, seed: list[int], limits: dict[str, int]) -> Problem:
    import numpy as np

    np_dtype = numpy_dtype(dtype)
    drawn = Drawn(lambda: [(_rng(seed).standard_normal(n, dtype=np.float32) * 4).astype(np_dtype)])
    nbytes = n * np_dtype.itemsize
    quads = n // 4
    binding = min(limits["max-storage-buffer-binding-size"], limits["max-buffer-size"])

    def silu_ref() -> np.ndarray:
        x64 = drawn()[0].astype(np.float64)
        result: np.ndarray = x64 / (1.0 + np.exp(-x64))
        return result

    return Problem(
        spec,
        dtype,
        _count_label(n),
        _u32_params(quads),
        [nbytes],
        drawn,
        nbytes,
        np_dtype.name,
        grid(math.ceil(quads / 256), limits["max-compute-workgroups-per-dimension"]),
        0.0,
        2.0 * nbytes,
        silu_ref,
        TOLERANCE[dtype],
        f"edge.silu_elements up to {binding // np_dtype.itemsize // 4 * 4} for {dtype} on this adapter",
    )


def _copy(spec: KernelSpec, mib: int, seed: list[int], limits: dict[str, int]) -> Problem:
    import numpy as np

    words = mib * (1 << 20) // 4
    drawn = Drawn(lambda: [_rng(seed).integers(0, 2**32, size=words, dtype=np.uint32)])
    quads = words // 4
    groups = (min(math.ceil(quads / 256), limits["max-compute-workgroups-per-dimension"]), 1, 1)
    binding = min(limits["max-storage-buffer-binding-size"], limits["max-buffer-size"])
    return Problem(
        spec,
        "u32",
        f"{mib}MiB",
        _u32_params(quads, groups[0] * 256),
        [words * 4],
        drawn,
        words * 4,
        "uint32",
        groups,
        0.0,
        8.0 * words,
        lambda: drawn()[0],
        0.0,
        f"edge.copy_mib up to {binding >> 20} on this adapter",
    )


# The checked dispatch adds b = 1 / iters to every lane iters times (a = 1): every value stays a multiple
# of 2^-10 below 2, exact in float16, so it can only run up to 1024 steps; it checks that every step ran.
PEAK_CHECK_MAX_ITERATIONS = 1024


def peak_problem(
    spec: KernelSpec, dtype: str, workgroups: int, iters: int, limits: dict[str, int], timed: bool = False
) -> Problem:
    """The FMA peak probe at `workgroups` x 256 invocations and `iters` steps per chain.

    Not `timed`: the count check (a = 1, b = 1 / iters, iters <= 1024): each lane ends at start + 1,
    exact, so a missing step shows. `timed`: the sized dispatch (a = -1, b = 1, x -> 1 - x), whose
    values stay exact at any even step count (each lane returns to its start), so the check does not
    cap the work (fleetbench.edge.peak_sizing grows it until a dispatch is long enough to time).
    """
    import numpy as np

    groups = grid(workgroups, limits["max-compute-workgroups-per-dimension"])
    invocations = groups[0] * groups[1] * 256
    lane_count = PEAK_LANES[spec.name]

    def peak_ref() -> np.ndarray:
        base = (np.arange(invocations, dtype=np.int64) * 7) % 256
        lanes = (base[:, None] + np.arange(lane_count)[None, :]) % 256
        end = 0.0 if timed else 1.0  # timed: an even number of x -> 1 - x; checked: start + iters * (1 / iters)
        result: np.ndarray = (lanes / 256.0 + end).sum(axis=1)
        return result

    params = _u32_params(iters, -1.0, 1.0) if timed else _u32_params(iters, 1.0, 1.0 / iters)
    return Problem(
        spec,
        dtype,
        "auto" if timed else f"{workgroups}wgx{iters}",
        params,
        [],
        list,
        invocations * 4,
        "float32",
        groups,
        float(invocations) * iters * lane_count * 2,
        invocations * 4.0,
        peak_ref,
        0.0,
        "edge.peak_workgroups that fit the adapter's workgroup grid",
    )


def _rng(seed: list[int]) -> np.random.Generator:
    import numpy as np

    return np.random.default_rng(seed)


def _count_label(n: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def build_problems(
    cfg: EdgeConfig, kernels: Sequence[str], dtypes: Sequence[str], limits: dict[str, int]
) -> list[Problem]:
    """Every (kernel, dtype, size) of the plan, in a stable order, with inputs drawn from edge.seed."""

    problems: list[Problem] = []
    for name in kernels:
        spec = KERNELS[name]
        for dtype in spec.dtypes if spec.op == "copy" else [d for d in FLOAT_DTYPES if d in dtypes]:
            seed = [cfg.seed, len(problems)]
            if spec.op == "gemm":
                problems.extend(_gemm(spec, dtype, n, seed, limits) for n in cfg.gemm_sizes)
            elif spec.op in ("softmax", "rmsnorm"):
                problems.append(_rows(spec, dtype, cfg.rows, cfg.cols, seed, limits))
            elif spec.op == "silu":
                problems.append(_silu(spec, dtype, cfg.silu_elements, seed, limits))
            elif spec.op == "peak":
                problems.append(peak_problem(spec, dtype, cfg.peak_workgroups, cfg.peak_iterations, limits))
            else:
                problems.append(_copy(spec, cfg.copy_mib, seed, limits))
    return problems


def check_limits(problem: Problem, limits: dict[str, int], adapter: str) -> None:
    """Refuse, in one line, a problem this adapter cannot run, before any buffer is allocated."""
    spec = problem.spec
    binding_limit = limits["max-storage-buffer-binding-size"]
    buffer_limit = limits["max-buffer-size"]
    texture_limit = limits["max-texture-dimension-2d"]
    for width, height in problem.texture_sizes:
        if max(width, height) > texture_limit:
            raise UserError(
                f"{problem.label}: needs a {width}x{height} texture but {adapter} allows {texture_limit} texels "
                f"per side (max-texture-dimension-2d); accepted: {problem.accepted}"
            )
    if len(problem.texture_sizes) > limits["max-storage-textures-per-shader-stage"]:
        raise UserError(
            f"{spec.name}: needs {len(problem.texture_sizes)} storage textures but {adapter} allows "
            f"{limits['max-storage-textures-per-shader-stage']} per shader stage; accepted: gemm_subgroup or gemm_vec4"
        )
    for nbytes in problem.buffer_sizes():
        for limit, name in ((binding_limit, "max-storage-buffer-binding-size"), (buffer_limit, "max-buffer-size")):
            if nbytes > limit:
                raise UserError(
                    f"{problem.label}: needs a {nbytes / 2**20:.0f} MiB storage buffer but {adapter} allows "
                    f"{limit / 2**20:.0f} MiB ({name}); accepted: {problem.accepted}"
                )
    max_dim = limits["max-compute-workgroups-per-dimension"]
    if max(problem.groups) > max_dim:
        raise UserError(
            f"{problem.label}: needs {max(problem.groups)} workgroups in one dimension but {adapter} allows "
            f"{max_dim} (max-compute-workgroups-per-dimension); accepted: {problem.accepted}"
        )
    invocations = spec.workgroup[0] * spec.workgroup[1]
    if invocations > limits["max-compute-invocations-per-workgroup"]:
        raise UserError(
            f"{spec.name}: needs {invocations} invocations per workgroup but {adapter} allows "
            f"{limits['max-compute-invocations-per-workgroup']}; accepted: kernels with smaller workgroups"
        )
    if spec.workgroup_storage_bytes > limits["max-compute-workgroup-storage-size"]:
        raise UserError(
            f"{spec.name}: needs {spec.workgroup_storage_bytes} bytes of workgroup memory but {adapter} allows "
            f"{limits['max-compute-workgroup-storage-size']}; accepted: kernels without large tiles (e.g. gemm_vec4)"
        )


def source_path(kernels_dir: Path, spec: KernelSpec) -> Path:
    """The kernel's source file in `kernels_dir`; UserError when it is missing."""
    path = kernels_dir / spec.source
    if not path.is_file():
        raise UserError(f"kernel source {path} is missing; check $FLEETBENCH_KERNELS_DIR or the checkout")
    return path


def wgsl_source(kernels_dir: Path, spec: KernelSpec, dtype: str) -> str:
    """The WGSL that is compiled for `spec` at storage `dtype`: the prelude (`wgsl_prelude`), then the kernel
    file with its unroll directives expanded (`expand_unrolls`)."""
    if spec.lang != "wgsl":
        raise ValueError(f"{spec.name} is a {spec.lang} kernel, not WGSL")
    path = source_path(kernels_dir, spec)
    prelude = wgsl_prelude(dtype, spec.features, spec.texture_inputs)
    return prelude + expand_unrolls(path.read_text(encoding="utf-8"), str(path))
