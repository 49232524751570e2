"""Memory: per-step statistics, the per-rank memory cap, and out-of-memory errors a user can act on.

GPU: `torch.cuda.memory_stats` (allocated and reserved peaks, allocator retries, OOMs), and the cap
is `torch.cuda.set_per_process_memory_fraction`. CPU: process RSS, and the cap is RLIMIT_DATA (the
kernel refuses private memory beyond it, so the allocator fails as it would on a full machine).
"""

from __future__ import annotations

import os
import resource
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

import psutil
import torch

from fleetbench.config.train import TrainConfig
from fleetbench.errors import UserError
from fleetbench.telemetry.session import peak_rss_bytes
from fleetbench.train.decoder import param_counts
from fleetbench.train.plan import TrainPlan

GIB = 2**30


@dataclass(frozen=True)
class MemorySnapshot:
    """This process's memory now: device allocator figures on a GPU, RSS everywhere (bytes)."""

    peak_allocated: int | None  # device allocator (GPU); None on CPU
    peak_reserved: int | None
    alloc_retries: int
    ooms: int
    rss: int  # this process, now
    peak_rss: int  # this process, since it started

    @property
    def headline(self) -> int:
        """What the step display shows as 'peak memory': allocator peak on GPU, peak RSS on CPU."""
        return self.peak_allocated if self.peak_allocated is not None else self.peak_rss


@cache
def _process(pid: int) -> psutil.Process:
    return psutil.Process(pid)


def snapshot(device: torch.device) -> MemorySnapshot:
    """Memory figures of this process on `device`."""
    rss = _process(os.getpid()).memory_info().rss
    if device.type == "cuda":
        stats = torch.cuda.memory_stats(device)
        return MemorySnapshot(
            peak_allocated=int(stats.get("allocated_bytes.all.peak", 0)),
            peak_reserved=int(stats.get("reserved_bytes.all.peak", 0)),
            alloc_retries=int(stats.get("num_alloc_retries", 0)),
            ooms=int(stats.get("num_ooms", 0)),
            rss=rss,
            peak_rss=peak_rss_bytes(),
        )
    return MemorySnapshot(None, None, 0, 0, rss, peak_rss_bytes())


