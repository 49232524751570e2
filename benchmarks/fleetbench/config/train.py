"""Section `train`: the FSDP2 training benchmark (`fleetbench train`) and its presets.

Model and batch fields default to None, meaning "take the preset's value"; any of them can be set
in a config file or with `--set train.KEY=VALUE`. Cross-field checks that need the world size
(heads divide dim, HSDP shards divide the ranks, ...) run when the trainer resolves its plan
(`fleetbench.train.plan.resolve_plan`), which raises one-line UserErrors.

No torch import here: the CLI and the config loader read this module without loading torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from fleetbench.config.strict import StrictModel

__all__ = [
    "DTYPE_FLAG_VALUES",
    "ENDPOINT_PATTERN",
    "PRESETS",
    "PROFILE_STEPS_ACCEPTED",
    "TEXT_VOCAB",
    "DataKind",
    "ModelFamily",
    "Preset",
    "PresetName",
    "TrainConfig",
    "parse_profile_steps",
]

PresetName = Literal["tiny", "small", "seed", "1b", "llama3-debug", "llama3-8b"]
DataKind = Literal["random", "text"]
# seed: the suite's own block (MultiheadAttention, no positions, SiLU MLP); llama: RoPE, SwiGLU, GQA,
# RMSNorm, causal attention, the architecture llama.cpp, MLX and torchtitan run (train/llama.py).
ModelFamily = Literal["seed", "llama"]
TEXT_VOCAB = 256  # byte-level tokens


@dataclass(frozen=True, kw_only=True)
class Preset:
    """A named model, batch and schedule; a `train` key of the same name overrides a field."""

    dim: int
    """Model width: embedding and residual-stream size."""
    layers: int
    """Transformer blocks."""
    heads: int
    """Attention heads per block; must divide `dim`."""
    ffn_dim: int
    """Hidden size of each block's feed-forward layer."""
    vocab_size: int
    """Token vocabulary; at least TEXT_VOCAB for `data="text"`."""
    seq_len: int
    """Tokens per sequence."""
    batch_size: int
    """Sequences per rank per step, as in the reference script."""
    steps: int
    """Optimiser steps of a run."""
    data: DataKind
    """Random tokens, or byte-level text (Python's own sources)."""
    lr: float
    """Peak AdamW learning rate."""
    warmup_steps: int
    """Linear warmup steps before the peak learning rate."""
    about: str
    """What the preset is for, in one line."""
    model: ModelFamily = "seed"
    """The block family the preset was drawn for (`train.model` overrides it)."""
    kv_heads: int | None = None
    """Key/value heads of the llama family (GQA); None: as many as `heads`."""


PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        dim=128,
        layers=4,
        heads=4,
        ffn_dim=512,
        vocab_size=256,
        seq_len=128,
        batch_size=16,
        steps=100,
        data="text",
        lr=2e-3,
        warmup_steps=10,
        about="CPU default: 0.8M-parameter byte-level model on Python's own sources",
    ),
    "small": Preset(
        dim=512,
        layers=8,
        heads=8,
        ffn_dim=2048,
        vocab_size=32000,
        seq_len=512,
        batch_size=8,
        steps=50,
        data="random",
        lr=3e-4,
        warmup_steps=0,
        about="quick GPU check: 25M non-embedding parameters",
    ),
    "seed": Preset(
        dim=2048,
        layers=12,
        heads=16,
        ffn_dim=8192,
        vocab_size=32000,
        seq_len=1024,
        batch_size=8,
        steps=50,
        data="random",
        lr=3e-4,
        warmup_steps=0,
        about="the reference workload: 12 blocks of dim 2048, 8 x 1024 random tokens per rank",
    ),
    "1b": Preset(
        dim=2048,
        layers=18,
        heads=16,
        ffn_dim=8192,
        vocab_size=32000,
        seq_len=2048,
        batch_size=4,
        steps=50,
        data="random",
        lr=3e-4,
        warmup_steps=0,
        about="about 1.04B parameters (18 blocks of dim 2048)",
    ),
    # torchtitan's llama3 `debugmodel` shape (its config_registry), byte-level text so it learns on the CPU.
    "llama3-debug": Preset(
        model="llama",
        dim=256,
        layers=6,
        heads=16,
        ffn_dim=768,
        vocab_size=2048,
        seq_len=256,
        batch_size=8,
        steps=50,
        data="text",
        lr=8e-4,
        warmup_steps=5,
        about="CPU default of train.model=llama: torchtitan's Llama 3 debug model (6 blocks of dim 256)",
    ),
    # torchtitan's llama3 `8B` (Llama-3-8B): GQA 32/8 heads, SwiGLU hidden 14336, 128256 tokens.
    "llama3-8b": Preset(
        model="llama",
        dim=4096,
        layers=32,
        heads=32,
        kv_heads=8,
        ffn_dim=14336,
        vocab_size=128256,
        seq_len=8192,
        batch_size=1,
        steps=50,
        data="random",
        lr=3e-4,
        warmup_steps=0,
        about="CUDA default of train.model=llama: Llama-3-8B as torchtitan trains it (8192-token sequences)",
    ),
}

# `--dtype` (and `train.mixed_precision` given as a name): the precision policy by name; auto is unset.
DTYPE_FLAG_VALUES: dict[str, bool | None] = {"bf16": True, "fp32": False, "auto": None}

