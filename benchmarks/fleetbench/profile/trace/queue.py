"""How far ahead the host ran: HTA's queue length per stream, and launch delays step by step.

Queue length (hta/analyzers/trace_counters.py, `get_queue_length_time_series`): per stream, the
launches not yet started: +1 when the runtime call that launches an event starts, -1 when the event
starts on the device, over the events whose launch is in the trace, in time order. HTA's summary
describes the values the series takes at its changes (not weighted by time); here its count, mean,
median and maximum. A queue that stays near 0 is a device waiting for its host.

Launch statistics over time (after HTA's `get_cuda_kernel_launch_stats`): per ProfilerStep of the
window, the launches the step made, their launch-to-start delay (median, p90, max), and HTA's
outlier counts: delays above 100 µs (`launch_delay_cutoff`) and runtime calls longer than 50 µs
(`runtime_cutoff`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from fleetbench.profile.trace.load import US, DeviceEvent
from fleetbench.profile.trace.windows import Window, step_of

LAUNCH_DELAY_CUTOFF_US = 100.0  # HTA's get_cuda_kernel_launch_stats defaults, in its µs
RUNTIME_CUTOFF_US = 50.0


@dataclass
class StreamQueue:
    """HTA's queue-length summary of one stream."""

    device: str
    stream: str
    changes: int  # values in the series (two per launched event)
    mean: float
    median: float
    max: int


@dataclass
class StepLaunches:
    """Launches of one ProfilerStep and how long they waited to start."""

    step: str
    launches: int
    delay_median_s: float
    delay_p90_s: float
    delay_max_s: float
    delay_outliers: int  # launch-to-start delay above LAUNCH_DELAY_CUTOFF_US
    runtime_outliers: int  # runtime calls longer than RUNTIME_CUTOFF_US


def queue_lengths(events: list[DeviceEvent]) -> list[StreamQueue]:
    """Per stream: the queue-length series of its launched events, summarised as HTA does."""
    changes: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    for e in events:
        if e.launch is not None:
            changes[(e.device, e.stream)].extend(((e.launch, 1), (e.start, -1)))
    out = []
    for (device, stream), series in sorted(changes.items()):
        series.sort(key=lambda change: change[0])  # a stable sort: a launch before a start at one time
        lengths = []
        length = 0
        for _, step in series:
            length += step
            lengths.append(length)
        out.append(
            StreamQueue(
                device, stream, len(lengths), statistics.fmean(lengths), statistics.median(lengths), max(lengths)
            )
        )
    return out


def step_launches(events: list[DeviceEvent], window: Window) -> list[StepLaunches]:
    """Per step of the window, the launch delays of the events it launched, with HTA's outlier counts."""
    if not window.steps:
        return []
    starts = [s.start for s in window.steps]
    by_step: dict[str, list[DeviceEvent]] = defaultdict(list)
    for e in events:
        if e.launch is not None:
            step = step_of(window.steps, starts, e.launch)
            if step is not None:
                by_step[step.name].append(e)
    out = []
    for step in window.steps:
        launched = by_step.get(step.name, [])
        if not launched:
            continue
        delays = sorted(e.start - e.launch for e in launched if e.launch is not None)
        out.append(
            StepLaunches(
                step=step.name,
                launches=len(delays),
                delay_median_s=statistics.median(delays) * US,
                delay_p90_s=delays[min(len(delays) - 1, int(0.9 * len(delays)))] * US,
                delay_max_s=delays[-1] * US,
                delay_outliers=sum(1 for d in delays if d > LAUNCH_DELAY_CUTOFF_US),
                runtime_outliers=sum(1 for e in launched if e.launch_dur > RUNTIME_CUTOFF_US),
            )
        )
    return out
