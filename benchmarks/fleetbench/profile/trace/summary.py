"""Summarise any PyTorch profiler Chrome trace (.json or .json.gz): where the device time went.

Per rank and device, over a window of the trace (`fleetbench.profile.trace.windows`; by default
HTA's: the ProfilerStep windows without the last step) and per ProfilerStep:
  - the temporal breakdown as Holistic Trace Analysis defines it (compute, communication not
    hidden by compute, memory copies not hidden by either, idle; `trace.breakdown`) and HTA's
    communication-computation overlap;
  - top kernels and top CPU ops (self and inclusive time);
  - CPU launch gaps: launch delay from the runtime call to the kernel start via `correlation`,
    HTA's host-wait idle time, kernels shorter than their launch call; how busy each CPU thread is.
A trace without device events (a CPU profile) gets the same breakdown over its CPU threads, with
the host side of collectives (gloo, c10d) as communication, and says so.

Where this trace's figures would differ from HTA's, `hta_differences` says why (on purpose):
HTA rounds fractional-µs timestamps inward to whole µs (a short memcpy can vanish into idle),
counts `cuda_sync` events (host waits) as device work, and drops device events whose launch is not
in the trace (launched before the profiler started), which ran inside the window all the same.
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.profile.names import label, short_name
from fleetbench.profile.trace.breakdown import (
    DEFAULT_RULES,
    HTA_RULES,
    DeviceBreakdown,
    cpu_breakdown,
    device_breakdowns,
    kernel_type,
    length,
    merge,
)
from fleetbench.profile.trace.comm import CommRules
from fleetbench.profile.trace.idle import StreamIdle, idle_breakdown
from fleetbench.profile.trace.load import US, DeviceEvent, HostOp, TraceEvents, load_trace, read_events
from fleetbench.profile.trace.queue import StepLaunches, StreamQueue, queue_lengths, step_launches
from fleetbench.profile.trace.windows import Window, choose_window, step_of

__all__ = [
    "DeviceBreakdown",
    "LaunchStats",
    "NameStat",
    "StepBreakdown",
    "ThreadBusy",
    "TraceSummary",
    "WindowInfo",
    "kernel_type",
    "length",
    "load_trace",
    "merge",
    "summarize_events",
    "summarize_trace",
]

CPU_ONLY_NOTE = (
    "no GPU events in this trace (a CPU-only profile): the breakdown covers the CPU threads, "
    "with the host side of collectives (gloo, c10d) as communication"
)

log = logging.getLogger(__name__)


@dataclass
class NameStat:
    """Calls and time of one kernel or CPU op name, summed over the window."""

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
    host_wait_s: float  # device idle (no stream busy) while a stream waited for the host's launch (`trace.idle`)
    short_kernels: int  # kernels that ran shorter than their launch call


@dataclass
class CommRuleUse:
    """Kernels one communication rule counted: how many launches, their time, an example name."""

    rule: str
    kernels: int
    total_s: float
    example: str
    not_hta: int = 0  # of those, kernels HTA's rule leaves out of communication
    not_hta_s: float = 0.0


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
class StepBreakdown:
    """One ProfilerStep: its host duration and the breakdown of the device work it launched."""

    name: str
    number: int
    duration_s: float
    devices: list[DeviceBreakdown] = field(default_factory=list)


@dataclass
class WindowInfo:
    """The window a summary covers (see `trace.windows`) and the steps in it and left out of it."""

    kind: str = "trace"
    description: str = ""
    steps: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, window: Window) -> WindowInfo:
        """The plain-data form of a window."""
        return cls(window.kind, window.description, [s.name for s in window.steps], [s.name for s in window.left_out])


@dataclass
class TraceSummary:
    """Everything `summarize_trace` found in one trace; `note` says what the trace lacked, if anything."""

    path: str
    rank: int
    device_names: list[str]
    has_device_events: bool
    note: str
    window: WindowInfo = field(default_factory=WindowInfo)
    devices: list[DeviceBreakdown] = field(default_factory=list)
    steps: list[StepBreakdown] = field(default_factory=list)
    top_kernels: list[NameStat] = field(default_factory=list)
    top_ops: list[NameStat] = field(default_factory=list)
    launch: LaunchStats | None = None
    idle_streams: list[StreamIdle] = field(default_factory=list)  # HTA's idle-time breakdown per stream
    queues: list[StreamQueue] = field(default_factory=list)  # HTA's queue-length summary per stream
    step_launches: list[StepLaunches] = field(default_factory=list)  # launch delays step by step
    communication: str = ""  # which rules made a kernel communication
    comm_rules: list[CommRuleUse] = field(default_factory=list)
    cpu_threads: list[ThreadBusy] = field(default_factory=list)
    hta_differences: list[str] = field(default_factory=list)
    left_out: str = ""  # complete events whose times are not times: how many, why, the first of each

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the derived shares that `asdict` leaves out."""
        data = asdict(self)
        _add_derived(self.devices, data["devices"])
        for step, raw in zip(self.steps, data["steps"], strict=True):
            _add_derived(step.devices, raw["devices"])
        for thread, raw in zip(self.cpu_threads, data["cpu_threads"], strict=True):
            raw["busy_share"] = thread.busy_share
        return data


