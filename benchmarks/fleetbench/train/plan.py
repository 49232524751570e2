"""The trainer's plan: a `train` config with its preset applied, cross-checked against the world size.

Trainer logic rather than configuration (it needs the number of ranks), so it lives in the train
package; the section itself and its presets are in `fleetbench.config.train`. No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetbench.config.train import PRESETS, TEXT_VOCAB, DataKind, ModelFamily, TrainConfig
from fleetbench.devices import DeviceInfo
from fleetbench.errors import UserError
from fleetbench.train.defaults import Precision, choose_precision, choose_preset
from fleetbench.train.rope import LLAMA3_ROPE_SCALING, RopeScaling

__all__ = [
    "ModelShape",
    "TrainPlan",
    "check_launch",
    "check_plan",
    "check_profile_device",
    "rank_batch",
    "resolve_plan",
]


@dataclass(frozen=True)
class ModelShape:
    """The decoder's dimensions and block family."""

    dim: int
    layers: int
    heads: int
    ffn_dim: int
    vocab_size: int
    model: ModelFamily = "seed"
    kv_heads: int | None = None  # llama: key/value heads (GQA); None: `heads`
    rope_theta: float = 500000.0  # llama: RoPE base, with Llama 3's frequency scaling (as torchtitan)
    norm_eps: float = 1e-5  # llama: RMSNorm epsilon (torchtitan's)
    # llama: Llama 3's RoPE frequency scaling (factor, low, high, original context); None: plain RoPE
    rope_scaling: RopeScaling | None = LLAMA3_ROPE_SCALING

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.dim // self.heads

    @property
    def n_kv_heads(self) -> int:
        """Key/value heads: `kv_heads`, or one per query head."""
        return self.kv_heads or self.heads


@dataclass(frozen=True)
class TrainPlan:
    """Everything the trainer needs, with presets applied and cross-checked."""

    preset: str
    shape: ModelShape
    seq_len: int
    batch_size: int  # per data-parallel rank
    steps: int
    data: DataKind
    lr: float
    warmup_steps: int
    world_size: int
    precision: Precision  # the dtypes FSDP2 computes and reduces in, chosen once for the device
    preset_why: str = ""  # "train.preset=NAME", or why the device's default was chosen
    grad_accum_steps: int = 1  # micro-batches of batch_size per optimiser step
    lr_schedule: str = "constant"  # after the warmup: constant or cosine
    lr_min_ratio: float = 0.1  # cosine: the last step's learning rate over lr

    @property
    def global_batch(self) -> int:
        """Sequences per optimiser step over every rank (and every micro-batch)."""
        return self.batch_size * self.world_size * self.grad_accum_steps

    @property
    def tokens_per_step(self) -> int:
        """Tokens per step over every rank."""
        return self.global_batch * self.seq_len


def _pick(value: int | None, default: int) -> int:
    return default if value is None else value


def rank_batch(cfg: TrainConfig, preset_batch: int, world_size: int) -> int:
    """Sequences per rank: `train.batch_size`, or `train.global_batch_size` split over the ranks, or the preset's.

    Raises UserError when both are set, or when the global batch does not split evenly.
    """
    total = cfg.global_batch_size
    if total is None:
        return _pick(cfg.batch_size, preset_batch)
    if cfg.batch_size is not None:
        raise UserError(
            f"train.batch_size={cfg.batch_size} (per rank) and train.global_batch_size={total} (over every "
            "rank) are both set; accepted: one of them"
        )
    if total % world_size:
        raise UserError(
            f"train.global_batch_size={total} does not split evenly over {world_size} ranks; accepted: a "
            f"multiple of {world_size}"
        )
    return total // world_size


def resolve_plan(cfg: TrainConfig, world_size: int, device: DeviceInfo | None = None) -> TrainPlan:
    """The preset with the config's own values over it, checked for `world_size` ranks (UserError if not).

    An unset `train.preset`, and the precision, are chosen for `device` (`train/defaults.py`); a plan
    made without a device (a tool reading a config) is the CPU's.
    """
    backend = device.backend if device is not None else "cpu"
    choice = choose_preset(cfg.preset, backend, cfg.model)
    preset = PRESETS[choice.name]
    model = cfg.model or preset.model
    shape = ModelShape(
        dim=_pick(cfg.dim, preset.dim),
        layers=_pick(cfg.layers, preset.layers),
        heads=_pick(cfg.heads, preset.heads),
        ffn_dim=_pick(cfg.ffn_dim, preset.ffn_dim),
        vocab_size=_pick(cfg.vocab_size, preset.vocab_size),
        model=model,
        kv_heads=(cfg.kv_heads or preset.kv_heads) if model == "llama" else None,
    )
    data: DataKind = cfg.data or preset.data
    plan = TrainPlan(
        preset=choice.name,
        shape=shape,
        seq_len=_pick(cfg.seq_len, preset.seq_len),
        batch_size=rank_batch(cfg, preset.batch_size, world_size),
        steps=_pick(cfg.steps, preset.steps),
        data=data,
        lr=preset.lr if cfg.lr is None else cfg.lr,
        warmup_steps=_pick(cfg.warmup_steps, preset.warmup_steps),
        world_size=world_size,
        precision=choose_precision(cfg.mixed_precision, cfg.fsdp, backend),
        preset_why=choice.why,
        grad_accum_steps=cfg.grad_accum_steps,
        lr_schedule=cfg.lr_schedule,
        lr_min_ratio=cfg.lr_min_ratio,
    )
    check_plan(cfg, plan)
    return plan


