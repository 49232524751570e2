"""Size the FMA peak probe to the device, vkpeak's way: fill every compute unit, then lengthen the work.

A probe sized for a 2-thread CPU says nothing about a GPU with 132 multiprocessors of 64 warps each:
64 workgroups x 1024 steps used under half of an H100's SMs at an eighth of their warp slots and
took 88 us a dispatch. WebGPU does not say how many compute units a device has, so the fill is
measured: the workgroups double while the FLOP rate still rises (by more than FILL_GAIN), which is
where every unit runs at the occupancy it can reach. Then the steps per chain double until one
dispatch takes `target_s` (vkpeak grows its work until a submit takes about 0.8 s; with GPU
timestamps a tenth of that times well). The sized dispatch is checked too (kernels.peak_problem, `timed`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

FILL_GAIN = 1.05  # doubling the workgroups must raise the rate by more than this to count as filling
MAX_ITERATIONS = 1 << 24  # steps per chain; far past any target on a GPU, and a u32 in the shader
MAX_GROWTH = 16  # at most this factor per lengthening step, so a noisy first reading cannot overshoot far


@dataclass(frozen=True)
class Step:
    """One sizing dispatch: its workgroups, steps per chain, seconds and FLOP rate."""

    workgroups: int
    iterations: int
    seconds: float
    flop_per_second: float


@dataclass
class Sizing:
    """Where the sizing ended and every dispatch it timed on the way (for the record)."""

    workgroups: int
    iterations: int
    seconds: float
    steps: list[Step] = field(default_factory=list)
    note: str = ""  # set when a limit stopped the growth before the target

    def as_dict(self) -> dict[str, object]:
        """The sizing as the result record keeps it."""
        return {
            "workgroups": self.workgroups,
            "iterations": self.iterations,
            "dispatch_s": self.seconds,
            "note": self.note,
            "steps": [vars(s) for s in self.steps],
        }


def size_probe(
    seconds_at: Callable[[int, int], float],
    flops_at: Callable[[int, int], float],
    start_workgroups: int,
    start_iterations: int,
    target_s: float,
    max_workgroups: int,
) -> Sizing:
    """Grow (workgroups, iterations) from the start until the device is full and a dispatch takes
    `target_s`. `seconds_at(w, i)` times one dispatch (best of a few); `flops_at(w, i)` is its work."""
    steps: list[Step] = []

    def timed(workgroups: int, iterations: int) -> Step:
        seconds = seconds_at(workgroups, iterations)
        step = Step(workgroups, iterations, seconds, flops_at(workgroups, iterations) / max(seconds, 1e-12))
        steps.append(step)
        return step

    best = timed(min(start_workgroups, max_workgroups), start_iterations)
    while best.seconds < target_s and best.workgroups * 2 <= max_workgroups:
        wider = timed(best.workgroups * 2, best.iterations)
        filling = wider.flop_per_second > best.flop_per_second * FILL_GAIN
        if wider.flop_per_second >= best.flop_per_second:
            best = wider  # more waves never lower the rate of a full device
        if not filling:
            break
    while best.seconds < target_s and best.iterations < MAX_ITERATIONS:
        factor = min(MAX_GROWTH, 2 ** math.ceil(math.log2(max(target_s / max(best.seconds, 1e-12), 2.0))))
        best = timed(best.workgroups, min(best.iterations * factor, MAX_ITERATIONS))
    note = ""
    if best.seconds < target_s:
        note = (
            f"the probe reached {best.seconds * 1e3:.2f} ms a dispatch at its limits "
            f"({best.workgroups} workgroups, {best.iterations} steps), short of {target_s * 1e3:g} ms"
        )
    return Sizing(best.workgroups, best.iterations, best.seconds, steps, note)
