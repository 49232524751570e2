"""Model FLOPs per token, peak FLOP/s per device, and MFU, the way torchtitan counts them.

FLOPs/token = 6 x (non-embedding parameters) + 12 x layers x heads x head_dim x seq_len: forward
plus backward of every weight matmul (2 + 4 FLOPs per parameter and token) and of the two attention
matmuls (full, not causal, attention is counted, as torchtitan does). MFU = FLOPs/token x tokens/s
per device / peak FLOP/s per device. The GPU peak is the bf16 dense tensor figure of the one GPU table
(fleetbench.gpus), the table the profiler reads too. A GPU missing from it (or without a
bf16 figure there) gets no MFU and a warning; never a number computed against a guessed peak.

The peak is fixed per machine, never re-measured per run, so that MFU moves only with the model's
throughput: a GPU's comes from the datasheet table; a CPU's is measured once (the best fp32/bf16
matmul of this process's threads) and stored under the results root,
`calibration/cpu-peak-<machine key>.json`, one entry per dtype, thread count and torch version; every
later run on the machine reads it (its source says "calibrated ... on DATE"). Delete the file to
measure again.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from fleetbench import jsonio
from fleetbench.errors import UserError
from fleetbench.fsutil import write_text_atomic
from fleetbench.gpus import datasheet_peak
from fleetbench.train.decoder import param_counts
from fleetbench.train.plan import ModelShape

CALIBRATION_FOLDER = "calibration"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Peak:
    """The peak FLOP/s MFU divides by, and where it came from."""

    flop_per_second: float
    source: str  # "table: NVIDIA H200 SXM (bf16 dense)", "measured: fp32 matmul", "config: train.peak_flops"


def flops_per_token(shape: ModelShape, seq_len: int) -> int:
    """Training FLOPs per token, forward and backward (see the module docstring)."""
    _total, non_embedding = param_counts(shape)
    return 6 * non_embedding + 12 * shape.layers * shape.heads * shape.head_dim * seq_len


def table_peak(device_name: str) -> Peak | None:
    """The bf16 dense peak of a GPU in the GPU table (fleetbench.gpus), or None."""
    sheet = datasheet_peak(device_name)
    if sheet is None or sheet.bf16_tensor is None:
        return None
    return Peak(sheet.bf16_tensor, f"table: {sheet.model} (bf16 dense)")


def mfu(flop_per_token: float, device_tokens_per_second: float, peak: Peak | None) -> float | None:
    """Model FLOPs utilisation in 0-1, or None without a (positive) peak."""
    if peak is None or peak.flop_per_second <= 0:
        return None
    return flop_per_token * device_tokens_per_second / peak.flop_per_second


def measured_cpu_peak(
    dtype_name: str, threads: int, sizes: tuple[int, ...] = (512, 1024), min_run_time_s: float = 0.2
) -> Peak:
    """Best achieved matmul FLOP/s on this process's threads (all ranks measure at the same time)."""
    import torch

    from fleetbench.devices import resolve_device
    from fleetbench.probe.compute import matmul_probe

    device = resolve_device("cpu")
    dtype = getattr(torch, dtype_name)
    best = max(matmul_probe(n, dtype, device, min_run_time_s, threads).flop_per_second for n in sizes)
    return Peak(best, f"measured: {dtype_name} matmul, {threads} thread(s)")


def cpu_peak_file(results_root: Path, host: str) -> Path:
    """Where this machine's CPU peaks are stored under the results root (keyed by the machine fingerprint)."""
    from fleetbench.results.fingerprint import machine_fingerprint, machine_key

    return results_root / CALIBRATION_FOLDER / f"cpu-peak-{machine_key(machine_fingerprint(host, ''))}.json"


def _entry(dtype_name: str, threads: int) -> str:
    import torch

    return f"{dtype_name}/{threads} threads/torch {torch.__version__}"


def stored_cpu_peak(path: Path, dtype_name: str, threads: int) -> Peak | None:
    """The stored peak of this dtype, thread count and torch, if any; a damaged file is ignored, with a warning."""
    if not path.is_file():
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))["peaks"].get(_entry(dtype_name, threads))
        if entry is None:
            return None
        value = float(entry["flop_per_second"])
        if not value > 0 or value == float("inf"):
            raise ValueError(f"flop_per_second {value}")
        return Peak(value, f"calibrated: {entry['source']}, on {entry['measured_at'][:10]} ({path.name})")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("%s: not a CPU peak calibration (%s); measuring the peak again", path, exc)
        return None


def store_cpu_peak(path: Path, dtype_name: str, threads: int, peak: Peak) -> None:
    """Add this peak to the machine's file (atomically); a file that cannot be written is a warning only."""
    from fleetbench.runinfo import utc_now

    peaks: dict[str, object] = {}
    try:
        peaks = dict(json.loads(path.read_text(encoding="utf-8"))["peaks"]) if path.is_file() else {}
    except (OSError, ValueError, KeyError, TypeError):
        peaks = {}  # a damaged file is replaced
    peaks[_entry(dtype_name, threads)] = {
        "flop_per_second": peak.flop_per_second,
        "source": peak.source.removeprefix("measured: "),
        "measured_at": utc_now().isoformat(),
    }
    try:
        write_text_atomic(path, jsonio.dumps({"peaks": peaks}, indent=1) + "\n", "CPU peak calibration")
    except UserError as exc:
        log.warning("%s; MFU will measure the peak again next run", exc)


def resolve_peak(
    backend: str,
    device_name: str,
    compute_dtype: str,
    threads: int,
    configured: float | None,
    calibration: Path | None = None,
) -> tuple[Peak | None, str | None]:
    """The peak MFU divides by, and a warning when there is none (see the module docstring)."""
    if configured is not None:
        return Peak(configured, "config: train.peak_flops"), None
    if backend == "cpu":
        stored = stored_cpu_peak(calibration, compute_dtype, threads) if calibration else None
        return stored or measured_cpu_peak(compute_dtype, threads), None
    if compute_dtype != "bfloat16":
        return None, (
            f"no MFU: the peak table holds bf16 dense peaks and this run computes in {compute_dtype}; "
            "set train.mixed_precision=true, or give the peak with train.peak_flops"
        )
    peak = table_peak(device_name)
    if peak is None:
        return None, (
            f"no MFU: {device_name!r} has no bf16 dense peak in the GPU table (fleetbench.gpus); "
            "give its bf16 dense peak FLOP/s with train.peak_flops"
        )
    return peak, None
