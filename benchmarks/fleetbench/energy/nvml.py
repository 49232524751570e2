"""NVML's total energy counter of a GPU (nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver
loaded; Volta and newer), through the `nvidia-ml-py` package (module pynvml) where it is installed."""

from __future__ import annotations

from typing import Any


def read_millijoules(index: int) -> tuple[int | None, str | None]:
    """GPU `index`'s energy counter in mJ, or (None, why)."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed"
    nvml: Any = pynvml
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded ...: no NVIDIA driver here
        return None, f"NVML cannot start ({exc})"
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        return int(nvml.nvmlDeviceGetTotalEnergyConsumption(handle)), None
    except Exception as exc:  # NVMLError_NotSupported on GPUs older than Volta
        return None, f"NVML gives no energy counter for GPU {index} ({exc})"
    finally:
        nvml.nvmlShutdown()
