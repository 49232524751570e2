"""Too noisy to judge? The load a comparison's processes ran under and their spread (pyperf's "unstable").

Every run's record keeps the load average and, where /proc/stat has it, the CPU time stolen by the
hypervisor during its process (`Load`, results/load.py); `compare --rounds` also reads them around each
process it starts. A figure of a comparison between processes is "unstable", with no verdict and what
to do, when

- the spread of either side's per-process figures is above `compare.unstable_spread_pct` (the robust
  standard deviation of their logs, 1.4826 x MAD, in percent; pyperf warns above 10 % of the mean), or
- the median load average during the processes is above `compare.max_load_per_core` x the cores
  this process may use (other work was waiting for the CPUs the benchmark ran on), or
- the median share of stolen CPU time is above `compare.max_steal_pct`.

A noisy run then says so, instead of printing a confident size that is the neighbours', not the code's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fleetbench.results.load import Load

MAD_TO_SIGMA = 1.4826
ADVICE = "run it on a quiet machine (stop other work, pin it with taskset), or raise --rounds"


@dataclass(frozen=True)
class Limits:
    """When a comparison between processes is too noisy to judge (the compare config section)."""

    spread_pct: float = 10.0
    load_per_core: float = 1.0
    steal_pct: float = 5.0


def spread_pct(samples: Sequence[float]) -> float:
    """The robust spread of samples as a factor: 1.4826 x MAD of their logs, in percent."""
    import numpy as np

    data = np.asarray([s for s in samples if s > 0], dtype=float)
    if len(data) < 3:
        return 0.0
    logs = np.log(data / np.max(data))
    return float(MAD_TO_SIGMA * np.median(np.abs(logs - np.median(logs))) * 100.0)


def load_reason(loads: Sequence[Load], limits: Limits) -> str:
    """Why the machine was too busy during the processes, or ""."""
    if not loads:
        return ""
    per_core = sorted(load.load1 / max(1, load.cores) for load in loads)[len(loads) // 2]
    if per_core > limits.load_per_core:
        return (
            f"load average {per_core * loads[0].cores:.1f} on {loads[0].cores} cores during the processes "
            f"(above {limits.load_per_core:g} per core)"
        )
    steals = sorted(load.steal_pct for load in loads if load.steal_pct is not None)
    if steals and (steal := steals[len(steals) // 2]) > limits.steal_pct:
        return f"{steal:.1f} % of the CPU time stolen by the hypervisor (above {limits.steal_pct:g} %)"
    return ""


def unstable(base: Sequence[float], new: Sequence[float], loads: Sequence[Load], limits: Limits) -> str:
    """Why a figure compared between processes is too noisy to judge ("" when it is not), with what to do."""
    reasons = []
    worst = max(spread_pct(base), spread_pct(new))
    if math.isfinite(worst) and worst > limits.spread_pct:
        reasons.append(f"the processes' figures spread by {worst:.1f} % (above {limits.spread_pct:g} %)")
    if load := load_reason(loads, limits):
        reasons.append(load)
    if not reasons:
        return ""
    return f"unstable: {'; '.join(reasons)}: {ADVICE}"
