"""Pick the compute device and describe it with bounded label values.

torch is imported where a device is resolved or synchronised, not with the module: report readers
(`fleetbench ncu summarize`) import their job modules, which name DeviceInfo, on hosts without torch.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from fleetbench.errors import UserError

if TYPE_CHECKING:
    import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")


@dataclass(frozen=True)
class DeviceInfo:
    """The device a job runs on, with the `device` and `backend` label values that describe it."""

    torch_device: torch.device
    backend: str  # compute API: cpu, cuda, mps
    name: str  # model name, e.g. "NVIDIA H200" or the CPU's model name

    def synchronize(self) -> None:
        """Wait until the device has finished queued work, so a timer read after it is honest."""
        import torch

        if self.backend == "cuda":
            torch.cuda.synchronize(self.torch_device)
        elif self.backend == "mps":
            torch.mps.synchronize()


@cache
def cpu_model_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else what the platform module knows, else "cpu"."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "cpu"


def mps_available() -> bool:
    """Whether this torch build has the MPS backend and the machine offers it (Apple silicon)."""
    import torch

    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def resolve_device(choice: str = "auto", index: int = 0) -> DeviceInfo:
    """The device for `choice` (one of DEVICE_CHOICES; auto: CUDA when present, else CPU).

    `index` picks the CUDA device. Raises UserError when the choice is unknown or not present here.
    """
    import torch

    if choice not in DEVICE_CHOICES:
        raise UserError(f"device {choice!r} is not accepted; use one of {', '.join(DEVICE_CHOICES)}")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda":
        if not torch.cuda.is_available():
            raise UserError("device 'cuda' requested but torch sees no CUDA GPU; use device=cpu or auto")
        if index >= torch.cuda.device_count():
            raise UserError(f"CUDA device {index} requested but only {torch.cuda.device_count()} visible")
        dev = torch.device("cuda", index)
        return DeviceInfo(dev, "cuda", torch.cuda.get_device_name(dev))
    if choice == "mps":
        if not mps_available():
            raise UserError("device 'mps' requires Apple silicon (MPS); use device=cpu or auto")
        return DeviceInfo(torch.device("mps"), "mps", "Apple " + platform.machine())
    return DeviceInfo(torch.device("cpu"), "cpu", cpu_model_name())