def _add_derived(devices: list[DeviceBreakdown], raws: list[dict[str, Any]]) -> None:
    for device, raw in zip(devices, raws, strict=True):
        raw["shares"] = device.shares
        raw["comm_overlap_ratio"] = device.comm_overlap_ratio


def summarize_trace(path: Path, top: int = 15, window: str = "steps", rules: CommRules = DEFAULT_RULES) -> TraceSummary:
    """Breakdown per device and per step, the `top` kernels and CPU ops, launch gaps and thread load.

    `window` is `steps` (HTA's default) or `trace`; `rules` say which kernels are communication
    (`trace.comm`; CommRules("hta") for HTA's); UserError when `path` is not a readable trace.
    """
    return summarize_events(read_events(path), top, window, rules)


def summarize_events(
    events: TraceEvents, top: int = 15, window: str = "steps", rules: CommRules = DEFAULT_RULES
) -> TraceSummary:
    """`summarize_trace` of a trace already read."""
    chosen = choose_window(events.steps, window)
    device = [e for e in events.device if chosen.holds_device(e)]
    ops = [op for op in events.cpu_ops if chosen.holds(op.start)]
    summary = TraceSummary(
        path=str(events.path),
        rank=events.rank,
        device_names=events.device_names,
        has_device_events=bool(events.device),
        note="",
        window=WindowInfo.of(chosen),
        left_out=events.dropped_note(),
        communication=rules.description,
    )
    if summary.left_out:
        log.warning("trace %s: %s", events.path, summary.left_out)
    if device:
        summary.devices = device_breakdowns(events.rank, device, rules)
        summary.top_kernels = _top_kernels(device, summary.devices, top)
        idle = idle_breakdown(device)
        summary.idle_streams = idle.streams
        summary.launch = _launch_stats(device, sum(idle.host_wait_s.values()))
        summary.queues = queue_lengths(device)
        summary.step_launches = step_launches(device, chosen)
        summary.comm_rules = _comm_rule_uses(device, rules)
        summary.hta_differences = _hta_differences(events, device, chosen, summary.comm_rules)
    else:
        summary.note = CPU_ONLY_NOTE if ops else "no GPU events and no CPU ops in this trace: nothing to summarise"
        cpu = cpu_breakdown(events.rank, ops)
        summary.devices = [cpu] if cpu is not None else []
    summary.steps = _step_breakdowns(events.rank, chosen, device, ops, rules)
    summary.top_ops = _top_ops(ops, top)
    summary.cpu_threads = _thread_busy(ops)
    return summary


def _step_breakdowns(
    rank: int, window: Window, device: list[DeviceEvent], ops: list[HostOp], rules: CommRules
) -> list[StepBreakdown]:
    """Per step of the window, the breakdown of the device events it launched (CPU ops it ran, on CPU)."""
    if not window.steps:
        return []
    starts = [s.start for s in window.steps]
    by_step_device: dict[str, list[DeviceEvent]] = defaultdict(list)
    by_step_ops: dict[str, list[HostOp]] = defaultdict(list)
    for e in device:
        step = step_of(window.steps, starts, e.start if e.launch is None else e.launch)
        if step is not None:
            by_step_device[step.name].append(e)
    if not device:
        for op in ops:
            step = step_of(window.steps, starts, op.start)
            if step is not None:
                by_step_ops[step.name].append(op)
    out = []
    for step in window.steps:
        row = StepBreakdown(step.name, step.number, (step.end - step.start) * US)
        if device:
            row.devices = device_breakdowns(rank, by_step_device[step.name], rules)
        else:
            cpu = cpu_breakdown(rank, by_step_ops[step.name])
            row.devices = [cpu] if cpu is not None else []
        out.append(row)
    return out


def _comm_rule_uses(device: list[DeviceEvent], rules: CommRules) -> list[CommRuleUse]:
    """Per communication rule that matched: its kernels' launches and time, largest first."""
    uses: dict[str, CommRuleUse] = {}
    for e in device:
        rule = rules.kernel_rule(e.name, e.collective_args)
        if rule is None:
            continue
        use = uses.get(rule)
        if use is None:
            use = uses[rule] = CommRuleUse(rule, 0, 0.0, short_name(e.name))
        use.kernels += 1
        use.total_s += (e.end - e.start) * US
        if HTA_RULES.kernel_rule(e.name) is None:
            use.not_hta += 1
            use.not_hta_s += (e.end - e.start) * US
    return sorted(uses.values(), key=lambda u: u.total_s, reverse=True)


