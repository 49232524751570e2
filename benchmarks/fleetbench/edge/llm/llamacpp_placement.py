"""Where llama.cpp put a model: the devices its ggml registered, the ones the model used, the layers it
offloaded and the size of each weight buffer, as llama.cpp itself reports them while it loads.

llama.cpp says it in its log ("using device Vulkan0 (llvmpipe ...)", "offloaded 3/3 layers to GPU",
"Vulkan0 model buffer size = 8.06 MiB"); llama-cpp-python drops that log unless verbose, so the log
callback is replaced for the load (`LogCapture`), and the lines are read back (`placement`). The devices
come from ggml's own registry (ggml_backend_dev_*), so the name a row carries is the driver's.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# ggml_backend_dev_type: CPU, GPU, IGPU, ACCEL, META
DEVICE_TYPES = ("cpu", "gpu", "igpu", "accel", "meta")
_USING = re.compile(r"using device (\S+) \((.*)\) \(.*\) - \d+ MiB free")
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_BUFFER = re.compile(r"^\S+:\s+(\S+) model buffer size =\s+([\d.]+) MiB", re.MULTILINE)


def devices() -> list[dict[str, str]]:
    """Every device ggml registered: name (CPU, Vulkan0, ...), description (the driver's device name), type."""
    from llama_cpp import _ggml

    lib = _ggml.libggml
    lib.ggml_backend_dev_count.argtypes, lib.ggml_backend_dev_count.restype = [], ctypes.c_size_t
    lib.ggml_backend_dev_get.argtypes, lib.ggml_backend_dev_get.restype = [ctypes.c_size_t], ctypes.c_void_p
    for name in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [ctypes.c_void_p], ctypes.c_char_p
    lib.ggml_backend_dev_type.argtypes, lib.ggml_backend_dev_type.restype = [ctypes.c_void_p], ctypes.c_int
    found = []
    for index in range(lib.ggml_backend_dev_count()):
        device = lib.ggml_backend_dev_get(index)
        kind = lib.ggml_backend_dev_type(device)
        found.append(
            {
                "name": lib.ggml_backend_dev_name(device).decode(),
                "description": lib.ggml_backend_dev_description(device).decode(),
                "type": DEVICE_TYPES[kind] if 0 <= kind < len(DEVICE_TYPES) else str(kind),
            }
        )
    return found


class LogCapture:
    """llama.cpp's log lines while `capturing()`; the library's own callback is put back after."""

    def __init__(self) -> None:
        import llama_cpp

        self.text: list[str] = []
        self._c = llama_cpp

        def keep(level: int, text: bytes, user_data: Any) -> None:
            self.text.append(text.decode("utf-8", "replace"))

        self._callback = llama_cpp.llama_log_callback(keep)  # referenced as long as llama.cpp may call it

    @contextmanager
    def capturing(self) -> Iterator[None]:
        """Route llama.cpp's log here for the block."""
        from llama_cpp import _logger

        self._c.llama_log_set(self._callback, ctypes.c_void_p(0))
        try:
            yield
        finally:
            self._c.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))


def placement(log: str, registered: list[dict[str, str]]) -> dict[str, Any]:
    """What the load log says about where the model went, beside the registered devices.

    `device` is the description of the device that holds the most weight (the CPU's where nothing was
    offloaded), `offloaded_layers`/`layers` llama.cpp's own count (0 of the model's where its build
    offloads nothing), `buffers` the MiB of weights per buffer (CPU, CPU_Mapped, Vulkan0, ...)."""
    used = [{"name": m.group(1), "description": m.group(2)} for m in _USING.finditer(log)]
    offloaded = _OFFLOADED.search(log)
    buffers: dict[str, float] = {}
    for match in _BUFFER.finditer(log):
        buffers[match.group(1)] = buffers.get(match.group(1), 0.0) + float(match.group(2))
    names = {d["name"]: d["description"] for d in registered}
    holder = max(buffers, key=lambda b: buffers[b]) if buffers else "CPU"
    cpu = next((d["description"] for d in registered if d["type"] == "cpu"), "CPU")
    return {
        "device": names.get(holder, cpu),
        "devices_used": used,
        "devices_registered": registered,
        "offloaded_layers": int(offloaded.group(1)) if offloaded else 0,
        "layers": int(offloaded.group(2)) if offloaded else None,
        "buffers_mib": buffers,
    }
