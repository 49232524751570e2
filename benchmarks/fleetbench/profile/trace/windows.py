"""The window a trace summary covers, and which host step each event belongs to.

`steps` is Holistic Trace Analysis' default (hta/common/trace.py, `_filter_irrelevant_gpu_kernels`
with `include_last_profiler_step=False`): when a trace has at least two `ProfilerStep#N`
annotations, keep the host events that start before the last step starts and the device events
those host events launched; the last step is left out because the profiler stops in it, so its
device work is cut short. With fewer than two steps HTA keeps the whole trace, and so do we.
`trace` keeps every event.

One difference on purpose: a device event whose launch is not in the trace (launched before the
profiler started) has no host event to follow, and HTA drops it; here it belongs to the window
when it starts before the cut, because the device was busy with it inside the window.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Literal

from fleetbench.errors import UserError
from fleetbench.profile.trace.load import DeviceEvent, Step

WindowKind = Literal["steps", "trace"]
WINDOWS: tuple[WindowKind, ...] = ("steps", "trace")


@dataclass
class Window:
    """Which events a summary covers: those launched (host events: started) before `cut`, if set."""

    kind: WindowKind
    cut: float | None  # microseconds, the trace's own clock; None: no cut
    steps: list[Step] = field(default_factory=list)  # the steps inside the window
    left_out: list[Step] = field(default_factory=list)

    @property
    def description(self) -> str:
        """Which window and which steps, in words (every summary prints it)."""
        used = _names(self.steps)
        if self.kind == "trace":
            return f"window trace: the whole trace ({used})"
        if self.cut is None:
            return f"window steps: the whole trace ({used}; HTA leaves out a last step only when there are 2 or more)"
        return (
            f"window steps: {used}, and what ran before them; {_names(self.left_out)} left out "
            "(the last step, as HTA does: events launched from its start on)"
        )

    def holds(self, start: float) -> bool:
        """Whether a host event starting at `start` (a device event: launched then) is in the window."""
        return self.cut is None or start < self.cut

    def holds_device(self, event: DeviceEvent) -> bool:
        """Whether a device event is in the window: by its launch, else (launched before the trace) its start."""
        return self.holds(event.start if event.launch is None else event.launch)


def _names(steps: list[Step]) -> str:
    if not steps:
        return "no ProfilerStep annotations"
    if len(steps) <= 3:
        return ", ".join(s.name for s in steps)
    return f"{len(steps)} steps, {steps[0].name} to {steps[-1].name}"


def choose_window(steps: list[Step], kind: str) -> Window:
    """The window of `kind` (steps or trace) over a trace with these steps (sorted by start)."""
    if kind not in WINDOWS:
        raise UserError(f"window {kind!r} is not one of {', '.join(WINDOWS)}")
    if kind == "trace" or len(steps) < 2:
        return Window("trace" if kind == "trace" else "steps", None, list(steps))
    last = steps[-1]
    return Window("steps", last.start, steps[:-1], [last])


def step_of(steps: list[Step], starts: list[float], start: float) -> Step | None:
    """The step whose host span holds `start` (a host event's start, a device event's launch).

    `steps` are sorted by start and do not overlap; `starts` are their starts.
    """
    index = bisect.bisect_right(starts, start) - 1
    if index >= 0 and start < steps[index].end:
        return steps[index]
    return None