def _hta_differences(
    events: TraceEvents, device: list[DeviceEvent], window: Window, comm: list[CommRuleUse]
) -> list[str]:
    """Where HTA's figures for this trace would differ from ours, and why."""
    out = []
    beyond = [use for use in comm if use.not_hta]
    if beyond:
        named = ", ".join(f"{u.rule} {u.not_hta} ({u.not_hta_s * 1e3:.3f} ms, e.g. {u.example})" for u in beyond)
        out.append(
            f"kernels counted as communication by what they do, which HTA (only names matching ^nccl.*Kernel) "
            f"counts as computation: {named}; `--comm hta` applies HTA's rule"
        )
    if events.host_streams:
        out.append(
            f"{events.host_streams} host events carry a stream id (e.g. Triton/Inductor launch records): HTA takes "
            "every event with a stream for GPU work, so its busy time and span include them; device events only here"
        )
    if events.gpu_steps:
        out.append(
            f"{events.gpu_steps} ProfilerStep annotations on the device's timeline: HTA can cut its step window by "
            "those instead of the host's ProfilerSteps; here the window is always cut by the host's"
        )
    fractional = sum(1 for e in device if e.start % 1 or e.end % 1)
    if fractional:
        out.append(
            f"{fractional} device events have fractional-µs times: HTA rounds each inward to whole µs "
            "(start up, end down), turning busy time into idle; kept exact here"
        )
    if events.syncs:
        out.append(
            f"{events.syncs} cuda_sync events (host waits recorded on the device timeline) left out of device "
            "time; HTA counts those on a stream as device work"
        )
    unlaunched = sum(1 for e in device if e.launch is None)
    if unlaunched and window.cut is not None:
        out.append(
            f"{unlaunched} device events have no launch in the trace (launched before it started): kept here "
            "by their start; HTA's step window drops them"
        )
    return out


def _top_kernels(device: list[DeviceEvent], devices: list[DeviceBreakdown], top: int) -> list[NameStat]:
    totals: dict[str, list[float]] = defaultdict(list)
    for e in device:
        totals[e.name].append((e.end - e.start) * US)
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
    return unique_shorts(sorted(stats, key=lambda s: s.total_s, reverse=True)[:top])


def unique_shorts(stats: list[NameStat]) -> list[NameStat]:
    """Give names that share a short form (`FillFunctor<int>` and `<long>` both print as the kernel's
    short name) their label instead, the short form with a hash of the full name: one row, one name."""
    names: dict[str, set[str]] = defaultdict(set)
    for stat in stats:
        names[stat.short].add(stat.name)
    for stat in stats:
        if len(names[stat.short]) > 1:
            stat.short = stat.label  # the full name itself where it is its own short form
    return stats


def _self_times(cpu_ops: list[HostOp]) -> list[tuple[HostOp, float]]:
    """Each op with its self time: its duration minus that of the ops nested directly in it."""
    by_thread: dict[tuple[str, str], list[HostOp]] = defaultdict(list)
    for op in cpu_ops:
        by_thread[op.thread].append(op)
    out: list[tuple[HostOp, float]] = []
    for ops in by_thread.values():
        ops.sort(key=lambda op: (op.start, -op.end))
        stack: list[list[Any]] = []  # [op, children time]
        for op in ops:
            while stack and stack[-1][0].end <= op.start:
                done = stack.pop()
                out.append((done[0], done[0].end - done[0].start - done[1]))
            if stack:
                stack[-1][1] += op.end - op.start
            stack.append([op, 0.0])
        out.extend((done, done.end - done.start - children) for done, children in reversed(stack))
    return out


def _top_ops(cpu_ops: list[HostOp], top: int) -> list[NameStat]:
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for op, self_us in _self_times(cpu_ops):
        row = totals[op.name]
        row[0] += 1
        row[1] += (op.end - op.start) * US
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
    return unique_shorts(sorted(stats, key=lambda s: s.self_s or 0.0, reverse=True)[:top])


def _launch_stats(device: list[DeviceEvent], host_wait: float) -> LaunchStats | None:
    launched = [e for e in device if e.launch is not None]
    if not launched:
        return None
    delays = sorted((e.start - e.launch) * US for e in launched if e.launch is not None)
    short = sum(1 for e in launched if e.category == "kernel" and e.end - e.start < e.launch_dur)
    return LaunchStats(
        launches=len(delays),
        delay_median_s=statistics.median(delays),
        delay_p90_s=delays[min(len(delays) - 1, int(0.9 * len(delays)))],
        delay_max_s=delays[-1],
        host_wait_s=host_wait,
        short_kernels=short,
    )


def _thread_busy(cpu_ops: list[HostOp]) -> list[ThreadBusy]:
    by_thread: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for op in cpu_ops:
        by_thread[op.thread].append((op.start, op.end))
    out = []
    for (pid, tid), intervals in by_thread.items():
        merged = merge(intervals)
        out.append(ThreadBusy(pid=pid, tid=tid, span_s=(merged[-1][1] - merged[0][0]) * US, ops_s=length(merged) * US))
    return sorted(out, key=lambda t: t.ops_s, reverse=True)
