"""Where the kernel sources are, and where the SPIR-V built from them goes."""

from __future__ import annotations

import os
from pathlib import Path

from fleetbench.envvars import KERNELS_DIR_ENV as KERNELS_ENV
from fleetbench.errors import UserError

KERNELS_SUBDIR = Path("mobile") / "kernels"


def repo_root() -> Path | None:
    """The source checkout this package runs from (it holds pyproject.toml and mobile/), if any."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file() and (parent / KERNELS_SUBDIR).is_dir():
            return parent
    return None


def kernels_dir() -> Path:
    """$FLEETBENCH_KERNELS_DIR when set (an installed copy or a container), else the checkout's mobile/kernels."""
    configured = os.environ.get(KERNELS_ENV)
    if configured:
        path = Path(configured).expanduser()
        if not path.is_dir():
            raise UserError(
                f"{KERNELS_ENV}={configured} is not a folder; point it at the kernel sources (mobile/kernels)"
            )
        return path.resolve()
    root = repo_root()
    if root is not None:
        return root / KERNELS_SUBDIR
    cwd_kernels = Path.cwd() / KERNELS_SUBDIR
    if cwd_kernels.is_dir():
        return cwd_kernels
    raise UserError(
        f"edge kernels not found (no {KERNELS_SUBDIR} in a checkout above {Path(__file__).parent} or in the "
        f"current folder); set {KERNELS_ENV}=/path/to/mobile/kernels"
    )


def default_spirv_dir() -> Path:
    """<checkout>/build/spirv (build/ is gitignored), or the user cache when installed elsewhere."""
    root = repo_root()
    if root is not None and os.access(root, os.W_OK):
        return root / "build" / "spirv"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "fleetbench" / "spirv"
