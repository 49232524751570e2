"""Section `probe`: the timed matmul and copy-bandwidth probe (`fleetbench probe`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from fleetbench.config.strict import StrictModel

__all__ = ["CopyMiB", "ProbeConfig", "Size"]

Size = Annotated[int, Field(ge=16, le=16384)]
CopyMiB = Annotated[int, Field(ge=1, le=4096)]


class ProbeConfig(StrictModel):
    """The timed matmul and copy-bandwidth probe: a short real workload through the telemetry path."""

    matmul_sizes: list[Size] = Field(default=[512, 1024], min_length=1, max_length=8)
    copy_mib: list[CopyMiB] = Field(default=[64], min_length=0, max_length=8)
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    min_run_time_s: float = Field(default=0.3, gt=0, le=60)
    threads: int | None = Field(default=None, ge=1, le=1024)

    @field_validator("matmul_sizes", "copy_mib")
    @classmethod
    def _unique(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError("values must be unique")
        return value