def check_plan(cfg: TrainConfig, plan: TrainPlan) -> None:
    """Refuse combinations that cannot train, with the accepted values, as one-line UserErrors."""
    shape = plan.shape
    if shape.dim % shape.heads:
        raise UserError(
            f"train.heads={shape.heads} does not divide train.dim={shape.dim}; "
            f"accepted: a head count that divides dim (preset {plan.preset})"
        )
    _check_llama(cfg, plan)
    if plan.data == "text" and shape.vocab_size < TEXT_VOCAB:
        raise UserError(
            f"train.vocab_size={shape.vocab_size} is too small for data=text (byte tokens need "
            f"{TEXT_VOCAB}); accepted: vocab_size >= {TEXT_VOCAB}, or data=random"
        )
    if not cfg.fsdp and plan.world_size != 1:
        raise UserError(
            f"train.fsdp=false trains one unsharded process but {plan.world_size} ranks were asked "
            "for; accepted: NPROC=1 NNODES=1 with fsdp=false, or fsdp=true"
        )
    if cfg.hsdp and not cfg.fsdp:
        raise UserError("train.hsdp=true needs train.fsdp=true (HSDP is a 2-D FSDP mesh)")
    if cfg.hsdp and cfg.hsdp_shard_size is not None and plan.world_size % cfg.hsdp_shard_size:
        raise UserError(
            f"train.hsdp_shard_size={cfg.hsdp_shard_size} does not divide the {plan.world_size} "
            "ranks; accepted: a divisor of NPROC x NNODES (usually NPROC, the ranks per node)"
        )
    if cfg.backend == "nccl" and cfg.device == "cpu":
        raise UserError(
            "train.backend=nccl needs CUDA tensors but train.device=cpu; accepted: backend=gloo (or auto) on CPU"
        )
    if cfg.checkpoint_every and cfg.checkpoint_every > plan.steps:
        raise UserError(
            f"train.checkpoint_every={cfg.checkpoint_every} is larger than train.steps="
            f"{plan.steps}, so no checkpoint would be written; accepted: 0 (off) or <= steps"
        )


def _check_llama(cfg: TrainConfig, plan: TrainPlan) -> None:
    shape = plan.shape
    if cfg.kv_heads is not None and shape.model != "llama":
        raise UserError(
            f"train.kv_heads={cfg.kv_heads} is a llama setting but train.model={shape.model}; accepted: "
            "train.model=llama with kv_heads, or no kv_heads"
        )
    if shape.model == "llama" and shape.heads % shape.n_kv_heads:
        raise UserError(
            f"train.kv_heads={shape.n_kv_heads} does not divide train.heads={shape.heads}; accepted: a "
            f"divisor of heads (preset {plan.preset})"
        )
    if shape.model == "llama" and shape.head_dim % 2:
        raise UserError(
            f"train.dim={shape.dim} / train.heads={shape.heads} gives an odd head width {shape.head_dim}; "
            "accepted: an even head width (RoPE rotates pairs)"
        )


def check_launch(cfg: TrainConfig, plan: TrainPlan) -> None:
    """Checks of how the trainer runs (not of the model plan other tools also read)."""
    if cfg.mixed_precision and not cfg.fsdp:
        raise UserError(
            "train.mixed_precision=true needs train.fsdp=true (FSDP2's MixedPrecisionPolicy); "
            "accepted with fsdp=false: mixed_precision=false"
        )
    if cfg.profile_steps is not None and cfg.profile_steps[1] > plan.steps:
        first, last = cfg.profile_steps
        raise UserError(
            f"train.profile_steps={first}:{last} goes past the run's last step, train.steps={plan.steps}; "
            f"accepted: A:B with 1 <= A <= B <= {plan.steps} (e.g. {min(3, plan.steps)}:{min(5, plan.steps)})"
        )
    if cfg.profile_memory_snapshot and cfg.profile_steps is None:
        raise UserError(
            "train.profile_memory_snapshot=true snapshots the profiled steps and needs train.profile_steps=A:B "
            "(--profile-steps A:B)"
        )


def check_profile_device(cfg: TrainConfig, cuda: bool) -> None:
    """The memory snapshot is the CUDA caching allocator's: refuse it for a CPU run, in one line."""
    if cfg.profile_memory_snapshot and not cuda:
        raise UserError(
            "train.profile_memory_snapshot=true needs CUDA (a torch.cuda.memory snapshot); accepted on the "
            "CPU: false (the trace still records CPU memory: profile_memory)"
        )