ENDPOINT_PATTERN = re.compile(r"^[A-Za-z0-9._\-\[\]:]+:\d{1,5}$")
PROFILE_STEPS_PATTERN = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")
PROFILE_STEPS_ACCEPTED = "A:B, the first and last step to profile, with 1 <= A <= B <= train.steps (e.g. 3:5)"


def parse_profile_steps(value: object) -> object:
    """`train.profile_steps` as given ("A:B", [A, B] or None) to a pair, before its type and range are checked.

    Raises ValueError for anything else. YAML (a config file, `--set`) reads an unquoted 3:5 as the
    base-60 integer 185, so an integer gets that hint instead of a bare "not A:B".
    """
    if isinstance(value, str):
        match = PROFILE_STEPS_PATTERN.fullmatch(value)
        if match is None:
            raise ValueError(f"expected {PROFILE_STEPS_ACCEPTED}")
        return int(match[1]), int(match[2])
    if isinstance(value, bool):
        raise ValueError(f"expected {PROFILE_STEPS_ACCEPTED}")
    if isinstance(value, int | float):
        raise ValueError(
            f"expected {PROFILE_STEPS_ACCEPTED}; in YAML and --set an unquoted A:B reads as a base-60 "
            "number: quote it ('3:5') or write a list ([3, 5])"
        )
    return value


class TrainConfig(StrictModel):
    """Section `train` of the fleetbench config. None means: the preset's value (or automatic)."""

    preset: PresetName | None = Field(
        default=None, description="unset: automatic by device, seed on CUDA and tiny on the CPU (train/defaults.py)"
    )
    model: ModelFamily | None = Field(
        default=None,
        description="block family: seed (the suite's own) or llama (RoPE, SwiGLU, GQA); unset: the preset's",
    )
    # --- model and batch (None: from the preset) ---
    dim: int | None = Field(default=None, ge=8, le=65536)
    layers: int | None = Field(default=None, ge=1, le=1024)
    heads: int | None = Field(default=None, ge=1, le=1024)
    kv_heads: int | None = Field(default=None, ge=1, le=1024, description="llama: key/value heads (GQA)")
    ffn_dim: int | None = Field(default=None, ge=8, le=262144)
    vocab_size: int | None = Field(default=None, ge=2, le=1_048_576)
    seq_len: int | None = Field(default=None, ge=2, le=131072)
    batch_size: int | None = Field(default=None, ge=1, le=65536, description="sequences per rank per step")
    global_batch_size: int | None = Field(
        default=None,
        ge=1,
        le=2**24,
        description="sequences per step over every rank, split evenly (instead of batch_size): the same "
        "global batch on any number of ranks",
    )
    steps: int | None = Field(default=None, ge=1, le=10_000_000)
    data: DataKind | None = Field(default=None, description="random tokens or byte-level text (Python's sources)")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    # --- optimiser (AdamW) ---
    lr: float | None = Field(default=None, gt=0, le=10)
    warmup_steps: int | None = Field(default=None, ge=0)
    lr_schedule: Literal["constant", "cosine"] = Field(
        default="constant", description="after the linear warmup: constant, or cosine decay to lr_min_ratio x lr"
    )
    lr_min_ratio: float = Field(default=0.1, ge=0, le=1, description="cosine: the final learning rate over lr")
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
    ac_policy: Literal["full", "selective_op"] = Field(
        default="full",
        description="with activation_checkpointing: recompute whole blocks (full) or torchtitan's op-level "
        "selective policy (keep matmul and attention outputs, recompute the rest)",
    )
    compile: bool = False
    float8: Literal["off", "tensorwise", "rowwise"] = Field(
        default="off",
        description="float8 linears through torchao (its recipes); only on GPUs with FP8 in the GPU table",
    )
    grad_accum_steps: int = Field(
        default=1, ge=1, le=4096, description="micro-batches of batch_size per optimiser step (gradient accumulation)"
    )
    mixed_precision: bool | None = Field(
        default=None,
        description="bf16 params, fp32 reduce (also bf16/fp32/auto, as --dtype); unset: on CUDA under FSDP2, off on CPU",
    )
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
    # --- profiling (torch.profiler inside the FSDP2 loop, every rank) ---
    profile_steps: tuple[int, int] | None = Field(
        default=None, description="A:B: trace steps A..B on every rank (left out of tokens/s and MFU)"
    )
    profile_memory_snapshot: bool = Field(
        default=False, description="CUDA: also a torch.cuda memory snapshot of the profiled steps"
    )

    @field_validator("rdzv_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not ENDPOINT_PATTERN.fullmatch(value):
            raise ValueError("expected HOST:PORT, e.g. 10.0.0.1:29400")
        if value is not None and not 0 <= int(value.rsplit(":", 1)[1]) <= 65535:
            raise ValueError("port must be 0-65535")
        return value

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _dtype_names(cls, value: object) -> object:
        return DTYPE_FLAG_VALUES.get(value, value) if isinstance(value, str) else value

    @field_validator("profile_steps", mode="before")
    @classmethod
    def _profile_steps_form(cls, value: object) -> object:
        return parse_profile_steps(value)

    @field_validator("profile_steps")
    @classmethod
    def _profile_steps_order(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and not 1 <= value[0] <= value[1]:
            raise ValueError(f"expected {PROFILE_STEPS_ACCEPTED}")
        return value
