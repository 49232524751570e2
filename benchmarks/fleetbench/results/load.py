"""What the machine was doing while one process ran: its load average and the CPU time the hypervisor stole.

Each run reads /proc/stat when it starts and when it ends and keeps the result in its record (`load`),
so that a comparison of stored processes (a baseline of `noise`, `compare --rounds`) can say when the
machine was too busy to judge (compare/stability.py), as pyperf does from its own metadata.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

PROC_STAT = Path("/proc/stat")


class Load(BaseModel):
    """The 1-minute load average at the process's end, the share of CPU time stolen during it (None where
    /proc/stat has no steal column), and the cores the process could use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    load1: float = Field(ge=0, allow_inf_nan=False)
    steal_pct: float | None = Field(default=None, ge=0, le=100, allow_inf_nan=False)
    cores: int = Field(ge=1, strict=True)


def cpu_times(stat: Path = PROC_STAT) -> tuple[float, float] | None:
    """(steal, total) jiffies of all CPUs from /proc/stat; None where it has no steal column."""
    try:
        first = stat.read_text(encoding="ascii").splitlines()[0].split()
        values = [float(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, IndexError, UnicodeDecodeError, ValueError):
        return None
    if first[:1] != ["cpu"] or len(values) < 8:
        return None
    return values[7], sum(values)


def cores() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load_between(before: tuple[float, float] | None, after: tuple[float, float] | None) -> Load:
    """The Load of a process from /proc/stat read before and after it, and the load average now."""
    steal = None
    if before is not None and after is not None and after[1] > before[1]:
        steal = min(100.0, max(0.0, 100.0 * (after[0] - before[0]) / (after[1] - before[1])))
    return Load(load1=os.getloadavg()[0], steal_pct=steal, cores=cores())
