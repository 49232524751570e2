"""Find NVIDIA's `ncu_report` module: the ncu-report wheel, else the copy every Nsight Compute install ships.

An install keeps it in `<install>/extras/python`. The `ncu` on PATH is either that install's own binary
or, in the CUDA toolkit, a wrapper script in `cuda/bin` that runs the newest `../nsight-compute-*/ncu`;
a standalone install lives under `/opt/nvidia/nsight-compute/<version>`. So a GPU machine with Nsight
Compute reads its reports without installing anything more.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

MODULE = "ncu_report"
STANDALONE_ROOT = Path("/opt/nvidia/nsight-compute")


def _newest_first(folders: list[Path]) -> list[Path]:
    """Install folders (…/nsight-compute-2025.3.1/extras/python) by their version, newest first."""

    def version(folder: Path) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", folder.parent.parent.name))

    return sorted(folders, key=version, reverse=True)


def extras_dirs(ncu: str | None, standalone_root: Path = STANDALONE_ROOT) -> list[Path]:
    """The folders holding an Nsight Compute install's ncu_report.py, the one that runs `ncu` first."""
    candidates: list[Path] = []
    if ncu:
        binary = Path(ncu).resolve()
        candidates.append(binary.parent / "extras" / "python")
        candidates += _newest_first(list(binary.parent.parent.glob("nsight-compute*/extras/python")))
    candidates += _newest_first(list(standalone_root.glob("*/extras/python")))
    found: list[Path] = []
    for folder in candidates:
        if (folder / f"{MODULE}.py").is_file() and folder not in found:
            found.append(folder)
    return found


def available() -> bool:
    """Whether `load` would find the module (without importing it)."""
    return importlib.util.find_spec(MODULE) is not None or bool(extras_dirs(shutil.which("ncu")))


def load() -> ModuleType | None:
    """The ncu_report module (the wheel's, else an Nsight Compute install's), or None when there is none."""
    try:
        return importlib.import_module(MODULE)
    except ImportError:
        pass
    for folder in extras_dirs(shutil.which("ncu")):
        sys.path.append(str(folder))
        try:
            return importlib.import_module(MODULE)
        except ImportError:  # an install for another Python, or a broken one: try the next
            sys.path.remove(str(folder))
    return None
