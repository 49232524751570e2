"""Summarise any PyTorch profiler Chrome trace (.json or .json.gz): where the device time went.

Temporal breakdown per rank and device, as Holistic Trace Analysis defines it
(hta/analyzers/breakdown_analysis.py, hta/utils/utils.py):
  - device events are kernels, memcpys and memsets (`cat` kernel / gpu_memcpy / gpu_memset);
    a name containing `nccl` is communication, `Memcpy`/`Memset` (or those categories) is memory,
    anything else computation. `cuda_sync` events are waits, not work, and are left out;
  - the span runs from the first event's start to the last event's end;
  - idle = span minus the union of all event intervals (overlaps across streams merged);
  - compute = union of computation intervals; HTA's non-compute time is split here into
    communication not hidden under compute, then memory not hidden under either, so
    compute + communication + memory + idle = span exactly.
Also: top kernels and top CPU ops (self and inclusive time), CPU launch gaps (launch delay from the
runtime call to the kernel start via `correlation`, HTA's host-wait idle time, kernels shorter than
their launch call) and how busy each CPU thread is with ops. A trace without device events (a CPU
profile) is summarised on the CPU side, and says so.
"""

from __future__ import annotations

import gzip
import itertools
import json
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.errors import UserError
from fleetbench.profile.names import label, short_name

US = 1e-6  # Chrome trace timestamps and durations are microseconds
DEVICE_CATEGORIES = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "memcpy": "memcpy",
    "memset": "memset",
}
RUNTIME_CATEGORIES = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
CPU_OP_CATEGORIES = {"cpu_op", "operator"}

Interval = tuple[float, float]


def kernel_type(name: str, category: str) -> str:
    """HTA's kernel types: communication, memory, computation."""
    if "nccl" in name.lower():
        return "communication"
    if category in ("memcpy", "memset") or "Memcpy" in name or "Memset" in name:
        return "memory"
    return "computation"


def merge(intervals: list[Interval]) -> list[Interval]:
    """The union of `intervals`, as sorted, non-overlapping intervals."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def length(intervals: list[Interval]) -> float:
    """Total length of `intervals` (merge them first when they may overlap)."""
    return sum(end - start for start, end in intervals)


@dataclass
class DeviceBreakdown:
    """HTA's temporal breakdown of one device; every time in seconds."""

    rank: int
    device: str
    events: int
    span_s: float
    busy_s: float
    compute_s: float
    communication_s: float  # communication not overlapped by compute
    memory_s: float  # memcpy/memset not overlapped by compute or communication
    idle_s: float
    communication_total_s: float
    comm_compute_overlap_s: float

    @property
    def shares(self) -> dict[str, float]:
        """Compute, communication, memory and idle as fractions of the span; they add up to 1."""
        span = self.span_s or 1.0
        return {
            "compute": self.compute_s / span,
            "communication": self.communication_s / span,
            "memory": self.memory_s / span,
            "idle": self.idle_s / span,
        }


@dataclass
class NameStat:
    """Calls and time of one kernel or CPU op name, summed over the trace."""

    name: str
    label: str
    short: str
    count: int
    total_s: float
    self_s: float | None = None
    share: float | None = None  # of the device's busy time (kernels) or of all op self time


@dataclass
class LaunchStats:
    """How the host kept up with the device: launch-to-start delays and the device's wait for the host."""

    launches: int
    delay_median_s: float
    delay_p90_s: float
    delay_max_s: float
    host_wait_s: float  # device idle while the host had not issued the next launch yet (HTA)
    short_kernels: int  # kernels that ran shorter than their launch call


@dataclass
class ThreadBusy:
    """How much of one CPU thread's span its ops covered."""

    pid: str
    tid: str
    span_s: float
    ops_s: float

    @property
    def busy_share(self) -> float:
        """Time inside ops over the thread's span (0 for an empty span)."""
        return self.ops_s / self.span_s if self.span_s else 0.0


