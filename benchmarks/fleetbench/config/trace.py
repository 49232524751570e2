"""The `trace` section: how `fleetbench trace summarize` and `trace diff` read a trace."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from fleetbench.config.strict import StrictModel

__all__ = ["TraceConfig"]


class TraceConfig(StrictModel):
    """Which kernels count as communication (docs/trace.md, "Communication")."""

    comm: Literal["fleetbench", "hta"] = Field(
        default="fleetbench",
        description="fleetbench: kernels by what they do (NCCL/RCCL, DeepEP, all-to-all, NVSHMEM/multimem, custom "
        "all-reduce, collective args); hta: HTA's rule, a name holding `nccl`",
    )
    comm_patterns: dict[str, str] = Field(
        default_factory=dict,
        max_length=64,
        description="rule name -> regular expression (searched in kernel names, any case), added to the table; "
        "a table rule's name replaces that rule",
    )

    @field_validator("comm_patterns")
    @classmethod
    def _compiles(cls, patterns: dict[str, str]) -> dict[str, str]:
        for name, pattern in patterns.items():
            if not re.fullmatch(r"[A-Za-z0-9_]{1,40}", name):
                raise ValueError(f"rule name {name!r}: use 1-40 letters, digits or _")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{name}: {pattern!r} is not a regular expression ({exc})") from None
        return patterns
