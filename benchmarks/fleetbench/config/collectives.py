"""Section `collectives`: nccl-tests' measurements of the network (`fleetbench collectives`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from fleetbench.config.strict import StrictModel

__all__ = ["COLLECTIVE_OPS", "CollectiveOp", "CollectivesConfig"]

CollectiveOp = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
COLLECTIVE_OPS: tuple[CollectiveOp, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")

# nccl-tests' range is -b 8 -e 1G (bytes); a gloo CPU run of 1 GiB takes minutes, so the CPU stops at 1 MiB.
MAX_BYTES = 1 << 30


class CollectivesConfig(StrictModel):
    """Collectives over message sizes: nccl-tests' `-b`, `-e`, `-f`, `-n` and `-w`, one torchrun rank per device.

    `min_bytes` and `max_bytes` left out take the device's default: 8 B .. 1 GiB with NCCL on GPUs,
    8 B .. 1 MiB with gloo on the CPU (seconds, not minutes).
    """

    ops: list[CollectiveOp] = Field(default=list(COLLECTIVE_OPS), min_length=1, max_length=4)
    min_bytes: int | None = Field(default=None, ge=8, le=MAX_BYTES)
    max_bytes: int | None = Field(default=None, ge=8, le=MAX_BYTES)
    factor: int = Field(default=2, ge=2, le=16, description="each size is the previous times this (nccl-tests -f)")
    iters: int = Field(default=20, ge=1, le=10000, description="timed iterations per size (nccl-tests -n)")
    warmup_iters: int = Field(default=5, ge=0, le=1000, description="untimed iterations first (nccl-tests -w)")
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    nproc: int | None = Field(default=None, ge=1, le=1024, description="ranks on this node (default: GPUs, or 2)")
    nnodes: int = Field(default=1, ge=1, le=4096)
    node_rank: int = Field(default=0, ge=0)
    rdzv_endpoint: str | None = Field(default=None, description="node 0's HOST:PORT when nnodes > 1")
    rdzv_timeout_s: float = Field(default=120.0, gt=0, le=3600)

    @field_validator("ops")
    @classmethod
    def _unique(cls, value: list[CollectiveOp]) -> list[CollectiveOp]:
        if len(set(value)) != len(value):
            raise ValueError("operations must be unique")
        return value

    @model_validator(mode="after")
    def _range(self) -> CollectivesConfig:
        if self.min_bytes is not None and self.max_bytes is not None and self.min_bytes > self.max_bytes:
            raise ValueError(f"min_bytes {self.min_bytes} is above max_bytes {self.max_bytes}")
        return self
