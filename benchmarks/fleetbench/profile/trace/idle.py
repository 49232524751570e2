"""Why a device sat idle: HTA's idle-time breakdown per stream, and the device's wait for the host.

HTA (hta/analyzers/breakdown_analysis.py, `_analyze_idle_time_for_stream`): on one stream, with
its events sorted by start, the gap before each event (its start minus the previous event's end)
is idle time of one category:
  - host wait: the event's launch (its runtime call) started after the previous event ended: the
    device had nothing queued because the CPU had not issued it yet;
  - kernel wait: otherwise, a gap shorter than `consecutive_kernel_delay` (HTA 0.5: 30 µs in effect;
    its docstring says 30 ns, but its times are µs):
    the usual delay between back-to-back kernels;
  - other: the rest, e.g. waiting on another stream's event or a synchronisation.
The first event of a stream has no gap; an event without a launch in the trace is never host wait.
A stream's gaps lie between its first start and last end, so each of its figures is bounded by
the window; a gap of overlapping events (negative) counts as zero.

The device's own figure, "idle waiting for the host", is not the sum over streams (on HTA's NCCL
trace that sum read 737 ms against a 436 ms window, streams waiting side by side): it is the time
no stream of the device ran anything while at least one stream was in a host-wait gap, so it is at
most the device's idle time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from fleetbench.profile.trace.breakdown import Interval, length, merge, subtract
from fleetbench.profile.trace.load import US, DeviceEvent

KERNEL_WAIT_US = 30.0  # HTA 0.5's consecutive_kernel_delay default, 30 in its time unit: µs (its docstring says ns)
CATEGORIES = ("host_wait", "kernel_wait", "other")


@dataclass
class StreamIdle:
    """Idle time of one stream in the window, by HTA's categories; seconds."""

    device: str
    stream: str
    events: int
    span_s: float
    idle_s: float
    host_wait_s: float
    kernel_wait_s: float
    other_s: float


@dataclass
class IdleBreakdown:
    """Per stream, and per device the time idle while a stream waited for the host."""

    streams: list[StreamIdle]
    host_wait_s: dict[str, float]  # device -> idle time with a stream waiting for the host


def idle_breakdown(events: list[DeviceEvent], kernel_wait_us: float = KERNEL_WAIT_US) -> IdleBreakdown:
    """HTA's idle-time breakdown of each stream of `events`, and each device's bounded host wait."""
    by_stream: dict[tuple[str, str], list[DeviceEvent]] = defaultdict(list)
    for e in events:
        by_stream[(e.device, e.stream)].append(e)
    streams: list[StreamIdle] = []
    host_gaps: dict[str, list[Interval]] = defaultdict(list)
    for (device, stream), evs in sorted(by_stream.items()):
        evs.sort(key=lambda e: e.start)
        sums = dict.fromkeys(CATEGORIES, 0.0)
        previous = evs[0]
        for event in evs[1:]:
            gap = event.start - previous.end
            if event.launch is not None and event.launch > previous.end:
                category = "host_wait"
                if gap > 0:
                    host_gaps[device].append((previous.end, event.start))
            elif gap < kernel_wait_us:
                category = "kernel_wait"
            else:
                category = "other"
            sums[category] += max(gap, 0.0)
            previous = event
        streams.append(
            StreamIdle(
                device=device,
                stream=stream,
                events=len(evs),
                span_s=(max(e.end for e in evs) - evs[0].start) * US,
                idle_s=sum(sums.values()) * US,
                host_wait_s=sums["host_wait"] * US,
                kernel_wait_s=sums["kernel_wait"] * US,
                other_s=sums["other"] * US,
            )
        )
    return IdleBreakdown(streams, _device_host_wait(events, host_gaps))


def _device_host_wait(events: list[DeviceEvent], host_gaps: dict[str, list[Interval]]) -> dict[str, float]:
    """Per device: the time inside some stream's host-wait gap during which no stream ran anything."""
    busy: dict[str, list[Interval]] = defaultdict(list)
    for e in events:
        busy[e.device].append((e.start, e.end))
    out = {}
    for device, intervals in busy.items():
        gaps = merge(host_gaps.get(device, ()))
        out[device] = length(subtract(gaps, merge(intervals))) * US
    return out
