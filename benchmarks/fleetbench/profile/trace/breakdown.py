"""Temporal breakdown of one device, or of one CPU rank, as Holistic Trace Analysis defines it.

HTA (hta/analyzers/breakdown_analysis.py, communication_analysis.py, hta/utils/utils.py):
  - the span runs from the first device event's start to the last one's end;
  - idle = span minus the union of all event intervals (overlaps across streams merged);
  - compute = union of computation intervals, non-compute = busy minus compute;
  - communication-computation overlap = the share of communication time (union of NCCL
    intervals) during which computation runs too.
Device events are kernels, memcpys and memsets: communication by the rules of `trace.comm` (HTA's
own: a name containing `nccl`; ours by default: every family of collective kernels, DeepEP,
NVSHMEM/multimem and custom all-reduce included), `Memcpy`/`Memset` (or those categories) memory,
anything else computation. HTA's non-compute time
is split here into communication not hidden under compute, then memory not hidden under either, so
compute + communication + memory + idle = span exactly.

On a CPU-only trace the rank's threads take the device's place: the host side of collectives
(`gloo:all_gather` on gloo's worker thread, `c10d::` ops, `record_param_comms`, `nccl:` record
functions) is communication, including the ops nested in it; every other op is computation; a
CPU has no copy engine, so memory stays 0. Time under no op on any thread is idle. A host thread
blocked on a collective's result inside another op (FSDP2's post-backward hook waits for its
reduce-scatter in `RegisterPostBackwardFunctionBackward`'s own time) cannot be told from work, so
it counts as computation: on CPU ranks the overlap is an upper bound and the exposed
communication a lower one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from fleetbench.profile.trace.comm import CommRules
from fleetbench.profile.trace.load import US, DeviceEvent, HostOp

Interval = tuple[float, float]
KINDS = ("computation", "communication", "memory")
HTA_RULES = CommRules("hta")
DEFAULT_RULES = CommRules()


def kernel_type(name: str, category: str, rules: CommRules = HTA_RULES, collective_args: bool = False) -> str:
    """HTA's kernel types, communication, memory, computation; communication by `rules` (HTA's by default)."""
    if rules.kernel_rule(name, collective_args) is not None:
        return "communication"
    if category in ("memcpy", "memset") or "Memcpy" in name or "Memset" in name:
        return "memory"
    return "computation"


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of `intervals`, as sorted, non-overlapping intervals."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def length(intervals: Iterable[Interval]) -> float:
    """Total length of `intervals` (merge them first when they may overlap)."""
    return sum(end - start for start, end in intervals)


def subtract(keep: list[Interval], remove: list[Interval]) -> list[Interval]:
    """The parts of merged `keep` outside merged `remove` (both sorted and non-overlapping)."""
    out: list[Interval] = []
    index = 0
    for start, end in keep:
        while index < len(remove) and remove[index][1] <= start:
            index += 1
        cursor, probe = start, index
        while probe < len(remove) and remove[probe][0] < end:
            if remove[probe][0] > cursor:
                out.append((cursor, remove[probe][0]))
            cursor = max(cursor, remove[probe][1])
            probe += 1
        if cursor < end:
            out.append((cursor, end))
    return out


@dataclass
class DeviceBreakdown:
    """HTA's temporal breakdown of one device (or a CPU rank, device `cpu`); every time in seconds."""

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

    @property
    def comm_overlap_ratio(self) -> float | None:
        """HTA's overlap: the share of communication time with computation running too; None without any."""
        if self.communication_total_s <= 0:
            return None
        return self.comm_compute_overlap_s / self.communication_total_s


def breakdown(rank: int, device: str, events: int, kinds: dict[str, list[Interval]]) -> DeviceBreakdown | None:
    """The breakdown of intervals (microseconds) sorted into KINDS; None when there are none."""
    every = merge(i for kind in KINDS for i in kinds.get(kind, ()))
    if not every:
        return None
    span = every[-1][1] - every[0][0]
    busy = length(every)
    compute = merge(kinds.get("computation", ()))
    communication = merge(kinds.get("communication", ()))
    compute_s = length(compute)
    comm_total = length(communication)
    comm_or_compute = length(merge(compute + communication))
    return DeviceBreakdown(
        rank=rank,
        device=device,
        events=events,
        span_s=span * US,
        busy_s=busy * US,
        compute_s=compute_s * US,
        communication_s=(comm_or_compute - compute_s) * US,
        memory_s=(busy - comm_or_compute) * US,
        idle_s=(span - busy) * US,
        communication_total_s=comm_total * US,
        comm_compute_overlap_s=(compute_s + comm_total - comm_or_compute) * US,
    )


def device_breakdowns(rank: int, events: list[DeviceEvent], rules: CommRules = DEFAULT_RULES) -> list[DeviceBreakdown]:
    """One breakdown per device the events ran on, sorted by device; communication by `rules`."""
    by_device: dict[str, dict[str, list[Interval]]] = defaultdict(lambda: defaultdict(list))
    counts: dict[str, int] = defaultdict(int)
    types: dict[tuple[str, str, bool], str] = {}
    for e in events:
        key = (e.name, e.category, e.collective_args)
        kind = types.get(key)
        if kind is None:
            kind = types[key] = kernel_type(e.name, e.category, rules, e.collective_args)
        by_device[e.device][kind].append((e.start, e.end))
        counts[e.device] += 1
    out = []
    for device in sorted(by_device):
        found = breakdown(rank, device, counts[device], by_device[device])
        if found is not None:
            out.append(found)
    return out


def cpu_kinds(ops: list[HostOp]) -> dict[str, list[Interval]]:
    """Computation and communication intervals of a CPU rank's ops (see the module docstring).

    Per thread, an op's time inside a collective counts as communication only, so the copies a
    collective makes on gloo's thread, or a collective called inside an autograd node, are not
    taken for computation that hides it.
    """
    threads: dict[tuple[str, str], dict[str, list[Interval]]] = defaultdict(lambda: defaultdict(list))
    for op in ops:
        kind = "communication" if op.collective else "computation"
        threads[op.thread][kind].append((op.start, op.end))
    kinds: dict[str, list[Interval]] = {"computation": [], "communication": []}
    for thread in threads.values():
        communication = merge(thread["communication"])
        kinds["communication"].extend(communication)
        kinds["computation"].extend(subtract(merge(thread["computation"]), communication))
    return kinds


def cpu_breakdown(rank: int, ops: list[HostOp]) -> DeviceBreakdown | None:
    """The breakdown of a CPU-only rank over all its threads; None without ops."""
    return breakdown(rank, "cpu", len(ops), cpu_kinds(ops))
