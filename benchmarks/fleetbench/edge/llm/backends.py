"""Which llama.cpp build a llama.cpp row runs: the CPU build installed in the environment, or the Vulkan build
installed beside it in a folder of its own.

Both builds are llama-cpp-python of the same pinned version from the same vendored llama.cpp sources; they
cannot share one site-packages (both are the module `llama_cpp`), so `make setup` installs the Vulkan one
with `pip install --target VENV/llama-vulkan` and the worker process of a Vulkan row finds it first on its
PYTHONPATH. A worker is a process of its own, so each row loads exactly one libllama/libggml.

llama.cpp's Vulkan backend leaves software devices out unless they are asked for: with no
GGML_VK_VISIBLE_DEVICES it takes the GPUs and, where the only devices are CPU-type ones (lavapipe), none.
Where the loader sees nothing but CPU-type devices, the worker asks for them (GGML_VK_VISIBLE_DEVICES),
so the rows run on lavapipe and say so; on a machine with a GPU llama.cpp chooses as it always does, and a
GGML_VK_VISIBLE_DEVICES of the user's own is left alone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import get_args

from fleetbench.config.edge import LlamaBackend
from fleetbench.envvars import LLAMA_VULKAN_ENV

LLAMA_BACKENDS: tuple[str, ...] = get_args(LlamaBackend)
# where `make setup` installs the Vulkan build (scripts/setup.sh), unless FLEETBENCH_LLAMA_VULKAN names another folder
VULKAN_FOLDER = "llama-vulkan"


def vulkan_site() -> Path:
    """The folder holding the Vulkan build's `llama_cpp` package."""
    named = os.environ.get(LLAMA_VULKAN_ENV)
    return Path(named) if named else Path(sys.prefix) / VULKAN_FOLDER


def missing(backend: str) -> str | None:
    """Why `backend`'s build is not installed, or None where it is."""
    if backend == "cpu":
        return None
    site = vulkan_site()
    if (site / "llama_cpp" / "lib").is_dir():
        return None
    return (
        f"no Vulkan build of llama-cpp-python in {site}: `make setup` builds it once where glslc and "
        "libvulkan-dev are installed (or set FLEETBENCH_LLAMA_VULKAN to the folder of one)"
    )


def worker_env(backend: str) -> dict[str, str] | None:
    """The environment of a worker running `backend`: the Vulkan build first on PYTHONPATH; None: inherit."""
    if backend == "cpu":
        return None
    paths = [str(vulkan_site()), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    software = software_devices_only()
    if software and VISIBLE_DEVICES not in env:
        env[VISIBLE_DEVICES] = software
    return env


VISIBLE_DEVICES = "GGML_VK_VISIBLE_DEVICES"  # llama.cpp's own: Vulkan device indices, comma-separated


def software_devices_only() -> str | None:
    """The indices (comma-separated) of the Vulkan devices where every device the loader sees is a CPU-type
    one (lavapipe, SwiftShader); None where there is a GPU, no device, or no loader."""
    from fleetbench.edge.vulkan import vulkan_devices

    devices = vulkan_devices() or ()
    if not devices or any(device.device_type != "cpu" for device in devices):
        return None
    return ",".join(str(index) for index in range(len(devices)))
