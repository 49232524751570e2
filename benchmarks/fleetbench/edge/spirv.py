"""Compile the GLSL compute kernels to SPIR-V with glslc, into a build folder (never committed).

This is the path Vulkan deployments use: GLSL (or HLSL, or MLIR/IREE) compiled ahead of time to
SPIR-V, then handed to the driver. wgpu accepts the SPIR-V module and translates it for its backend.
Outputs are named by the source's content hash and the compile flags, so a changed kernel is rebuilt
and an unchanged one is reused; each is written to a temporary name and renamed into place.
No -O: on lavapipe, spirv-opt's loop rewriting made the FMA probe 3-5x slower than the plain output.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from fleetbench.envvars import GLSLC_ENV
from fleetbench.errors import UserError
from fleetbench.fsutil import ensure_writable_dir

BASE_FLAGS = ("-fshader-stage=compute", "--target-env=vulkan1.1")
MISSING_GLSLC = (
    f"glslc not found (Debian/Ubuntu package glslc, or the Vulkan SDK; or set {GLSLC_ENV}); it compiles the "
    "*_spirv kernels; accepted: install it, or leave gemm_vec4_spirv and peak_fma_spirv out of edge.kernels"
)


def glslc() -> str | None:
    """The glslc to use ($FLEETBENCH_GLSLC, else the one on PATH), or None when there is none."""
    configured = os.environ.get(GLSLC_ENV)
    if configured:
        return configured if Path(configured).is_file() else shutil.which(configured)
    return shutil.which("glslc")


def flags_for(dtype: str) -> tuple[str, ...]:
    """glslc flags for a storage dtype: float16 adds -DFLEETBENCH_F16."""
    return (*BASE_FLAGS, "-DFLEETBENCH_F16") if dtype == "float16" else BASE_FLAGS


def build(source: Path, dtype: str, out_dir: Path) -> Path:
    """The SPIR-V of `source` for `dtype`, compiled now or found from an earlier identical build."""
    compiler = glslc()
    if compiler is None:
        raise UserError(MISSING_GLSLC)
    flags = flags_for(dtype)
    digest = hashlib.sha256(source.read_bytes() + "\0".join(flags).encode()).hexdigest()[:12]
    target = out_dir / f"{source.stem}-{dtype}-{digest}.spv"
    if target.is_file() and target.stat().st_size > 0:
        return target
    ensure_writable_dir(out_dir, "SPIR-V build folder", "--set edge.spirv_dir=DIR")
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        result = subprocess.run(
            [compiler, *flags, str(source), "-o", str(partial)], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"glslc could not compile {source}: {exc}") from None
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        first = (result.stderr.strip() or result.stdout.strip() or f"exit {result.returncode}").splitlines()[0]
        raise UserError(f"glslc failed on {source} ({dtype}): {first}")
    try:
        os.replace(partial, target)
    except OSError as exc:  # no half-built .spv, and no temporary one, is left behind
        partial.unlink(missing_ok=True)
        raise UserError(f"SPIR-V of {source}: cannot write {target} ({exc.strerror or exc})") from None
    return target