@dataclass
class TraceSummary:
    """Everything `summarize_trace` found in one trace; `note` says what the trace lacked, if anything."""

    path: str
    rank: int
    device_names: list[str]
    has_device_events: bool
    note: str
    devices: list[DeviceBreakdown] = field(default_factory=list)
    top_kernels: list[NameStat] = field(default_factory=list)
    top_ops: list[NameStat] = field(default_factory=list)
    launch: LaunchStats | None = None
    cpu_threads: list[ThreadBusy] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the derived shares that `asdict` leaves out."""
        data = asdict(self)
        for device, raw in zip(self.devices, data["devices"], strict=True):
            raw["shares"] = device.shares
        for thread, raw in zip(self.cpu_threads, data["cpu_threads"], strict=True):
            raw["busy_share"] = thread.busy_share
        return data


def load_trace(path: Path) -> dict[str, Any]:
    """The trace's JSON object (a bare event array is wrapped as `traceEvents`).

    Raises UserError when the file is missing, unreadable or not a Chrome trace.
    """
    if not path.is_file():
        raise UserError(f"trace {path} not found; pass a PyTorch profiler Chrome trace (.json or .json.gz)")
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                data = json.load(handle)
        else:
            with path.open(encoding="utf-8") as handle:
                data = json.load(handle)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(
            f"trace {path} is not a readable Chrome trace JSON ({exc}); "
            "expected the .json or .json.gz that torch.profiler exports"
        ) from None
    if isinstance(data, list):  # the JSON Array Format of the trace-event spec
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise UserError(f"trace {path} has no traceEvents list; expected a PyTorch profiler Chrome trace")
    return data


def _complete_events(events: list[Any]) -> list[dict[str, Any]]:
    out = []
    for event in events:
        if isinstance(event, dict) and event.get("ph") == "X":
            try:
                float(event["ts"])
                float(event.get("dur", 0))
            except (KeyError, TypeError, ValueError):
                continue
            out.append(event)
    return out


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def summarize_trace(path: Path, top: int = 15) -> TraceSummary:
    """Breakdown per device, the `top` kernels and CPU ops, launch gaps and thread load of one trace."""
    data = load_trace(path)
    events = _complete_events(data["traceEvents"])
    info = data.get("distributedInfo")
    rank = int(info.get("rank", 0)) if isinstance(info, dict) else 0
    props = data.get("deviceProperties")
    device_names = [str(p.get("name")) for p in props if isinstance(p, dict)] if isinstance(props, list) else []

    device_events = [e for e in events if str(e.get("cat", "")).lower() in DEVICE_CATEGORIES]
    cpu_ops = [e for e in events if str(e.get("cat", "")).lower() in CPU_OP_CATEGORIES]
    summary = TraceSummary(
        path=str(path),
        rank=rank,
        device_names=device_names,
        has_device_events=bool(device_events),
        note=""
        if device_events
        else "no GPU events in this trace (a CPU-only profile): no device time breakdown; CPU ops below",
    )
    if device_events:
        summary.devices = _breakdowns(device_events, rank)
        summary.top_kernels = _top_kernels(device_events, summary.devices, top)
        summary.launch = _launch_stats(device_events, events)
    summary.top_ops = _top_ops(cpu_ops, top)
    summary.cpu_threads = _thread_busy(cpu_ops)
    if not device_events and not cpu_ops:
        summary.note = "no GPU events and no CPU ops in this trace: nothing to summarise"
    return summary


def _device_of(event: dict[str, Any]) -> str:
    args = _args(event)
    return str(args.get("device", event.get("pid", "?")))


def _breakdowns(device_events: list[dict[str, Any]], rank: int) -> list[DeviceBreakdown]:
    by_device: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in device_events:
        by_device[_device_of(event)].append(event)
    out = []
    for device, evs in sorted(by_device.items()):
        kinds: dict[str, list[Interval]] = defaultdict(list)
        for e in evs:
            start = float(e["ts"])
            interval = (start, start + float(e.get("dur", 0)))
            kinds[kernel_type(str(e.get("name", "")), DEVICE_CATEGORIES[str(e["cat"]).lower()])].append(interval)
        every = merge([i for ints in kinds.values() for i in ints])
        span = every[-1][1] - every[0][0]
        busy = length(every)
        compute = length(merge(kinds["computation"]))
        comm_total = length(merge(kinds["communication"]))
        comm_or_compute = length(merge(kinds["computation"] + kinds["communication"]))
        out.append(
            DeviceBreakdown(
                rank=rank,
                device=device,
                events=len(evs),
                span_s=span * US,
                busy_s=busy * US,
                compute_s=compute * US,
                communication_s=(comm_or_compute - compute) * US,
                memory_s=(busy - comm_or_compute) * US,
                idle_s=(span - busy) * US,
                communication_total_s=comm_total * US,
                comm_compute_overlap_s=(compute + comm_total - comm_or_compute) * US,
            )
        )
    return out


def _top_kernels(device_events: list[dict[str, Any]], devices: list[DeviceBreakdown], top: int) -> list[NameStat]:
    totals: dict[str, list[float]] = defaultdict(list)
    for e in device_events:
        totals[str(e.get("name", ""))].append(float(e.get("dur", 0)) * US)
    busy = sum(d.busy_s for d in devices) or 1.0
    stats = [
        NameStat(
            name=name,
            label=label(name),
            short=short_name(name),
            count=len(durs),
            total_s=sum(durs),
            share=sum(durs) / busy,
        )
        for name, durs in totals.items()
    ]
    return sorted(stats, key=lambda s: s.total_s, reverse=True)[:top]


def _self_times(cpu_ops: list[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """Each op with its self time: its duration minus that of the ops nested directly in it."""
    by_thread: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in cpu_ops:
        by_thread[(str(e.get("pid")), str(e.get("tid")))].append(e)
    out: list[tuple[dict[str, Any], float]] = []
    for evs in by_thread.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
        stack: list[list[Any]] = []  # [event, end, children time]
        for e in evs:
            start, dur = float(e["ts"]), float(e.get("dur", 0))
            while stack and stack[-1][1] <= start:
                done = stack.pop()
                out.append((done[0], float(done[0].get("dur", 0)) - done[2]))
            if stack:
                stack[-1][2] += dur
            stack.append([e, start + dur, 0.0])
        while stack:
            done = stack.pop()
            out.append((done[0], float(done[0].get("dur", 0)) - done[2]))
    return out


def _top_ops(cpu_ops: list[dict[str, Any]], top: int) -> list[NameStat]:
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for event, self_us in _self_times(cpu_ops):
        row = totals[str(event.get("name", ""))]
        row[0] += 1
        row[1] += float(event.get("dur", 0)) * US
        row[2] += max(self_us, 0.0) * US
    all_self = sum(row[2] for row in totals.values()) or 1.0
    stats = [
        NameStat(
            name=name,
            label=label(name),
            short=short_name(name),
            count=int(row[0]),
            total_s=row[1],
            self_s=row[2],
            share=row[2] / all_self,
        )
        for name, row in totals.items()
    ]
    return sorted(stats, key=lambda s: s.self_s or 0.0, reverse=True)[:top]


def _launch_stats(device_events: list[dict[str, Any]], events: list[dict[str, Any]]) -> LaunchStats | None:
    runtime = {}
    for e in events:
        if str(e.get("cat", "")).lower() in RUNTIME_CATEGORIES and "correlation" in _args(e):
            runtime[_args(e)["correlation"]] = e
    delays: list[float] = []
    short = 0
    host_wait = 0.0
    by_stream: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in device_events:
        by_stream[(_device_of(e), str(_args(e).get("stream", e.get("tid"))))].append(e)
        call = runtime.get(_args(e).get("correlation"))
        if call is None:
            continue
        delays.append((float(e["ts"]) - float(call["ts"])) * US)
        if str(e["cat"]).lower() == "kernel" and float(e.get("dur", 0)) < float(call.get("dur", 0)):
            short += 1
    if not delays:
        return None
    for evs in by_stream.values():
        evs.sort(key=lambda e: float(e["ts"]))
        for prev, cur in itertools.pairwise(evs):
            prev_end = float(prev["ts"]) + float(prev.get("dur", 0))
            call = runtime.get(_args(cur).get("correlation"))
            if call is not None and float(call["ts"]) > prev_end and float(cur["ts"]) > prev_end:
                host_wait += (float(cur["ts"]) - prev_end) * US
    ordered = sorted(delays)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return LaunchStats(
        launches=len(delays),
        delay_median_s=statistics.median(ordered),
        delay_p90_s=p90,
        delay_max_s=ordered[-1],
        host_wait_s=host_wait,
        short_kernels=short,
    )


def _thread_busy(cpu_ops: list[dict[str, Any]]) -> list[ThreadBusy]:
    by_thread: dict[tuple[str, str], list[Interval]] = defaultdict(list)
    for e in cpu_ops:
        start = float(e["ts"])
        by_thread[(str(e.get("pid")), str(e.get("tid")))].append((start, start + float(e.get("dur", 0))))
    out = []
    for (pid, tid), intervals in by_thread.items():
        merged = merge(intervals)
        out.append(ThreadBusy(pid=pid, tid=tid, span_s=(merged[-1][1] - merged[0][0]) * US, ops_s=length(merged) * US))
    return sorted(out, key=lambda t: t.ops_s, reverse=True)
