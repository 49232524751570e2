"""The machine a run ran on, as a flat map of strings: what has to be equal for two runs' figures to compare.

Every result record carries it (`machine`), so `compare` can show both sides and warn when they
differ, and a noise calibration or a CPU peak is only reused on the machine that measured it. The
keys: the CPU model (/proc/cpuinfo's `model name`), the cores this process may use, the kernel,
the GPU model and driver (nvidia-smi, only where it is installed), torch's version, CUDA and cuDNN
builds and the CPU instruction set it dispatches to, the float32 matmul precision and TF32 switches,
and the environment variables that change numerics or threading. Nothing here is measured, so
taking it costs a few milliseconds; torch's entries are read only when the job already loaded torch.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping
from functools import cache

from fleetbench.devices import cpu_model_name

# Environment variables that change results or threading (torch, OpenMP, MKL, OpenBLAS, CUDA).
NUMERIC_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_CBWR",
    "ATEN_CPU_CAPABILITY",
    "KMP_AFFINITY",
    "CUDA_VISIBLE_DEVICES",
    "CUBLAS_WORKSPACE_CONFIG",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "PYTORCH_CUDA_ALLOC_CONF",
)
# What names the machine itself (not the software on it): a noise calibration or a CPU peak of one
# machine is never used on another.
MACHINE_KEYS = ("host", "cpu_model", "cpu_count", "gpu_model")
# Keys that differ between two commits by design: shown, never warned about.
CODE_KEYS = ("commit",)


def nvidia_smi() -> dict[str, str]:
    """GPU model and driver from nvidia-smi, where it is installed and answers; else nothing."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = [[part.strip() for part in line.split(",")] for line in out.splitlines() if line.strip()]
    if not rows or len(rows[0]) < 2:
        return {}
    return {"gpu_model": rows[0][0], "gpu_count": str(len(rows)), "gpu_driver": rows[0][1]}


def torch_entries() -> dict[str, str]:
    """torch's build and numeric switches, when the process already imported torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    entries = {
        "torch": str(torch.__version__),
        "torch_cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
        "torch_threads": str(torch.get_num_threads()),
        "float32_matmul_precision": str(torch.get_float32_matmul_precision()),
    }
    if torch.version.cuda:
        entries["cuda"] = str(torch.version.cuda)
        entries["cudnn"] = str(torch.backends.cudnn.version())
        entries["tf32_matmul"] = str(torch.backends.cuda.matmul.allow_tf32)
        if torch.cuda.is_available():
            entries["gpu_model_torch"] = str(torch.cuda.get_device_name(0))
    return entries


@cache
def _static_entries() -> tuple[tuple[str, str], ...]:
    """What cannot change while the process lives: the CPU, the kernel, the GPU and its driver."""
    entries = {
        "cpu_model": cpu_model_name(),
        "cpu_count": str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()),
        "kernel": platform.release(),
        "python": platform.python_version(),
        **nvidia_smi(),
    }
    return tuple(entries.items())


def machine_fingerprint(host: str, commit: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The fingerprint of this process's machine and software (see the module docstring)."""
    env = os.environ if environ is None else environ
    entries = {"host": host, **dict(_static_entries()), **torch_entries(), "commit": commit}
    if "gpu_model" not in entries and "gpu_model_torch" in entries:
        entries["gpu_model"] = entries["gpu_model_torch"]  # no nvidia-smi here (a slim container)
    for name in NUMERIC_ENV:
        if name in env:
            entries[f"env.{name}"] = env[name]
    return entries


def machine_key(fingerprint: Mapping[str, str]) -> str:
    """A short stable id of the machine alone (MACHINE_KEYS): where calibrations of it are filed."""
    text = "\n".join(f"{key}={fingerprint.get(key, '')}" for key in MACHINE_KEYS)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def differences(base: Mapping[str, str], new: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Keys whose values differ (`(missing)` where one side lacks it), the code's own keys left out."""
    keys = sorted((base.keys() | new.keys()) - set(CODE_KEYS))
    return {
        key: (base.get(key, "(missing)"), new.get(key, "(missing)")) for key in keys if base.get(key) != new.get(key)
    }


def describe(fingerprint: Mapping[str, str]) -> str:
    """One line: CPU model and cores, GPU and driver where present, torch, commit."""
    parts = [f"{fingerprint.get('cpu_model', '?')} x{fingerprint.get('cpu_count', '?')}"]
    if "gpu_model" in fingerprint:
        parts.append(f"{fingerprint['gpu_model']} (driver {fingerprint.get('gpu_driver', '?')})")
    if "torch" in fingerprint:
        parts.append(f"torch {fingerprint['torch']}")
    parts.append(f"commit {fingerprint.get('commit', '?')[:12]}")
    return ", ".join(parts)
