"""The `train` config section and its presets, resolved into one plan the trainer follows.

Model and batch fields default to None, meaning "take the preset's value"; any of them can be set
in a config file or with `--set train.KEY=VALUE`. Cross-field checks (heads divide dim, HSDP
shards divide the ranks, ...) run in `resolve_plan`, which raises one-line UserErrors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleetbench.errors import UserError

PresetName = Literal["tiny", "small", "seed", "1b"]
DataKind = Literal["random", "text"]
TEXT_VOCAB = 256  # byte-level tokens


@dataclass(frozen=True)
class Preset:
    dim: int
    layers: int
    heads: int
    ffn_dim: int
    vocab_size: int
    seq_len: int
    batch_size: int  # per rank, as in the reference script
    steps: int
    data: DataKind
    lr: float
    warmup_steps: int
    about: str


PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        128,
        4,
        4,
        512,
        256,
        128,
        8,
        100,
        "text",
        2e-3,
        10,
        "CPU default: 0.8M-parameter byte-level model on Python's own sources",
    ),
    "small": Preset(
        512, 8, 8, 2048, 32000, 512, 8, 50, "random", 3e-4, 0, "quick GPU check: 25M non-embedding parameters"
    ),
    "seed": Preset(
        2048,
        12,
        16,
        8192,
        32000,
        1024,
        8,
        50,
        "random",
        3e-4,
        0,
        "the reference workload: 12 blocks of dim 2048, 8 x 1024 random tokens per rank",
    ),
    "1b": Preset(
        2048, 18, 16, 8192, 32000, 2048, 4, 50, "random", 3e-4, 0, "about 1.04B parameters (18 blocks of dim 2048)"
    ),
}

ENDPOINT_PATTERN = re.compile(r"^[A-Za-z0-9._\-\[\]:]+:\d{1,5}$")


class TrainConfig(BaseModel):
    """Section `train` of the fleetbench config. None means: the preset's value (or automatic)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    preset: PresetName = "tiny"
    # --- model and batch (None: from the preset) ---
    dim: int | None = Field(default=None, ge=8, le=65536)
    layers: int | None = Field(default=None, ge=1, le=1024)
    heads: int | None = Field(default=None, ge=1, le=1024)
    ffn_dim: int | None = Field(default=None, ge=8, le=262144)
    vocab_size: int | None = Field(default=None, ge=2, le=1_048_576)
    seq_len: int | None = Field(default=None, ge=2, le=131072)
    batch_size: int | None = Field(default=None, ge=1, le=65536, description="sequences per rank per step")
    steps: int | None = Field(default=None, ge=1, le=10_000_000)
    data: DataKind | None = Field(default=None, description="random tokens or byte-level text (Python's sources)")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    # --- optimiser (AdamW) ---
    lr: float | None = Field(default=None, gt=0, le=10)
    warmup_steps: int | None = Field(default=None, ge=0)
    weight_decay: float = Field(default=0.01, ge=0, le=1)
    grad_clip: float | None = Field(default=None, gt=0, description="max grad norm; unset: no clipping")
    # --- device and process group ---
    device: Literal["auto", "cpu", "cuda"] = "auto"
    backend: Literal["auto", "nccl", "gloo"] = "auto"
    threads: int | None = Field(default=None, ge=1, le=1024, description="CPU threads per rank")
    collective_timeout_s: float = Field(default=600, gt=0, le=86400)
    # --- FSDP2 ---
    fsdp: bool = Field(default=True, description="false: one unsharded process (the baseline of perf checks)")
    reshard_after_forward: bool = True
    activation_checkpointing: bool = False
    compile: bool = False
    mixed_precision: bool | None = Field(default=None, description="bf16 params, fp32 reduce; unset: on for CUDA")
    meta_init: bool = True
    hsdp: bool = Field(default=False, description="2-D mesh: replicate across groups, shard within a group")
    hsdp_shard_size: int | None = Field(default=None, ge=1, description="ranks per shard group; unset: per node")
    # --- logging, memory, MFU ---
    log_every: int = Field(default=1, ge=1)
    plot: bool = True
    max_memory_gb: float | None = Field(default=None, gt=0, description="per-rank memory cap (OOM beyond it)")
    peak_flops: float | None = Field(default=None, gt=0, description="peak FLOP/s per device for MFU")
    # --- checkpoints ---
    checkpoint_every: int = Field(default=0, ge=0, description="0: no periodic checkpoints")
    checkpoint_final: bool = False
    checkpoint_dir: Path | None = Field(default=None, description="default: <results_dir>/<run_id>/checkpoints")
    keep_checkpoints: int = Field(default=2, ge=0, description="0: keep all")
    resume: bool = False
    # --- launch (torchrun) ---
    nproc: int | None = Field(default=None, ge=1, le=1024, description="ranks per node; unset: GPUs, or 2 on CPU")
    nnodes: int = Field(default=1, ge=1, le=65536)
    node_rank: int = Field(default=0, ge=0)
    rdzv_endpoint: str | None = Field(default=None, description="HOST:PORT of node 0's c10d rendezvous")
    rdzv_timeout_s: float = Field(default=120, gt=0, le=3600)
    max_restarts: int = Field(default=0, ge=0, le=100)

    @field_validator("rdzv_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not ENDPOINT_PATTERN.fullmatch(value):
            raise ValueError("expected HOST:PORT, e.g. 10.0.0.1:29400")
        if value is not None and not 0 <= int(value.rsplit(":", 1)[1]) <= 65535:
            raise ValueError("port must be 0-65535")
        return value


@dataclass(frozen=True)
class ModelShape:
    dim: int
    layers: int
    heads: int
    ffn_dim: int
    vocab_size: int

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


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

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.world_size

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len


def _pick(value: int | None, default: int) -> int:
    return default if value is None else value


def resolve_plan(cfg: TrainConfig, world_size: int) -> TrainPlan:
    preset = PRESETS[cfg.preset]
    shape = ModelShape(
        dim=_pick(cfg.dim, preset.dim),
        layers=_pick(cfg.layers, preset.layers),
        heads=_pick(cfg.heads, preset.heads),
        ffn_dim=_pick(cfg.ffn_dim, preset.ffn_dim),
        vocab_size=_pick(cfg.vocab_size, preset.vocab_size),
    )
    data: DataKind = cfg.data or preset.data
    plan = TrainPlan(
        preset=cfg.preset,
        shape=shape,
        seq_len=_pick(cfg.seq_len, preset.seq_len),
        batch_size=_pick(cfg.batch_size, preset.batch_size),
        steps=_pick(cfg.steps, preset.steps),
        data=data,
        lr=preset.lr if cfg.lr is None else cfg.lr,
        warmup_steps=_pick(cfg.warmup_steps, preset.warmup_steps),
        world_size=world_size,
    )
    check_plan(cfg, plan)
    return plan


def check_plan(cfg: TrainConfig, plan: TrainPlan) -> None:
    shape = plan.shape
    if shape.dim % shape.heads:
        raise UserError(
            f"train.heads={shape.heads} does not divide train.dim={shape.dim}; "
            f"accepted: a head count that divides dim (preset {plan.preset})"
        )
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


def check_launch(cfg: TrainConfig) -> None:
    """Checks of how the trainer runs (not of the model plan other tools also read)."""
    if cfg.mixed_precision and not cfg.fsdp:
        raise UserError(
            "train.mixed_precision=true needs train.fsdp=true (FSDP2's MixedPrecisionPolicy); "
            "accepted with fsdp=false: mixed_precision=false"
        )