def data_segment_bytes() -> int:
    """Private writable memory of this process (VmData): what RLIMIT_DATA limits."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    raise OSError("VmData not in /proc/self/status")


def apply_memory_cap(max_memory_gb: float | None, device: torch.device) -> str | None:
    """Cap this rank's memory; returns a description of the cap, or None when uncapped."""
    if max_memory_gb is None:
        return None
    cap = int(max_memory_gb * GIB)
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        fraction = min(1.0, cap / total)
        torch.cuda.set_per_process_memory_fraction(fraction, device)
        return f"{max_memory_gb:g} GiB ({fraction:.1%} of the GPU)"
    try:
        in_use = data_segment_bytes()
    except OSError:
        raise UserError(
            "train.max_memory_gb on CPU needs Linux (/proc/self/status, RLIMIT_DATA); leave it unset on this system"
        ) from None
    if in_use >= cap:
        raise UserError(
            f"train.max_memory_gb={max_memory_gb:g} is below what this rank already holds "
            f"({in_use / GIB:.2f} GiB before training); accepted: a larger value, or unset"
        )
    _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY and cap > hard:
        cap = hard
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    return f"{max_memory_gb:g} GiB (RLIMIT_DATA)"


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` means an allocation failed: CUDA OOM, MemoryError, or the CPU allocator's messages."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "can't allocate memory" in text or "not enough memory" in text or "out of memory" in text.lower()
    )


@contextmanager
def out_of_memory_as(error: Callable[[BaseException], UserError]) -> Iterator[None]:
    """Raise `error(exc)` for running out of memory inside the block; other failures pass unchanged.

    The failed frames' locals (the step's activations and gradients) are cleared first: the new error
    keeps the old one as its context, and with it every tensor the failed step held, so under a cap
    the report and the run's record could not be written without this.
    """
    try:
        yield
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        replacement = error(exc)
        traceback.clear_frames(exc.__traceback__)  # frames still running (the callers) are skipped
        raise replacement from None


@dataclass(frozen=True)
class MemoryKnobs:
    """The settings that decide a rank's memory use, as the hints name them."""

    batch_size: int
    seq_len: int
    activation_checkpointing: bool
    reshard_after_forward: bool
    mixed_precision: bool
    world_size: int
    max_memory_gb: float | None


def out_of_memory_message(exc: BaseException, where: str, rank: int, device: str, knobs: MemoryKnobs) -> str:
    """One line: what ran out, and every knob that lowers memory use from the current setting."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    detail = detail.split("DefaultCPUAllocator: ", 1)[-1]
    if len(detail) > 160:
        detail = detail[:157] + "..."
    cap = f", cap {knobs.max_memory_gb:g} GiB" if knobs.max_memory_gb is not None else ""
    return (
        f"out of memory on rank {rank} ({device}{cap}) {where}: {detail}; "
        f"to lower memory use: {', '.join(memory_hints(knobs))}"
    )


def memory_hints(knobs: MemoryKnobs) -> list[str]:
    """Every knob that lowers memory use from its current setting."""
    hints = [
        f"a smaller train.batch_size (now {knobs.batch_size}) or train.seq_len (now {knobs.seq_len})",
    ]
    if not knobs.activation_checkpointing:
        hints.append("train.activation_checkpointing=true")
    if not knobs.reshard_after_forward:
        hints.append("train.reshard_after_forward=true")
    if not knobs.mixed_precision:
        hints.append("train.mixed_precision=true")
    hints.append(f"more ranks to shard over (NPROC, now {knobs.world_size} in all)")
    if knobs.max_memory_gb is not None:
        hints.append(f"a larger train.max_memory_gb (now {knobs.max_memory_gb:g})")
    return hints


def estimate_rank_bytes(plan: TrainPlan, cfg: TrainConfig, bytes_per_activation: int) -> int:
    """A floor on one rank's training memory: sharded fp32 params, grads and AdamW moments, two
    unsharded blocks, activations kept for backward (about 10 x dim + 2 x ffn_dim values per token
    and layer; with activation checkpointing only each block's input), and the logits with their
    fp32 copy and gradient. Temporaries come on top, so a run above this cannot fit."""
    shape = plan.shape
    total, _ = param_counts(shape)
    shards = plan.world_size if cfg.fsdp else 1
    per_block = total - 2 * shape.vocab_size * shape.dim
    per_block //= shape.layers
    states = 16 * total // shards + 2 * 4 * per_block
    tokens = plan.batch_size * plan.seq_len
    per_layer = (10 * shape.dim + 2 * shape.ffn_dim) * bytes_per_activation
    if cfg.activation_checkpointing:
        activations = tokens * (shape.layers * shape.dim * bytes_per_activation + per_layer)
    else:
        activations = tokens * shape.layers * per_layer
    logits = tokens * shape.vocab_size * (bytes_per_activation + 4 + 4)
    return states + activations + logits


def check_fits(plan: TrainPlan, cfg: TrainConfig, device: torch.device, local_ranks: int) -> None:
    """Refuse, before any work, a batch and sequence length that cannot fit this machine at all."""
    bf16 = plan.precision.bf16
    need = estimate_rank_bytes(plan, cfg, 2 if bf16 else 4)
    if device.type == "cuda":
        have = torch.cuda.get_device_properties(device).total_memory
        where = f"the {have / GIB:.0f} GiB of {torch.cuda.get_device_name(device)}"
    else:
        total = psutil.virtual_memory().total
        have = total // local_ranks
        where = f"this rank's share of the machine's memory ({total / GIB:.0f} GiB / {local_ranks} rank(s))"
    if need <= have:
        return
    knobs = MemoryKnobs(
        plan.batch_size,
        plan.seq_len,
        cfg.activation_checkpointing,
        cfg.reshard_after_forward,
        bf16,
        plan.world_size,
        None,
    )
    raise UserError(
        f"train.batch_size={plan.batch_size} x train.seq_len={plan.seq_len} cannot work here: one rank "
        f"needs at least {need / GIB:.1f} GiB (model states and activations), more than {where}; "
        f"to lower memory use: {', '.join(memory_hints(knobs))}"
    )
